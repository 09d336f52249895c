"""Nemotron-3-Nano-Omni's video requests against the goldens vLLM's own processor made
(``scripts/families/vllm_check.py``: 27 equal). Videos are preprocessed here; a request
with an image is the worker's (``Family.worker_kinds``), so the image goldens stay
with the unit tests of the pure functions."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.models.model import load_model
from mmctl.request import tensors
from mmctl.request.compose import compose
from mmctl.values.pruning import VideoPruning

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FOLDER = FIXTURES / "families" / "nemotron_h_omni"
#: Six of the 16 video goldens (each costs seconds: the resize is numpy, exact to
#: torch's float32 kernel): two clips of different lengths and sizes, EVS pruning, a
#: variable frame rate, a portrait and a rotated clip, a GIF (all 16 were equal when
#: the family was wired).
CASES = (
    "two_videos",
    "pruned-video-film",
    "video-vfr",
    "video-portrait",
    "video-rotated",
    "video-gif",
)
GOLDENS = [FIXTURES / "families" / "goldens" / f"nemotron_h_omni-{c}.npz" for c in CASES]


@pytest.fixture(scope="module")
def model():
    return load_model(model_dir=FOLDER)


def _tensor(batch, key: str) -> np.ndarray:
    td = batch.model_specific_tensors[key]
    return tensors.from_bytes(td.inline, td.shape, td.dtype)


def test_the_video_goldens():
    every = sorted((FIXTURES / "families" / "goldens").glob("nemotron_h_omni-*.npz"))
    videos = [p for p in every if "image" not in p.stem]
    assert len(every) == 27 and len(videos) == 16
    assert all(g in videos for g in GOLDENS)


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.stem for g in GOLDENS])
def test_video_request_equals_the_golden(golden, model):
    with np.load(golden) as data:
        record = {k: data[k] for k in data.files}
    if "video_pruning_rate" in record:
        model = model.with_pruning(VideoPruning(rate=float(record["video_pruning_rate"])))
    media = [FIXTURES / "media" / name for name in record["media"].tolist()]
    composed = compose(media, str(record["prompt"]), model, pixel_format=PixelFormat.BFLOAT16)
    req = composed.plan.to_proto()
    assert composed.rendered.text == str(record["text"])
    assert list(req.tokenized.input_ids) == record["vllm_input_ids"].tolist()
    assert composed.check.ok, composed.check.reason
    assert not req.extra_mm_inputs
    video = req.mm_inputs
    # vLLM's model reads its pixels as pixel_values_flat_video and embeds whole spans.
    assert video.encoder_input_key == "pixel_values_flat_video"
    assert not video.HasField("im_token_id")
    spans = [[p.offset, p.length] for p in video.mm_placeholders]
    assert spans == record["video_placeholders"].tolist()
    pixels = tensors.from_bytes(
        video.pixel_values.inline, video.pixel_values.shape, video.pixel_values.dtype
    )
    start = 0
    for n in range(len(media)):
        shape = record[f"video{n}_pixels_shape"].tolist()
        part = np.ascontiguousarray(pixels[start : start + shape[0]])
        start += shape[0]
        assert list(part.shape) == shape
        assert video.pixel_values.dtype == str(record[f"video{n}_pixels_dtype"])
        assert hashlib.sha256(part.tobytes()).hexdigest() == str(record[f"video{n}_pixels_sha256"])
    assert start == pixels.shape[0]
    assert _tensor(video, "video_num_patches").tolist() == record["video_num_patches"].tolist()
    assert _tensor(video, "frame_duration_ms").tolist() == record["frame_duration_ms"].tolist()
    indices = np.concatenate([record[f"video{n}_indices"] for n in range(len(media))])
    assert _tensor(video, "frames_indices").tolist() == indices.tolist()
    assert dict(video.flat_keys) == {
        "pixel_values_flat_video": "video_num_patches",
        "frames_indices": "video_num_patches",
    }
