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
    # media references carry no tensor: no shared-memory decision to show
    assert doc["decisions"]["transport"] == {
        "value": "inline",
        "reason": "worker processing: media_refs, no tensors",
    }
    said = notes(r.err)
    assert len(said) == 1 and "model_type 'some_new_vlm'" in said[0], r.err
    assert "Error" not in r.err


def test_send_streams_the_answer_with_the_model_folder(cli, new_stub, new_vlm, red):
    r = send(cli, new_stub, red, "--model-dir", new_vlm, "-p", PROMPT)
    assert r.code == 0, r.err
    assert r.out == "red\n"
    assert len(notes(r.err)) == 1


def test_send_refuses_shm_for_worker_processing(cli, new_stub, red):
    r = send(cli, new_stub, red, "--transport", "shm")
    assert r.code == 2 and r.out == ""
    message, hint = one_error(r.err)
    assert "--transport shm: with worker processing" in message and "drop --transport" in hint


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


# ---- bench and batch: the same choice, said once a run ----


def _bench(cli, stub: Stub, *args: object):
    return cli("bench", *args, "--target", stub.running.address, "--warmup", "1", "--seed", "3")


def test_bench_goes_through_the_worker_and_says_so_once(cli, new_stub, red, red_blue, tmp_path):
    per_request = tmp_path / "requests.jsonl"
    r = _bench(cli, new_stub, "--video", red, "--video", red_blue, "--num-prompts", "6",
               "--per-request", per_request, "-p", PROMPT, "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)  # stdout is the one document
    assert doc["arms"] == ["inline/media_refs"]
    assert doc["processing"]["value"] == "worker" and "some_new_vlm" in doc["processing"]["reason"]
    assert doc["floors"] == {}  # a tensor's floors: there is none here
    for prep, path in zip(doc["prepared"], (red, red_blue), strict=True):
        assert prep["pixel_dtype"] is None and prep["media_items"] == 1
        # the payload is the request, whose data: URL carries the file (base64)
        assert prep["payload_bytes"] > path.stat().st_size * 4 / 3
    run = doc["runs"][0]
    assert (run["completed"], run["failed"]) == (6, 0)
    records = [json.loads(line) for line in per_request.read_text().splitlines()]
    answers = {(rec["item"], rec["text"]) for rec in records}
    assert answers == {("red.png", "red"), ("red-blue.mp4", "red, blue")}
    assert {rec["arm"] for rec in records} == {"inline/media_refs"}
    # warm-up and measured requests, two items: the choice said once
    assert len(notes(r.err)) == 1, r.err
    assert "Error" not in r.err


def test_bench_for_people_names_the_request_it_prepared(cli, new_stub, red):
    r = _bench(cli, new_stub, "--video", red, "--num-prompts", "2")
    assert r.code == 0, r.err
    assert "red.png (media_refs): a " in r.out and "inline/media_refs" in r.out
    assert len(notes(r.err)) == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--transport", "shm"], "--transport shm: with worker processing"),
        (["--transport", "inline,shm"], "--transport shm: with worker processing"),
        (["--sizes", "1MB"], "--sizes 1MB: synthetic sizes are mmctl's own pixel tensors"),
    ],
)
def test_bench_refuses_what_has_no_tensor_to_carry(cli, new_stub, red, args, said):
    media = [] if "--sizes" in args else ["--video", red]
    r = _bench(cli, new_stub, *media, *args, "--num-prompts", "2")
    assert r.code == 2
    message, _ = one_error(r.err)
    assert said in message


def test_bench_processing_client_on_an_unknown_model_is_refused(cli, new_stub, red):
    r = _bench(cli, new_stub, "--video", red, "--processing", "client")
    assert r.code == 3 and r.out == ""
    message, hint = one_error(r.err)
    assert "model_type='some_new_vlm'" in message
    _hint_names_the_families_and_the_way(hint)


def test_bench_checks_processing_options_as_send_does(cli, new_stub, red):
    r = _bench(cli, new_stub, "--video", red, "--processing", "worker", "--pixel-dtype", "float32")
    assert r.code == 2
    message, _ = one_error(r.err)
    assert "--processing worker" in message and "--pixel-dtype" in message
    r = _bench(cli, new_stub, "--video", red, "--processing", "client", "--media-ref", "file")
    assert r.code == 2
    assert "--media-ref applies only with --processing worker" in one_error(r.err)[0]


def test_bench_needs_every_target_able_to_process(cli, new_stub, new_model, red):
    legacy = _stub(new_model, legacy_proto=True)  # advertises no mm_processor
    try:
        r = cli("bench", "--video", red, "--num-prompts", "2",
                "-t", f"{new_stub.running.address},{legacy.running.address}")  # fmt: skip
    finally:
        legacy.close()
    assert r.code == 3
    message, _ = one_error(r.err)
    assert "the worker does not process media itself (mm_processor is empty)" in message


def test_bench_keeps_a_known_family_client_side_without_a_note(cli, stub, red_blue):
    r = _bench(cli, stub, "--video", red_blue, "--num-prompts", "2", "--no-floors", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["processing"] == {"value": "client", "reason": "auto: mmctl preprocesses qwen3-vl"}
    assert sorted(arm.split("/")[0] for arm in doc["arms"]) == ["inline", "shm"]
    assert all(prep["pixel_dtype"] is not None for prep in doc["prepared"])
    assert not notes(r.err)


@pytest.fixture
def dataset(tmp_path, red, red_blue) -> Path:
    """Three items to answer (an image, a video, both), one missing file, one id twice."""
    lines = [
        {"id": "image", "prompt": PROMPT, "media": [str(red)]},
        {"id": "video", "prompt": PROMPT, "media": [str(red_blue)]},
        {"id": "both", "prompt": PROMPT, "media": [str(red), str(red_blue)]},
        {"id": "missing", "media": [str(tmp_path / "nowhere.png")]},
        {"id": "image", "media": [str(red)]},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


BATCH_ANSWERS = {"image": "red", "video": "red, blue", "both": "red; red, blue"}


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_batch_goes_through_the_worker_each_id_once(
    cli, new_stub, dataset, tmp_path, engine, monkeypatch, no_leaks
):
    if engine == "ray":
        pytest.importorskip("ray")
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out.jsonl"
    r = cli("batch", dataset, "-o", out, "-t", new_stub.running.address, "--workers", "1",
            "--engine", engine, "--json")  # fmt: skip
    assert r.code == 7, r.err  # the missing file and the second "image" are error lines
    counts = json.loads(r.out)  # stdout is the one document
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert (counts["succeeded"], counts["failed"]) == (3, 2), (counts, lines, r.err)
    ids = [d["custom_id"] for d in lines]
    # one line per input line; the second "image" is its duplicate_id error line
    assert sorted(ids) == ["both", "image", "image", "missing", "video"]
    answered = {
        d["custom_id"]: d["response"]["body"]["choices"][0]["message"]["content"]
        for d in lines
        if d["error"] is None
    }
    assert answered == BATCH_ANSWERS
    assert len([d for d in lines if d["error"] is None]) == len(BATCH_ANSWERS)  # each once
    errors = sorted(d["error"]["code"] for d in lines if d["error"] is not None)
    assert errors == ["duplicate_id", "invalid_input"]
    for d in lines:
        if d["error"] is None:
            extras = d["mmctl"]
            assert extras["transport"] == "inline" and extras["bytes"]["payload"] == 0
            assert extras["bytes"]["request"] > 0
    assert len(notes(r.err)) == 1, r.err


def test_batch_processing_client_on_an_unknown_model_is_refused(cli, new_stub, dataset, tmp_path):
    out = tmp_path / "out.jsonl"
    r = cli("batch", dataset, "-o", out, "-t", new_stub.running.address, "--processing", "client")
    assert r.code == 3
    message, hint = one_error(r.err)
    assert "model_type='some_new_vlm'" in message
    _hint_names_the_families_and_the_way(hint)
    assert not out.exists() or out.read_text() == ""


def test_batch_refuses_shm_for_worker_processing(cli, new_stub, dataset, tmp_path):
    r = cli("batch", dataset, "-o", tmp_path / "out.jsonl", "-t", new_stub.running.address,
            "--transport", "shm")  # fmt: skip
    assert r.code == 2
    assert "--transport shm: with worker processing" in one_error(r.err)[0]


def test_batch_checks_processing_options_before_any_worker(cli, dataset, tmp_path):
    r = cli("batch", dataset, "-o", tmp_path / "out.jsonl", "-t", "127.0.0.1:1",
            "--processing", "client", "--media-ref", "file")  # fmt: skip
    assert r.code == 2
    assert "--media-ref applies only with --processing worker" in one_error(r.err)[0]


def test_batch_keeps_a_known_family_client_side_without_a_note(
    cli, stub, red_blue, tmp_path, monkeypatch
):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "v", "prompt": PROMPT, "media": [str(red_blue)]}) + "\n")
    out = tmp_path / "out.jsonl"
    r = cli("batch", source, "-o", out, "-t", stub.running.address, "--workers", "1", "--json")
    assert r.code == 0, r.err
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["mmctl"]["bytes"]["payload"] > 0  # mmctl's tensors
    assert not notes(r.err)
