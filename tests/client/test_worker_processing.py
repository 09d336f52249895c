"""A model no mmctl family handles: ``send`` (and the Python Client) go through the
worker's own processing (``media_refs``), said once on stderr; the commands that
preprocess refuse it naming the families and ``--processing worker``.

The worker is the stub serving a copy of the OneVision fixture folder whose
``config.json`` says ``model_type`` ``some_new_vlm``: it takes media_refs as a
worker with the model's own processor does and refuses preprocessed tensors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import grpc
import pytest

from mmctl.media import synth
from mmctl.models import registry
from tests.conftest import Stub, _stub

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"
PROMPT = "Which colours appear, in order?"
NOTE = "no mmctl family preprocesses it, so the worker does"


@pytest.fixture(scope="module")
def new_vlm(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "some-new-vlm"
    shutil.copytree(FAMILIES / "llava_onevision", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="some_new_vlm", architectures=["SomeNewVlmForConditionalGeneration"])
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def new_model(new_vlm):
    from mmctl.checkpoint.source import from_dir
    from mmctl.models.model import WorkerModel, load_any

    model = load_any(source=from_dir(new_vlm))
    assert isinstance(model, WorkerModel)
    return model


@pytest.fixture(scope="module")
def new_stub(new_model):
    s = _stub(new_model)
    yield s
    s.close()


@pytest.fixture(scope="module")
def red(media_dir) -> Path:
    return synth.write_image(media_dir / "red.png", synth.color_frame((255, 0, 0), 90, 130))


def send(cli, stub: Stub, *args: object):
    return cli("send", *args, "--target", stub.running.address)


def notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if NOTE in line]


def one_error(err: str) -> tuple[str, str]:
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error: ")]
    hints = [line for line in lines if line.startswith("Hint: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0], hints[0] if hints else ""


def test_send_goes_through_the_worker_and_says_so_once(cli, new_stub, red, red_blue):
    r = send(cli, new_stub, red, red_blue, "-p", PROMPT, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)  # stdout is the one document, nothing else
    assert doc["answer"] == "red; red, blue"
    decision = doc["decisions"]["processing"]
    assert decision["value"] == "worker" and decision["reason"].startswith("auto: ")
    assert "some_new_vlm" in decision["reason"]
    assert doc["model"]["family"] is None and doc["model"]["model_type"] == "some_new_vlm"
    assert next(c["name"] for c in doc["checks"] if not c["ran"]) == "placeholders"
    said = notes(r.err)
    assert len(said) == 1 and "model_type 'some_new_vlm'" in said[0], r.err
    assert "Error" not in r.err


def test_send_streams_the_answer_with_the_model_folder(cli, new_stub, new_vlm, red):
    r = send(cli, new_stub, red, "--model-dir", new_vlm, "-p", PROMPT)
    assert r.code == 0, r.err
    assert r.out == "red\n"
    assert len(notes(r.err)) == 1


def test_the_client_says_it_once_for_many_requests(new_stub, red, red_blue):
    import mmctl

    said: list[str] = []
    with mmctl.Client(new_stub.running.address) as client:
        results = list(client.send_many([red, red_blue, red], PROMPT, on_note=said.append))
        again = client.send(red, PROMPT, on_note=said.append)
    assert [r.answer for r in results] + [again.answer] == ["red", "red, blue", "red", "red"]
    assert len([s for s in said if NOTE in s]) == 1, said


def test_a_known_family_stays_client_side_without_a_note(cli, stub, red_blue):
    r = send(cli, stub, red_blue, "-p", PROMPT, "--json")
    assert r.code == 0, r.err
    decision = json.loads(r.out)["decisions"]["processing"]
    assert decision == {"value": "client", "reason": "auto: mmctl preprocesses qwen3-vl"}
    assert not notes(r.err)


def test_processing_client_forced_on_an_unknown_model_is_refused(cli, new_stub, red):
    r = send(cli, new_stub, red, "--processing", "client")
    assert r.code == 3
    message, hint = one_error(r.err)
    assert "model_type='some_new_vlm'" in message
    _hint_names_the_families_and_the_way(hint)


def test_a_worker_that_cannot_process_names_both_facts(cli, new_model, red):
    legacy = _stub(new_model, legacy_proto=True)  # advertises no mm_processor
    try:
        r = send(cli, legacy, red)
    finally:
        legacy.close()
    assert r.code == 3
    message, _ = one_error(r.err)
    assert "no mmctl model family handles" in message
    assert "the worker does not process media itself (mm_processor is empty)" in message


def test_client_side_options_are_refused_for_a_worker_processed_model(cli, new_stub, red):
    r = send(cli, new_stub, red, "--fps", "1")
    assert r.code == 2
    message, _ = one_error(r.err)
    assert "some_new_vlm is preprocessed by the worker" in message and "--fps" in message


def test_no_chat_is_refused_for_a_model_whose_placeholders_mmctl_does_not_know(cli, new_stub, red):
    r = send(cli, new_stub, red, "--no-chat")
    assert r.code == 2
    message, hint = one_error(r.err)
    assert "--no-chat" in message and hint == "Hint: drop --no-chat"


@pytest.mark.parametrize(
    "command", [["build", "-o", "{tmp}/r.pb"], ["inspect-tokens"], ["preprocess"]]
)
def test_the_preprocessing_commands_refuse_it(cli, new_vlm, red, command, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    r = cli(args[0], red, *args[1:], "--model-dir", new_vlm)
    assert r.code == 3
    assert r.out == ""
    message, hint = one_error(r.err)
    assert "some_new_vlm" in message
    _hint_names_the_families_and_the_way(hint)


def _hint_names_the_families_and_the_way(hint: str) -> None:
    names = registry.canonical_names()
    aliases = {a for f in registry.FAMILIES for a in f.aliases}
    said = [w for w in hint.replace(",", " ").split() if w in set(names) | aliases]
    assert said == names, hint  # each family once, by its canonical name
    assert "--processing worker" in hint


# ---- the stub, as a worker with the model's own processor ----


def _refs_request(stub: Stub, model, path: Path, ids: list[int]):
    import base64

    from mmctl import modality
    from mmctl.media.probe import MediaKind
    from mmctl.wire import proto

    engine = proto.engine_pb2
    url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    return engine.GenerateRequest(
        request_id="refs-1",
        tokenized=engine.TokenizedInput(original_text="x", input_ids=ids),
        sampling_params=engine.SamplingParams(max_tokens=8),
        media_refs=engine.MediaRefs(
            items=[engine.MediaRef(modality=modality.to_wire(MediaKind.IMAGE), url=url)]
        ),
    )


def test_the_stub_expands_the_models_own_placeholder(new_stub, new_model, red):
    image = new_model.files.config["image_token_index"]
    tokens, complete = new_stub.generate(_refs_request(new_stub, new_model, red, [1, image, 2]))
    assert new_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red"
    # 90x130 pixels: 4 x 5 cells of 28 x 28, one token each, in place of the one placeholder
    assert complete.prompt_tokens == 2 + 4 * 5


def test_the_stub_refuses_items_without_their_placeholders(new_stub, new_model, red):
    with pytest.raises(grpc.RpcError) as err:
        new_stub.generate(_refs_request(new_stub, new_model, red, [1, 2, 3]))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "1 image item(s) but 0 image placeholder(s)" in err.value.details()


def test_the_stub_refuses_tensors_it_cannot_check(new_stub, stub, red):
    import mmctl

    with mmctl.Client(stub.running.address) as client:
        built = client.build(red, PROMPT)  # qwen3-vl tensors, inline
    with pytest.raises(grpc.RpcError) as err:
        new_stub.generate(built.request)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cannot check" in err.value.details() and "media_refs" in err.value.details()


def test_build_for_a_worker_refuses_it_too(cli, new_stub, red, tmp_path):
    out = tmp_path / "r.pb"
    r = cli("build", red, "-o", out, "--target", new_stub.running.address)
    assert r.code == 3 and not out.exists()
    message, hint = one_error(r.err)
    assert "some_new_vlm" in message
    _hint_names_the_families_and_the_way(hint)


def test_the_stub_refuses_family_options_for_an_unknown_model(cli, new_vlm, tmp_path):
    r = cli("stub-worker", "--model-dir", new_vlm, "--port", "0", "--record", tmp_path / "rec")
    assert r.code == 2
    message, hint = one_error(r.err)
    assert "some_new_vlm" in message and "--record" in message
    _hint_names_the_families_and_the_way(hint)
