"""The smg gateway 1.13.0 as a peer client of the stub serving the other families.

The gateway serves LLaVA, LLaVA-NeXT, Llama 4, Gemma 4, Qwen3.5, GLM-5-Next's
and MiniMax-M3-VL's images (not OneVision, GLM-4.1V/4.6V or InternVL, nor GLM-5-Next's video as vLLM
lays it out); for each
it builds the request itself from the same published-values folder
(``tests/fixtures/families/``). Where its layout is vLLM's, the stub accepts
the request and it equals mmctl's in prompt ids, placeholders, ``im_token_id``
and every tensor but the pixels — whose values the gateway computes with its
own resize (``crates/multimodal/src/vision/processors/``; transformers 5 and
vLLM use torchvision's, as mmctl does: scripts/families/README.md). Where its
layout is not vLLM's (LLaVA-NeXT's token count), the stub refuses it as vLLM's
model would fail on it, in one sentence. For Gemma 4 its processor ports
torchvision's uint8 antialiased bicubic and HF's rescale, and its requests equal
mmctl's in every tensor, pixels included. Needs what tests/compat/test_smg_gateway.py needs.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from mmctl.modality import servicer_kind as modality_kind
from mmctl.request.view import batches, read_request
from mmctl.wire import proto
from mmctl.worker.checks import worker_key
from tests.compat.test_smg_gateway import LOCAL, _running, _tensors

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAMILIES = FIXTURES / "families"
PROMPT = "Describe what you see."
#: smg 1.13.0 picks its vision processor by a substring of the served model
#: name (``vision/processor.rs`` ``with_defaults``): the published repo ids.
PUBLISHED = {
    "qwen3_omni_moe": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    "llava": "llava-hf/llava-1.5-7b-hf",
    "llava_next": "llava-hf/llava-v1.6-mistral-7b-hf",
    "llama4": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llava_onevision": "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "glm4v": "zai-org/GLM-4.1V-9B-Thinking",
    "glm46v": "zai-org/GLM-4.6V",
    "glm5_next": "zai-org/GLM-5.3-Flash",
    "gemma4": "google/gemma-4-31B-it",
    "qwen3_5": "Qwen/Qwen3.5-0.8B",
    "internvl": "OpenGVLab/InternVL3-1B-hf",
    "minimax_m3_vl": "MiniMaxAI/MiniMax-M3",
}
MIME = {
    ".png": ("image", "image/png"),
    ".jpg": ("image", "image/jpeg"),
    ".mp4": ("video", "video/mp4"),
}


def _chat(http: str, model: str, media: list[Path]) -> tuple[int, str]:
    content: list[dict] = []
    for path in media:
        kind, mime = MIME[path.suffix]
        url = f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
        content.append({"type": f"{kind}_url", f"{kind}_url": {"url": url}})
    content.append({"type": "text", "text": PROMPT})
    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    req = urllib.request.Request(
        f"{http}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with LOCAL.open(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def _gateway(smg_exe, model_type, tmp_path):
    return _running(
        smg_exe,
        FAMILIES / model_type,
        tmp_path,
        processing="router",
        transport="inline",
        normalize=False,
        served_model_name=PUBLISHED[model_type],
    )


@pytest.mark.parametrize(
    ("model_type", "media"),
    [("llava", ["rgb_odd.png", "large.png"]), ("llama4", ["shrink.jpg", "rgb_odd.png"])],
)
def test_the_gateway_lays_out_as_vllm_and_equals_mmctl_but_for_its_resize(
    smg_exe, model_type, media, tmp_path
):
    paths = [FIXTURES / "media" / name for name in media]
    with _gateway(smg_exe, model_type, tmp_path) as pair:
        status, body = _chat(pair.http, PUBLISHED[model_type], paths)
        assert status == 200, f"{body}\n{pair.log.getvalue()}"
        [recorded] = pair.recorded()
        mine = pair.client.build(paths, prompt=PROMPT).request
    gateway = read_request(recorded)
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    [theirs], [ours] = batches(gateway), batches(mine)
    assert (theirs.modality, theirs.im_token_id) == (ours.modality, ours.im_token_id)
    assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
        (p.offset, p.length) for p in ours.mm_placeholders
    ]
    assert set(theirs.batched_keys) == set(ours.batched_keys)
    assert dict(theirs.flat_keys) == dict(ours.flat_keys)
    a, b = _tensors(theirs), _tensors(ours)
    assert set(a) == set(b)
    for key in set(b) - {"pixel_values"}:
        assert np.array_equal(a[key][1], b[key][1]), key
    assert a["pixel_values"][1].shape == b["pixel_values"][1].shape
    # The one difference, its resize filter: not bit-identical, near.
    theirs_px = a["pixel_values"][1].astype(np.float32)
    ours_px = b["pixel_values"][1].astype(np.float32)
    assert not np.array_equal(theirs_px, ours_px)


def test_the_stub_refuses_the_gateways_llava_next_count_as_vllm_would_fail(smg_exe, tmp_path):
    """smg 1.13.0's ``LlavaNextProcessor::calculate_num_tokens`` gives a 97x61 image
    976 tokens; vLLM's processor (and mmctl) count 1512."""
    with _gateway(smg_exe, "llava_next", tmp_path) as pair:
        status, _body = _chat(
            pair.http, PUBLISHED["llava_next"], [FIXTURES / "media" / "rgb_odd.png"]
        )
        log = pair.log.getvalue()
    assert status != 200
    assert "placeholder spans failed: item 1" in log, log
    assert "needs 1512" in log, log


def test_the_gateway_has_no_onevision(smg_exe, tmp_path):
    """No OneVision spec in smg 1.13.0: its ``LlavaSpec`` claims the folder and
    refuses the video — mmctl is the only client that sends OneVision video."""
    clip = FIXTURES / "media" / "odd_count.mp4"
    with _gateway(smg_exe, "llava_onevision", tmp_path) as pair:
        status, body = _chat(pair.http, PUBLISHED["llava_onevision"], [clip])
        assert pair.recorded() == []
    assert status != 200
    assert "not supported" in body or "No vision processor" in body, body


@pytest.mark.parametrize("model_type", ["glm4v", "glm46v", "internvl"])
def test_the_gateway_has_no_glm4v_or_internvl(smg_exe, model_type, tmp_path):
    """No GLM-4.1V/4.5V/4.6V spec in smg 1.13.0 (its one GLM vision processor is
    GLM-5.3-Flash's, matched by ``glm-5.3-flash``/``glm5-next`` in the model
    name), and no InternVL one (no processor or name-table entry; ``IMG_CONTEXT``
    occurs nowhere in the binary): it refuses image and video before any request
    reaches the worker, and names worker-side processing as the way."""
    media = [FIXTURES / "media" / "rgb_odd.png", FIXTURES / "media" / "odd_count.mp4"]
    with _gateway(smg_exe, model_type, tmp_path) as pair:
        answers = [_chat(pair.http, PUBLISHED[model_type], [path]) for path in media]
        assert pair.recorded() == []
    for status, body in answers:
        assert status != 200
        assert "no media spec for its family" in body, body


def test_the_gateways_gemma4_requests_equal_mmctls_bit_for_bit(smg_exe, tmp_path):
    """smg 1.13.0's Gemma 4 spec (``registry/gemma4.rs``, ``processors/gemma4.rs``):
    an image and a video in one chat give two batches equal to mmctl's — prompt
    ids (each frame's time included), placeholders, ``im_token_id`` per batch,
    key lists and every tensor, the pixels too (scripts/families/smg_capture.py
    found the same on all 24 goldens)."""
    paths = [FIXTURES / "media" / "rgb_odd.png", FIXTURES / "media" / "odd_count.mp4"]
    with _gateway(smg_exe, "gemma4", tmp_path) as pair:
        status, body = _chat(pair.http, PUBLISHED["gemma4"], paths)
        assert status == 200, f"{body}\n{pair.log.getvalue()}"
        [recorded] = pair.recorded()
        gateway = read_request(recorded)
        dtype = batches(gateway)[0].pixel_values.dtype
        mine = pair.client.build(paths, prompt=PROMPT, pixel_dtype=dtype).request
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    theirs = {b.modality: b for b in batches(gateway)}
    ours = {b.modality: b for b in batches(mine)}
    assert set(theirs) == set(ours) and len(ours) == 2
    for modality, b in ours.items():
        a = theirs[modality]
        kind = modality_kind(modality)

        def at_worker(keys, kind=kind):  # the servicer's rename of the primary tensor
            return {worker_key(k, kind) for k in keys}

        assert a.im_token_id == b.im_token_id
        assert [(p.offset, p.length) for p in a.mm_placeholders] == [
            (p.offset, p.length) for p in b.mm_placeholders
        ]
        # The gateway names the video's pixels pixel_values_videos (encoder_input_key),
        # mmctl pixel_values: the servicer registers both as pixel_values_videos.
        assert at_worker(a.batched_keys) == at_worker(b.batched_keys)
        flat = [
            {worker_key(k, kind): worker_key(v, kind) for k, v in x.flat_keys.items()}
            for x in (a, b)
        ]
        assert flat[0] == flat[1]
        assert at_worker(b.keep_on_cpu_keys) <= at_worker(a.keep_on_cpu_keys)
        x, y = _tensors(a), _tensors(b)
        assert set(x) == set(y)
        for key in y:
            assert x[key][0] == y[key][0], key  # the wire dtype
            assert np.array_equal(x[key][1], y[key][1]), key


QWEN3_5_CASES = {
    "two images": ["rgb_odd.png", "shrink.jpg"],
    "image + odd-count video": ["rgb_odd.png", "odd_count.mp4"],
    "a clip sampled at its minimum": ["min_frames.mp4"],
}


def test_the_gateway_s_qwen3_5_equals_mmctl_but_for_one_video_key(smg_exe, tmp_path):
    """smg 1.13.0 serves Qwen3.5 with its Qwen3-VL spec and processor (picked by
    ``qwen3.5`` in the model name). Its requests equal mmctl's to the bit — prompt
    ids (the per-frame timestamps too), placeholders, ``im_token_id``, grids,
    pixels — but for one key of a video batch: it sends ``video_second_per_grid``
    (``vision/processors/qwen_vl_base.rs``, its Qwen2.5-VL field) where vLLM's
    Qwen3-VL processing returns ``timestamps``; Qwen3.5's model reads neither
    unless video pruning is on."""
    sent = {}
    with _gateway(smg_exe, "qwen3_5", tmp_path) as pair:
        for case, names in QWEN3_5_CASES.items():
            paths = [FIXTURES / "media" / name for name in names]
            before = set(pair.recorded())
            status, body = _chat(pair.http, PUBLISHED["qwen3_5"], paths)
            assert status == 200, f"{case}: {body}\n{pair.log.getvalue()}"
            [recorded] = set(pair.recorded()) - before
            sent[case] = (read_request(recorded), pair.client.build(paths, prompt=PROMPT).request)
    for case, (gateway, mine) in sent.items():
        assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids), case
        for theirs, ours in zip(batches(gateway), batches(mine), strict=True):
            assert (theirs.modality, theirs.im_token_id) == (ours.modality, ours.im_token_id)
            assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
                (p.offset, p.length) for p in ours.mm_placeholders
            ], case
            a, b = _tensors(theirs), _tensors(ours)
            video = ours.modality == proto.common_pb2.VIDEO
            assert set(a) - set(b) == ({"video_second_per_grid"} if video else set()), case
            assert set(b) - set(a) == ({"timestamps"} if video else set()), case
            for key in set(a) & set(b):
                assert a[key][0] == b[key][0], (case, key)
                assert np.array_equal(a[key][1], b[key][1]), (case, key)


def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_the_gateway_s_glm5_next_images_equal_mmctl_but_for_bf16_rounding(smg_exe, tmp_path):
    """smg 1.13.0 serves GLM-5-Next with its GLM-5.3-Flash processor (picked by
    ``glm-5.3-flash`` in the model name). Two images: prompt ids, placeholders,
    ``im_token_id``, key lists and grids equal mmctl's (vLLM's: the goldens);
    the pixels (bf16, a worker without device normalization) equal too for
    shrink.jpg and differ by one bf16 step (0.03125) in 32 of rgb_odd.png's 96
    rows, where mmctl's float32 equal HF's bit for bit (test_family_requests) and
    are rounded as torch rounds them."""
    paths = [FIXTURES / "media" / name for name in ("rgb_odd.png", "shrink.jpg")]
    with _gateway(smg_exe, "glm5_next", tmp_path) as pair:
        status, body = _chat(pair.http, PUBLISHED["glm5_next"], paths)
        assert status == 200, f"{body}\n{pair.log.getvalue()}"
        [recorded] = pair.recorded()
        mine = pair.client.build(paths, prompt=PROMPT).request
    gateway = read_request(recorded)
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    [theirs], [ours] = batches(gateway), batches(mine)
    assert (theirs.modality, theirs.im_token_id) == (ours.modality, ours.im_token_id)
    assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
        (p.offset, p.length) for p in ours.mm_placeholders
    ]
    a, b = _tensors(theirs), _tensors(ours)
    assert set(a) == set(b) == {"pixel_values", "image_grid_thw", "patches_per_image"}
    for key in ("image_grid_thw", "patches_per_image"):
        assert np.array_equal(a[key][1], b[key][1]), key
    assert a["pixel_values"][0] == b["pixel_values"][0] == "bfloat16"
    first = int(b["patches_per_image"][1][0])
    x, y = _bf16(a["pixel_values"][1]), _bf16(b["pixel_values"][1])
    assert np.array_equal(x[first:], y[first:])  # shrink.jpg: every row
    differ = np.abs(x[:first] - y[:first])
    assert int((differ.max(axis=1) > 0).sum()) == 32 and float(differ.max()) == 0.03125


GLM5_NEXT_REFUSALS = {
    "image + video": (["rgb_odd.png", "odd_count.mp4"], "same tensor keys ['patches_per_image']"),
    "video": (["film.mp4"], "its span is not <|begin_of_video|> … <|end_of_video|>"),
}


def test_the_stub_refuses_the_gateway_s_glm5_next_video(smg_exe, tmp_path):
    """smg 1.13.0's GLM-5.3-Flash video is not vLLM's: an image with a video comes
    as two batches that both carry ``patches_per_image`` (vLLM's field table names
    the video's ``patches_per_video``: one would overwrite the other), and a video
    alone as a span without the ``<|begin_of_video|>`` … ``<|end_of_video|>``
    block vLLM's GLM mrope walks (384 pixel rows for film.mp4 where vLLM's
    loader and processor make 96). The stub refuses both as vLLM would fail on them."""
    with _gateway(smg_exe, "glm5_next", tmp_path) as pair:
        for case, (media, refusal) in GLM5_NEXT_REFUSALS.items():
            paths = [FIXTURES / "media" / name for name in media]
            status, _body = _chat(pair.http, PUBLISHED["glm5_next"], paths)
            assert status != 200, case
            assert refusal in pair.log.getvalue(), case
        assert pair.recorded() == []


# ---- MiniMax-M3-VL: smg 1.13.0's own spec (registry/minimax_m3.rs), picked by the name ----


def _minimax(pair, media: list[str]):
    paths = [FIXTURES / "media" / name for name in media]
    status, body = _chat(pair.http, PUBLISHED["minimax_m3_vl"], paths)
    assert status == 200, f"{body}\n{pair.log.getvalue()}"
    gateway = read_request(pair.recorded()[-1])
    mine = pair.client.build(paths, prompt=PROMPT).request
    return gateway, mine


def test_the_gateway_s_minimax_m3_vl_images_raise_a_short_side_vllm_leaves(smg_exe, tmp_path):
    """smg 1.13.0 serves MiniMax-M3-VL images with the same rows, ids and field
    table as vLLM, but sizes an image whose short side is under 112 px with the
    long-side rule's floor (rgb_odd.png, 97x61: 168x112, a 8x12 grid) where vLLM
    0.33's processor, ``max_long_side_pixel`` unset (the classes' default and the
    folder's), keeps Qwen's area rule (84x56, 4x6: mmctl's and the goldens',
    ``minimax_m3_vl-image-rgb_odd``). vLLM takes the gateway's request (a valid
    grid), so the stub does too; the model then sees another resize than vLLM's
    own processing makes. large.png (900x1400, no enlargement either way) equals
    mmctl's bit for bit in bf16."""
    with _gateway(smg_exe, "minimax_m3_vl", tmp_path) as pair:
        gateway, mine = _minimax(pair, ["rgb_odd.png", "large.png"])
    [theirs], [ours] = batches(gateway), batches(mine)
    assert theirs.im_token_id == ours.im_token_id
    a, b = _tensors(theirs), _tensors(ours)
    assert set(a) == set(b) == {"pixel_values", "image_grid_thw", "patches_per_image"}
    assert a["image_grid_thw"][1].tolist() == [[1, 8, 12], [1, 38, 58]]
    assert b["image_grid_thw"][1].tolist() == [[1, 4, 6], [1, 38, 58]]
    # Each image's span: start, t*h*w/4 placeholders, end (vLLM's prompt update).
    assert [p.length for p in theirs.mm_placeholders] == [26, 553]
    assert [p.length for p in ours.mm_placeholders] == [8, 553]
    x, y = _bf16(a["pixel_values"][1]), _bf16(b["pixel_values"][1])
    assert np.array_equal(x[96:], y[24:])  # large.png: every row


def test_the_gateway_s_minimax_m3_vl_video_samples_its_own_frames(smg_exe, tmp_path):
    """smg 1.13.0's video for MiniMax-M3-VL: prompt ids, placeholders and grid equal
    vLLM's for ties.mp4 (2.5 s at 30 fps) but the second temporal patch's pixels do
    not (60 of 120 rows: vLLM's ``MiniMaxM3VideoBackend`` keeps frames 0, 30, 60 and
    pads with 60; the gateway picks others); for film.mp4 (1.7 s) it sends two
    temporal patches where vLLM's loader keeps frames 0 and 24, one patch. It adds a
    ``video_second_per_grid`` tensor that vLLM's field table for the model does not
    have. mmctl's frames and rows are vLLM's (the goldens, vllm_check)."""
    with _gateway(smg_exe, "minimax_m3_vl", tmp_path) as pair:
        ties = _minimax(pair, ["ties.mp4"])
        film = _minimax(pair, ["film.mp4"])
    gateway, mine = ties
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    [theirs], [ours] = batches(gateway), batches(mine)
    assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
        (p.offset, p.length) for p in ours.mm_placeholders
    ]
    a, b = _tensors(theirs), _tensors(ours)
    assert set(a) - set(b) == {"video_second_per_grid"} and set(b) <= set(a)
    assert a["video_grid_thw"][1].tolist() == b["video_grid_thw"][1].tolist() == [[2, 6, 10]]
    x, y = _bf16(a["pixel_values"][1]), _bf16(b["pixel_values"][1])
    assert np.array_equal(x[:60], y[:60])  # the first patch: frames 0 and 30 alike
    assert int((np.abs(x[60:] - y[60:]).max(axis=1) > 0).sum()) == 60
    gateway, mine = film
    [theirs], [ours] = batches(gateway), batches(mine)
    assert _tensors(theirs)["video_grid_thw"][1].tolist() == [[2, 4, 4]]
    assert _tensors(ours)["video_grid_thw"][1].tolist() == [[1, 4, 4]]


def test_the_gateway_cannot_render_an_inkling_prompt_without_a_template(smg_exe, tmp_path):
    """vLLM renders Inkling prompts itself (no chat template; scripts/families/inkling.md).
    smg 1.13.0 has an Inkling media spec (``registry/inkling.rs``: matched by the
    ``inkling_mm_model`` type) but no renderer of its own: on the folder as vLLM serves it
    it asks the tokenizer for a chat template and refuses before any request reaches
    the worker. (Read, not run: its spec fills an image's span with ``<|content_image|>``
    itself and names the sizes ``tokens_per_item`` where vLLM 0.33 has 200054 and
    ``num_patches``.)"""
    paths = [FIXTURES / "media" / "rgb_odd.png"]
    with _running(smg_exe, FAMILIES / "inkling", tmp_path, processing="router",
                  transport="inline", normalize=False,
                  served_model_name="thinkingmachines/Inkling") as pair:  # fmt: skip
        status, body = _chat(pair.http, "thinkingmachines/Inkling", paths)
        assert pair.recorded() == []
    assert status == 400
    assert "chat_template is not set" in body, body


def _omni_sent(smg_exe, tmp_path, cases: dict[str, list[str]]) -> dict:
    sent = {}
    with _gateway(smg_exe, "qwen3_omni_moe", tmp_path) as pair:
        for case, names in cases.items():
            paths = [FIXTURES / "media" / name for name in names]
            before = set(pair.recorded())
            status, body = _chat(pair.http, PUBLISHED["qwen3_omni_moe"], paths)
            assert status == 200, f"{case}: {body}\n{pair.log.getvalue()}"
            [recorded] = set(pair.recorded()) - before
            sent[case] = (read_request(recorded), pair.client.build(paths, prompt=PROMPT).request)
    return sent


def test_the_gateway_s_qwen3_omni_images_equal_mmctl(smg_exe, tmp_path):
    """smg 1.13.0 serves Qwen3-Omni (``Qwen3OmniSpec``, picked by ``qwen3-omni`` in the
    model name). Two images: prompt ids, placeholders, ``im_token_id``, grids and pixels
    equal mmctl's (vLLM's: the goldens) to the bit."""
    cases = {"two images": ["rgb_odd.png", "shrink.jpg"]}
    [(gateway, mine)] = _omni_sent(smg_exe, tmp_path, cases).values()
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    [theirs], [ours] = batches(gateway), batches(mine)
    assert (theirs.modality, theirs.im_token_id) == (ours.modality, ours.im_token_id)
    assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
        (p.offset, p.length) for p in ours.mm_placeholders
    ]
    a, b = _tensors(theirs), _tensors(ours)
    assert set(a) == set(b) == {"pixel_values", "image_grid_thw", "patches_per_image"}
    for key in a:
        assert a[key][0] == b[key][0] and np.array_equal(a[key][1], b[key][1]), key


def test_the_gateway_s_qwen3_omni_videos_are_not_vllm_s(smg_exe, tmp_path):
    """Its videos are well formed (the stub serves them) but not what vLLM's own
    processing makes of the clip, which mmctl's equal (the goldens; vllm_check.py ran
    vLLM's loader and processor on them): odd_count.mp4 (7 frames at 2 fps) keeps all 7,
    padded to 8 (4 temporal patches) where vLLM's ``Qwen2VLVideoBackend`` keeps 6 (3);
    film.mp4 gets vLLM's grid but other pixels (other frames than vLLM's
    ``torch.arange`` steps). The per-video time comes under HF's name
    ``video_second_per_grid`` with the gateway's own value (Tp / the sampled rate), which
    only vLLM's own processing renames (``_postprocess_hf_mm_data``): sent preprocessed,
    no field of the model takes it, and the model uses 2.0 — what mmctl sends as
    ``second_per_grid_ts`` (HF's Tp / its default fps 1.0, vLLM's value)."""
    cases = {"odd_count": ["odd_count.mp4"], "film": ["rgb_odd.png", "film.mp4"]}
    sent = _omni_sent(smg_exe, tmp_path, cases)
    goldens = {"odd_count": "video-odd_count", "film": "image_then_video"}
    for case, (gateway, mine) in sent.items():
        theirs, ours = batches(gateway)[-1], batches(mine)[-1]
        assert ours.modality == theirs.modality == proto.common_pb2.VIDEO
        a, b = _tensors(theirs), _tensors(ours)
        assert set(a) - set(b) == {"video_second_per_grid"}, case
        assert set(b) - set(a) == {"second_per_grid_ts"}, case
        assert b["second_per_grid_ts"][1].tolist() == [2.0]
        golden = np.load(FAMILIES / "goldens" / f"qwen3_omni_moe-{goldens[case]}.npz")
        assert b["video_grid_thw"][1].tolist() == golden["video_grid_thw_full"].tolist()
        if case == "odd_count":
            assert b["video_grid_thw"][1].tolist() == [[3, 20, 28]]
            assert a["video_grid_thw"][1].tolist() == [[4, 20, 28]]
        else:
            assert a["video_grid_thw"][1].tolist() == b["video_grid_thw"][1].tolist()
            assert not np.array_equal(a["pixel_values"][1], b["pixel_values"][1])
