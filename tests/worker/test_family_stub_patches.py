"""The stub worker serving GLM-4.1V/4.6V/5-Next, Qwen3.5, Gemma 4 and InternVL: patch rows,
float patches and flat patches read back right, and what vLLM's model would refuse is refused
(split from test_family_stub.py so that its parts run in parallel)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import mmctl
from mmctl.media.probe import MediaKind
from mmctl.models.model import load_model
from mmctl.request import tensors
from tests.conftest import Stub, _stub
from tests.worker.family_stubs import FAMILIES, built, client_for, default_stub, refused, served

# ---- GLM-4.1V / GLM-4.6V and Qwen3.5: Qwen-style patch rows, normalized on the device ----
#
# vLLM normalizes their pixels on the device by default, so the default stub takes
# raw uint8; floats go to a stub started without it. GLM's batches both embed at
# <|image|>: a video's span holds one <|image|> run per temporal patch. Qwen3.5 is
# Qwen3-VL's layout with its own folder's ids (248053..248057).

GLM_TYPES = ("glm4v", "glm46v", "glm5_next")
PATCH_TYPES = (*GLM_TYPES, "qwen3_5")


@pytest.fixture(scope="module", params=PATCH_TYPES)
def patched(request) -> Iterator[tuple[str, Stub]]:
    running = default_stub(request.param)
    try:
        yield request.param, running
    finally:
        running.close()


@pytest.fixture(scope="module", params=GLM_TYPES)
def glm(request) -> Iterator[tuple[str, Stub]]:
    running = default_stub(request.param)
    try:
        yield request.param, running
    finally:
        running.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_patch_images_and_video_come_back_as_their_colours(patched, images, red_blue, transport):
    model_type, stub = patched
    with client_for(stub, model_type) as client:
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
        with client_for(running, model_type) as client:
            for dtype in ("float32", "bfloat16", "float16"):
                result = client.send(
                    [images[1], red_blue], "Colours?", pixel_dtype=dtype, skip_checks=True
                )
                assert result.answer == "blue; red, blue", dtype
    finally:
        running.close()


def test_glm_batches_embed_at_the_image_token(glm, images, red_blue):
    model_type, stub = glm
    req = built(stub, model_type, [images[0], red_blue])
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
    assert "would receive embeddings" in refused(stub, req)


@pytest.mark.parametrize("what", ["features", "rows"])
def test_patch_a_wrong_pixel_shape_is_refused(patched, images, what):
    model_type, stub = patched
    req = built(stub, model_type, [images[0]])
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
    assert want in refused(stub, req)


def test_glm_a_video_run_that_is_not_its_grid_is_refused(glm, red_blue):
    model_type, stub = glm
    req = built(stub, model_type, [red_blue])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    ids[span.offset + 3] = ids[0]  # one <|image|> of the first run overwritten
    req.tokenized.input_ids[:] = ids
    refusal = refused(stub, req)
    assert "mrope walk failed: item 1: temporal patch 1 holds a run of 1 <|image|>" in refusal


def test_glm_two_videos_are_refused_before_sending(glm, red_blue):
    model_type, stub = glm
    with client_for(stub, model_type) as client, pytest.raises(mmctl.MmctlError, match="2 videos"):
        client.send([red_blue, red_blue], "Colours?")


# ---- Gemma 4: float patch rows with their positions; frames flat by video_frame_counts ----
#
# Each batch embeds at its own placeholder (<|image|>, <|video|>) inside spans that
# hold <|image>/<image|> around every image and frame, and each frame's time.


@pytest.fixture(scope="module")
def gemma() -> Iterator[Stub]:
    yield from served("gemma4")


# ---- InternVL: flat patches, token ids shared by each batch -------------------------


@pytest.fixture(scope="module")
def internvl() -> Iterator[Stub]:
    yield from served("internvl")


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_gemma4_image_and_video_come_back_as_their_colours(gemma, images, red_blue, transport):
    with client_for(gemma, "gemma4") as client:
        result = client.send([images[1], red_blue], "Which colours?", transport=transport)
    assert result.answer == "blue; red, blue"
    # Floats in the model's dtype (the folder's config.json: bfloat16), never uint8.
    assert result.decisions["pixel_dtype"].value == "bfloat16"
    check = next(c for c in result.checks if c.name == "placeholder_spans")
    assert check.ran and check.ok


def test_gemma4_batches_embed_at_their_own_placeholders(gemma, images, red_blue):
    req = built(gemma, "gemma4", [images[0], red_blue])
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
    assert "would receive embeddings" in refused(gemma, req)


def test_gemma4_positions_that_are_not_the_pixels_are_refused(gemma, images):
    req = built(gemma, "gemma4", [images[0]])
    td = req.mm_inputs.model_specific_tensors["pixel_position_ids"]
    positions = tensors.from_bytes(td.inline, td.shape, td.dtype)
    req.mm_inputs.model_specific_tensors["pixel_position_ids"].CopyFrom(
        tensors.inline(np.ascontiguousarray(positions[:, :630]), td.dtype)
    )
    assert "pixel_position_ids is int64 [1, 630, 2]" in refused(gemma, req)


def test_gemma4_frame_counts_that_do_not_split_the_frames_are_refused(gemma, red_blue):
    req = built(gemma, "gemma4", [red_blue])
    td = req.mm_inputs.model_specific_tensors["video_frame_counts"]
    counts = tensors.from_bytes(td.inline, td.shape, td.dtype)
    req.mm_inputs.model_specific_tensors["video_frame_counts"].CopyFrom(
        tensors.inline(counts + 1, td.dtype)
    )
    assert "pixel_position_ids_videos" in refused(gemma, req)


def test_gemma4_a_frame_without_its_time_is_refused(gemma, red_blue):
    req = built(gemma, "gemma4", [red_blue])
    span = req.mm_inputs.mm_placeholders[0]
    ids = list(req.tokenized.input_ids)
    del ids[span.offset : span.offset + 5]  # "00:00" of "00:00 " before the first frame
    ids[span.offset : span.offset] = [0] * 5  # as many tokens, not a time: <pad>
    req.tokenized.input_ids[:] = ids
    assert "placeholder spans failed: item 1: frame 1 of" in refused(gemma, req)


def test_qwen3_5_a_frame_block_out_of_place_is_refused(images, red_blue):
    """Qwen3.5's video span is one ``<t seconds><|vision_start|>pads<|vision_end|>``
    block per temporal patch (its tokenizer's ids); a pad moved past the block's end
    breaks vLLM's mrope walk."""
    stub = default_stub("qwen3_5")
    try:
        req = built(stub, "qwen3_5", [images[0], red_blue])
        video = req.extra_mm_inputs[0]
        assert (req.mm_inputs.im_token_id, video.im_token_id) == (248056, 248057)
        span = video.mm_placeholders[0]
        ids = list(req.tokenized.input_ids)
        block = ids[span.offset : span.offset + span.length]
        end = block.index(248054)  # the first frame's <|vision_end|>
        block[end - 1], block[end] = block[end], block[end - 1]
        ids[span.offset : span.offset + span.length] = block
        req.tokenized.input_ids[:] = ids
        assert "mrope walk failed: item 2" in refused(stub, req)
    finally:
        stub.close()


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_internvl_image_and_video_in_one_request(internvl, images, red_blue, transport):
    with client_for(internvl, "internvl") as client:
        result = client.send([images[1], red_blue], "Colours?", transport=transport)
    assert result.answer == "blue; red, blue"
    req = built(internvl, "internvl", [images[1], red_blue])
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
    req = built(internvl, "internvl", [images[0]])
    del req.mm_inputs.model_specific_tensors["image_token_id"]
    assert "carries no image_token_id tensor" in refused(internvl, req)


def test_internvl_a_token_id_of_two_values_is_refused(internvl, images):
    req = built(internvl, "internvl", [images[0], images[1]])
    req.mm_inputs.model_specific_tensors["image_token_id"].CopyFrom(
        tensors.inline(np.asarray([151667, 151674], dtype=np.int64), "int64")
    )
    assert "not one value for the batch" in refused(internvl, req)


def test_internvl_patch_counts_that_are_not_the_spans_are_refused(internvl, images):
    """Counts that still split the pixels, but give each image embeddings its span
    does not hold (vLLM: a placeholder/embedding count mismatch)."""
    req = built(internvl, "internvl", [images[0], images[1]])
    td = req.mm_inputs.model_specific_tensors["image_num_patches"]
    counts = tensors.from_bytes(td.inline, td.shape, td.dtype)
    shifted = counts + np.asarray([1, -1], dtype=np.int64)
    td.CopyFrom(tensors.inline(shifted, "int64"))
    assert "placeholder spans failed: item 1" in refused(internvl, req)
