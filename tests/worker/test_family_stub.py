"""The stub worker serving the LLaVA families, Llama 4, GLM, Gemma 4, Qwen3.5, MiniMax-M3-VL and Inkling: what mmctl sends is
accepted and read back right (the colours answer comes from the pixels), and
what vLLM's model for the family would refuse is refused with one sentence.

The stub proves the plumbing; tests/compat/test_family_requests.py proves the
tensors against the goldens and scripts/engine-check against a real engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import mmctl
from mmctl.media import synth
from mmctl.media.probe import MediaKind
from mmctl.models.model import load_model
from mmctl.request import tensors
from mmctl.wire import proto
from tests.conftest import Stub, _stub

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"
MODEL_TYPES = (
    "llava",
    "llava_next",
    "llama4",
    "llava_onevision",
    "gemma4",
    "internvl",
    "minimax_m3_vl",
    "inkling",
)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("family-media")
    red = synth.write_image(folder / "red.png", synth.color_frame((255, 0, 0), 200, 300))
    blue = synth.write_image(folder / "blue.png", synth.color_frame((0, 0, 255), 500, 120))
    return red, blue


@pytest.fixture(scope="module", params=MODEL_TYPES)
def served(request) -> Iterator[tuple[str, Stub]]:
    model = load_model(model_dir=FAMILIES / request.param)
    running = _stub(model)
    try:
        yield request.param, running
    finally:
        running.close()


def _client(stub: Stub, model_type: str) -> mmctl.Client:
    return mmctl.Client(stub.running.address, model_dir=FAMILIES / model_type)


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_two_images_come_back_as_their_colours(served, images, transport):
    model_type, stub = served
    with _client(stub, model_type) as client:
        result = client.send(list(images), "Which colours?", transport=transport)
    assert result.answer == "red; blue"
    check = next(c for c in result.checks if c.name == "placeholder_spans")
    assert check.ran and check.ok


def test_the_float_types_all_read_back(served, images):
    model_type, stub = served
    with _client(stub, model_type) as client:
        for dtype in ("float32", "bfloat16", "float16"):
            result = client.send([images[0]], "Colour?", pixel_dtype=dtype, skip_checks=True)
            assert result.answer == "red", dtype


def test_uint8_is_refused_before_sending(served, images):
    model_type, stub = served
    with _client(stub, model_type) as client, pytest.raises(mmctl.MmctlError, match="uint8"):
        client.send([images[0]], "Colour?", pixel_dtype="uint8")


def _built(stub: Stub, model_type: str, paths: list[Path]):
    with _client(stub, model_type) as client:
        return client.build(paths, "Colour?").request


def _refused(stub: Stub, req) -> str:
    import grpc

    with pytest.raises(grpc.RpcError) as info:
        stub.generate(req)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(info.value.details())


def test_a_pixel_tensor_of_the_wrong_shape_is_refused(served, images):
    model_type, stub = served
    req = _built(stub, model_type, [images[0]])
    td = req.mm_inputs.pixel_values
    pixels = tensors.from_bytes(td.inline, td.shape, td.dtype)
    # a crop, not the model's tile size (Inkling's patches are channels last)
    cut = np.ascontiguousarray(pixels[:, :, :30] if model_type == "inkling" else pixels[..., :300])
    req.mm_inputs.pixel_values.CopyFrom(tensors.inline(cut, td.dtype))
    # vLLM's MiniMax-M3 model has no TensorSchema (its tower's patch rows are Qwen2-VL's):
    # the stub refuses as for those rows.
    want = {"minimax_m3_vl": "3*2*14*14 = 1176 features"}.get(model_type, "input schema")
    assert want in _refused(stub, req)


def test_a_span_that_is_not_the_expansion_is_refused(served, images):
    model_type, stub = served
    req = _built(stub, model_type, [images[0]])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    ids[span.offset + span.length // 2] = ids[0]  # one embedding position overwritten
    req.tokenized.input_ids[:] = ids
    assert "placeholder spans failed: item 1" in _refused(stub, req)


def test_an_unknown_modality_is_refused_by_mmctl_reading_a_request(served, images, tmp_path):
    from mmctl.errors import InputError
    from mmctl.request.view import layout_of

    model_type, stub = served
    req = _built(stub, model_type, [images[0]])
    req.mm_inputs.modality = proto.common_pb2.AUDIO
    with pytest.raises(InputError, match="modality AUDIO, which mmctl does not handle"):
        layout_of(req, load_model(model_dir=FAMILIES / model_type))


def test_video_is_refused_where_the_family_reads_images_only(served, red_blue):
    model_type, stub = served
    if MediaKind.VIDEO in load_model(model_dir=FAMILIES / model_type).spec.modalities:
        pytest.skip(f"{model_type} reads video (test_video_comes_back_as_its_colours)")
    with _client(stub, model_type) as client, pytest.raises(mmctl.MmctlError, match="read image"):
        client.send([red_blue], "Colours?")


def test_video_comes_back_as_its_colours(served, red_blue):
    model_type, stub = served
    if MediaKind.VIDEO not in load_model(model_dir=FAMILIES / model_type).spec.modalities:
        pytest.skip(f"{model_type} reads images only")
    with _client(stub, model_type) as client:
        assert client.send([red_blue], "Colours?").answer == "red, blue"


def test_llama4_needs_im_token_id(images):
    model = load_model(model_dir=FAMILIES / "llama4")
    running = _stub(model)
    try:
        req = _built(running, "llama4", [images[1]])
        assert req.mm_inputs.im_token_id == 200092  # <|patch|>
        req.mm_inputs.ClearField("im_token_id")
        assert "would receive embeddings" in _refused(running, req)
    finally:
        running.close()


def _mmctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmctl", *args], capture_output=True, text=True, timeout=180
    )


@pytest.mark.parametrize(
    "model_type",
    [
        "llava_onevision",
        "gemma4",
        "internvl",
        "glm5_next",
        "minimax_m3_vl",
        "inkling",
        "qwen3_omni_moe",
    ],
)
def test_batch_and_bench_run_a_family(model_type, tmp_path, images, red_blue):
    """A family's images (and video, where it reads video) through ``mmctl batch`` and
    ``mmctl bench``."""
    model = load_model(model_dir=FAMILIES / model_type)
    running = _stub(model)
    try:
        lines = [{"id": "image", "media": [str(images[0])], "prompt": "Colour?"}]
        if MediaKind.VIDEO in model.spec.modalities:
            lines += [
                {"id": "video", "media": [str(red_blue)]},
                {"id": "both", "media": [str(images[1]), str(red_blue)]},
            ]
            want = {"image": "red", "video": "red, blue", "both": "blue; red, blue"}
        else:  # an image family: two images in one line
            lines.append({"id": "two", "media": [str(images[1]), str(images[0])]})
            want = {"image": "red", "two": "blue; red"}
        dataset = tmp_path / "in.jsonl"
        dataset.write_text("".join(json.dumps(line) + "\n" for line in lines))
        out = tmp_path / "out.jsonl"
        target = running.running.address
        done = _mmctl("batch", str(dataset), "-o", str(out), "--target", target)
        assert done.returncode == 0, done.stderr
        answers = {}
        for line in out.read_text().splitlines():
            doc = json.loads(line)
            answers[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
        assert answers == want
        # each item twice: the bench's path for the family, not a load test
        bench = _mmctl("bench", "--dataset", str(dataset), "--target", target, "--json",
                       "--num-prompts", "6")  # fmt: skip
        assert bench.returncode == 0, bench.stderr
        assert json.loads(bench.stdout)
    finally:
        running.close()


#: What ``vllm serve FOLDER`` (``--dtype auto``, a GPU with bfloat16) serves each fixture in:
#: its config.json's top-level ``torch_dtype``.
SERVED_DTYPE = {"llava": "float16", "llava_next": "float16", "llama4": "bfloat16",
                "llava_onevision": "float16", "gemma4": "bfloat16", "internvl": "bfloat16",
                # No dtype in its config.json: float32, which such a GPU serves in bfloat16.
                "minimax_m3_vl": "bfloat16",
                "inkling": "bfloat16"}  # fmt: skip


def test_the_stub_reports_the_folders_dtype_and_send_picks_it(served, images):
    model_type, stub = served
    with _client(stub, model_type) as client:
        server = client.facts().server
        result = client.send([images[0]], "Colour?")
    assert (server.model_dtype, server.multimodal_encoder_dtype) == (SERVED_DTYPE[model_type],) * 2
    assert result.decisions["pixel_dtype"].value == SERVED_DTYPE[model_type]
    assert result.answer == "red"


# ---- GLM-4.1V / GLM-4.6V and Qwen3.5: Qwen-style patch rows, normalized on the device ----
#
# vLLM normalizes their pixels on the device by default, so the default stub takes
# raw uint8; floats go to a stub started without it. GLM's batches both embed at
# <|image|>: a video's span holds one <|image|> run per temporal patch. Qwen3.5 is
# Qwen3-VL's layout with its own folder's ids (248053..248057).

GLM_TYPES = ("glm4v", "glm46v", "glm5_next")
PATCH_TYPES = (*GLM_TYPES, "qwen3_5")


def _default_stub(model_type: str) -> Stub:
    from mmctl.worker import checks

    model = load_model(model_dir=FAMILIES / model_type)
    return _stub(model, device_normalize=checks.device_normalize_for(model.spec, None))


@pytest.fixture(scope="module", params=PATCH_TYPES)
def patched(request) -> Iterator[tuple[str, Stub]]:
    running = _default_stub(request.param)
    try:
        yield request.param, running
    finally:
        running.close()


@pytest.fixture(scope="module", params=GLM_TYPES)
def glm(request) -> Iterator[tuple[str, Stub]]:
    running = _default_stub(request.param)
    try:
        yield request.param, running
    finally:
        running.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_patch_images_and_video_come_back_as_their_colours(patched, images, red_blue, transport):
    model_type, stub = patched
    with _client(stub, model_type) as client:
        result = client.send([*images, red_blue], "Which colours?", transport=transport)
    assert result.answer == "red; blue; red, blue"
    assert result.decisions["pixel_dtype"].value == "uint8"
    check = next(c for c in result.checks if c.name == "mrope_walk")
    assert check.ran and check.ok


@pytest.mark.parametrize("model_type", ["glm46v", "qwen3_5"])
def test_patch_floats_read_back_on_a_worker_without_device_normalization(
    model_type, images, red_blue
):
    model = load_model(model_dir=FAMILIES / model_type)
    running = _stub(model, device_normalize=False)
    try:
        with _client(running, model_type) as client:
            for dtype in ("float32", "bfloat16", "float16"):
                result = client.send(
                    [images[1], red_blue], "Colours?", pixel_dtype=dtype, skip_checks=True
                )
                assert result.answer == "blue; red, blue", dtype
    finally:
        running.close()


def test_glm_batches_embed_at_the_image_token(glm, images, red_blue):
    model_type, stub = glm
    req = _built(stub, model_type, [images[0], red_blue])
    image, video = req.mm_inputs, req.extra_mm_inputs[0]
    assert (
        image.im_token_id
        == video.im_token_id
        == load_model(model_dir=FAMILIES / model_type).token_ids.embed(MediaKind.IMAGE)
    )
    span = video.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)[span.offset : span.offset + span.length]
    assert span.length > ids.count(video.im_token_id) > 0  # markers and timestamps between runs
    video.ClearField("im_token_id")
    assert "would receive embeddings" in _refused(stub, req)


@pytest.mark.parametrize("what", ["features", "rows"])
def test_patch_a_wrong_pixel_shape_is_refused(patched, images, what):
    model_type, stub = patched
    req = _built(stub, model_type, [images[0]])
    td = req.mm_inputs.pixel_values
    pixels = tensors.from_bytes(td.inline, td.shape, td.dtype)
    cut = np.ascontiguousarray(pixels[:, :1000] if what == "features" else pixels[:-4])
    req.mm_inputs.pixel_values.CopyFrom(tensors.inline(cut, td.dtype))
    patch = {"qwen3_5": "16*16 = 1536"}
    want = (
        f"3*2*{patch.get(model_type, '14*14 = 1176')} features"
        if what == "features"
        else "needs sum(t*h*w)"
    )
    assert want in _refused(stub, req)


def test_glm_a_video_run_that_is_not_its_grid_is_refused(glm, red_blue):
    model_type, stub = glm
    req = _built(stub, model_type, [red_blue])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    ids[span.offset + 3] = ids[0]  # one <|image|> of the first run overwritten
    req.tokenized.input_ids[:] = ids
    refusal = _refused(stub, req)
    assert "mrope walk failed: item 1: temporal patch 1 holds a run of 1 <|image|>" in refusal


def test_glm_two_videos_are_refused_before_sending(glm, red_blue):
    model_type, stub = glm
    with _client(stub, model_type) as client, pytest.raises(mmctl.MmctlError, match="2 videos"):
        client.send([red_blue, red_blue], "Colours?")


# ---- Gemma 4: float patch rows with their positions; frames flat by video_frame_counts ----
#
# Each batch embeds at its own placeholder (<|image|>, <|video|>) inside spans that
# hold <|image>/<image|> around every image and frame, and each frame's time.


@pytest.fixture(scope="module")
def gemma() -> Iterator[Stub]:
    running = _stub(load_model(model_dir=FAMILIES / "gemma4"))
    try:
        yield running
    finally:
        running.close()


# ---- InternVL: flat patches, token ids shared by each batch -------------------------


@pytest.fixture(scope="module")
def internvl() -> Iterator[Stub]:
    running = _stub(load_model(model_dir=FAMILIES / "internvl"))
    try:
        yield running
    finally:
        running.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_gemma4_image_and_video_come_back_as_their_colours(gemma, images, red_blue, transport):
    with _client(gemma, "gemma4") as client:
        result = client.send([images[1], red_blue], "Which colours?", transport=transport)
    assert result.answer == "blue; red, blue"
    # Floats in the model's dtype (the folder's config.json: bfloat16), never uint8.
    assert result.decisions["pixel_dtype"].value == "bfloat16"
    check = next(c for c in result.checks if c.name == "placeholder_spans")
    assert check.ran and check.ok


def test_gemma4_batches_embed_at_their_own_placeholders(gemma, images, red_blue):
    req = _built(gemma, "gemma4", [images[0], red_blue])
    image, video = req.mm_inputs, req.extra_mm_inputs[0]
    assert (image.im_token_id, video.im_token_id) == (258880, 258884)
    assert dict(video.flat_keys) == {
        "pixel_values": "video_frame_counts",
        "pixel_position_ids_videos": "video_frame_counts",
    }
    assert list(video.keep_on_cpu_keys) == ["video_frame_counts"]
    span = video.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)[span.offset : span.offset + span.length]
    assert span.length > ids.count(video.im_token_id) > 0  # markers and times between runs
    video.ClearField("im_token_id")
    assert "would receive embeddings" in _refused(gemma, req)


def test_gemma4_positions_that_are_not_the_pixels_are_refused(gemma, images):
    req = _built(gemma, "gemma4", [images[0]])
    td = req.mm_inputs.model_specific_tensors["pixel_position_ids"]
    positions = tensors.from_bytes(td.inline, td.shape, td.dtype)
    req.mm_inputs.model_specific_tensors["pixel_position_ids"].CopyFrom(
        tensors.inline(np.ascontiguousarray(positions[:, :630]), td.dtype)
    )
    assert "pixel_position_ids is int64 [1, 630, 2]" in _refused(gemma, req)


def test_gemma4_frame_counts_that_do_not_split_the_frames_are_refused(gemma, red_blue):
    req = _built(gemma, "gemma4", [red_blue])
    td = req.mm_inputs.model_specific_tensors["video_frame_counts"]
    counts = tensors.from_bytes(td.inline, td.shape, td.dtype)
    req.mm_inputs.model_specific_tensors["video_frame_counts"].CopyFrom(
        tensors.inline(counts + 1, td.dtype)
    )
    assert "pixel_position_ids_videos" in _refused(gemma, req)


def test_gemma4_a_frame_without_its_time_is_refused(gemma, red_blue):
    req = _built(gemma, "gemma4", [red_blue])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    del ids[span.offset : span.offset + 5]  # "00:00" of "00:00 " before the first frame
    ids[span.offset : span.offset] = [0] * 5  # as many tokens, not a time: <pad>
    req.tokenized.input_ids[:] = ids
    assert "placeholder spans failed: item 1: frame 1 of" in _refused(gemma, req)


def test_qwen3_5_a_frame_block_out_of_place_is_refused(images, red_blue):
    """Qwen3.5's video span is one ``<t seconds><|vision_start|>pads<|vision_end|>``
    block per temporal patch (its tokenizer's ids); a pad moved past the block's end
    breaks vLLM's mrope walk."""
    stub = _default_stub("qwen3_5")
    try:
        req = _built(stub, "qwen3_5", [images[0], red_blue])
        video = req.extra_mm_inputs[0]
        assert (req.mm_inputs.im_token_id, video.im_token_id) == (248056, 248057)
        span = video.mm_placeholders[0]
        ids = list(req.tokenized.input_ids)
        block = ids[span.offset : span.offset + span.length]
        end = block.index(248054)  # the first frame's <|vision_end|>
        block[end - 1], block[end] = block[end], block[end - 1]
        ids[span.offset : span.offset + span.length] = block
        req.tokenized.input_ids[:] = ids
        assert "mrope walk failed: item 2" in _refused(stub, req)
    finally:
        stub.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_internvl_image_and_video_in_one_request(internvl, images, red_blue, transport):
    with _client(internvl, "internvl") as client:
        result = client.send([images[1], red_blue], "Colours?", transport=transport)
    assert result.answer == "blue; red, blue"
    req = _built(internvl, "internvl", [images[1], red_blue])
    batches = [req.mm_inputs, *req.extra_mm_inputs]
    assert [b.im_token_id for b in batches] == [151667, 151674]  # <IMG_CONTEXT>, <video>
    for batch, kind in zip(batches, ("image", "video"), strict=True):
        td = batch.model_specific_tensors[f"{kind}_token_id"]
        assert list(td.shape) == [1]
        assert tensors.from_bytes(td.inline, td.shape, td.dtype).tolist() == [batch.im_token_id]
        assert dict(batch.flat_keys) == {"pixel_values": f"{kind}_num_patches"}
        assert list(batch.batched_keys) == [f"{kind}_num_patches"]
        assert f"{kind}_token_id" not in batch.batched_keys  # shared, as vLLM's is


def test_internvl_without_its_token_id_is_refused(internvl, images):
    req = _built(internvl, "internvl", [images[0]])
    del req.mm_inputs.model_specific_tensors["image_token_id"]
    assert "carries no image_token_id tensor" in _refused(internvl, req)


def test_internvl_a_token_id_of_two_values_is_refused(internvl, images):
    req = _built(internvl, "internvl", [images[0], images[1]])
    req.mm_inputs.model_specific_tensors["image_token_id"].CopyFrom(
        tensors.inline(np.asarray([151667, 151674], dtype=np.int64), "int64")
    )
    assert "not one value for the batch" in _refused(internvl, req)


def test_internvl_patch_counts_that_are_not_the_spans_are_refused(internvl, images):
    """Counts that still split the pixels, but give each image embeddings its span
    does not hold (vLLM: a placeholder/embedding count mismatch)."""
    req = _built(internvl, "internvl", [images[0], images[1]])
    td = req.mm_inputs.model_specific_tensors["image_num_patches"]
    counts = tensors.from_bytes(td.inline, td.shape, td.dtype)
    shifted = counts + np.asarray([1, -1], dtype=np.int64)
    td.CopyFrom(tensors.inline(shifted, "int64"))
    assert "placeholder spans failed: item 1" in _refused(internvl, req)


# ---- Nemotron-3-Nano-Omni: video client-side, images the worker's ----


@pytest.fixture(scope="module")
def nemotron() -> Iterator[Stub]:
    running = _stub(load_model(model_dir=FAMILIES / "nemotron_h_omni"))
    try:
        yield running
    finally:
        running.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_nemotron_video_comes_back_as_its_colours(nemotron, red_blue, transport):
    with _client(nemotron, "nemotron_h_omni") as client:
        result = client.send([red_blue], "Colours?", transport=transport)
    assert result.decisions["processing"].value == "client"
    # One colour per tubelet (two frames each): 32 frames of 2 s red then 2 s blue.
    colours = result.answer.split(", ")
    assert colours[0] == "red" and colours[-1] == "blue" and set(colours) == {"red", "blue"}
    req = _built(nemotron, "nemotron_h_omni", [red_blue])
    video = req.mm_inputs
    assert video.encoder_input_key == "pixel_values_flat_video"
    assert not video.HasField("im_token_id")  # the model embeds every position of the span
    assert dict(video.flat_keys) == {
        "pixel_values_flat_video": "video_num_patches",
        "frames_indices": "video_num_patches",
    }


def test_nemotron_a_request_with_an_image_is_the_workers(nemotron, images):
    """The stub's own processing of Nemotron media stands in for vLLM's for images
    (its ``img_context_token_id``); ``<video>`` is no token, so a video reference is
    not modelled there."""
    from mmctl.models.nemotron_h_omni import IMAGES_BY_WORKER

    with _client(nemotron, "nemotron_h_omni") as client:
        result = client.send([images[0]], "Colours?")
    decision = result.decisions["processing"]
    assert decision.value == "worker" and IMAGES_BY_WORKER in decision.reason


def test_nemotron_a_preprocessed_image_batch_is_refused(nemotron, red_blue):
    req = _built(nemotron, "nemotron_h_omni", [red_blue])
    req.mm_inputs.modality = proto.common_pb2.IMAGE
    assert "is a preprocessed image batch" in _refused(nemotron, req)


def test_nemotron_what_its_model_would_refuse_is_refused(nemotron, red_blue):
    req = _built(nemotron, "nemotron_h_omni", [red_blue])
    marked = type(req)()
    marked.CopyFrom(req)
    marked.mm_inputs.im_token_id = 18  # <image>: only those positions would take embeddings
    assert "leave im_token_id unset" in _refused(nemotron, marked)
    unnamed = type(req)()
    unnamed.CopyFrom(req)
    unnamed.mm_inputs.ClearField("encoder_input_key")  # registered as pixel_values_videos
    assert "no pixel_values" in _refused(nemotron, unnamed)
    short = type(req)()
    short.CopyFrom(req)
    td = short.mm_inputs.model_specific_tensors["frames_indices"]
    indices = tensors.from_bytes(td.inline, td.shape, td.dtype)
    td.CopyFrom(tensors.inline(indices[:-1].copy(), "int64"))
    assert "frames_indices" in _refused(nemotron, short)


def test_nemotron_batch_and_bench(nemotron, tmp_path, images, red_blue):
    """``batch``: a video line preprocessed here, an image line sent to the worker whole
    (the same rule as sound's). ``bench``: a video run preprocessed here, an image run the
    worker's (the stub's own processing has no ``<video>`` token to model the worker's
    video; a real worker has)."""
    lines = [
        {"id": "video", "media": [str(red_blue)], "prompt": "Colour?"},
        {"id": "image", "media": [str(images[0])], "prompt": "Colour?"},
    ]
    dataset = tmp_path / "in.jsonl"
    dataset.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    target = nemotron.running.address
    done = _mmctl("batch", str(dataset), "-o", str(out), "--target", target)
    assert done.returncode == 0, done.stderr
    answers = {}
    for line in out.read_text().splitlines():
        doc = json.loads(line)
        answers[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
    video = answers["video"].split(", ")
    assert video[0] == "red" and video[-1] == "blue"
    assert answers["image"]
    for n, line in enumerate(lines):
        one = tmp_path / f"bench-{n}.jsonl"
        one.write_text(json.dumps(line) + "\n")
        bench = _mmctl("bench", "--dataset", str(one), "--target", target, "--json",
                       "--num-prompts", "2")  # fmt: skip
        assert bench.returncode == 0, bench.stderr
        doc = json.loads(bench.stdout)
        assert doc
