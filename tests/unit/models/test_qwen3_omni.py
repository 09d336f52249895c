"""Qwen3-Omni's thinker (``qwen3_omni_moe``): what mmctl reads of its folder, and sound's way.

The goldens (scripts/make_family_fixtures.py, transformers 5.20.2's
``Qwen3OmniMoeProcessor`` driven as vLLM 0.33 drives it) are compared request by
request in tests/compat/test_family_requests.py; here: the family's own decisions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models import registry
from mmctl.models.model import load_model
from mmctl.models.qwen_vl import qwen3_omni

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "qwen3_omni_moe"
MEDIA = FIXTURES / "media"


@pytest.fixture(scope="module")
def model():
    return load_model(model_dir=FOLDER)


def test_the_family_comes_from_config_json_and_its_ids_from_the_tokenizer(model):
    assert model.spec is qwen3_omni.FAMILY
    assert registry.by_name("qwen3-omni") is qwen3_omni.FAMILY
    assert model.token_ids.as_dict() == {
        "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "image_token_id": 151655,
        "video_token_id": 151656,
    }


def test_a_thinker_config_that_names_another_id_than_the_tokenizer_is_refused():
    vocab = {"<|vision_start|>": 151652, "<|vision_end|>": 151653, "<|image_pad|>": 151655,
             "<|video_pad|>": 151656}.get  # fmt: skip
    config = {"model_type": "qwen3_omni_moe", "thinker_config": {"image_token_id": 151654}}
    with pytest.raises(InputError, match=r"thinker_config\.image_token_id is 151654"):
        qwen3_omni.thinker_ids(config, vocab)


def test_the_video_budget_is_the_processors_call_not_the_folders(model):
    # The folder's preprocessor_config.json says 3136..12845056 for both processors;
    # Qwen3OmniMoeProcessor's defaults pass 131072..786432 to the video processor.
    with (FOLDER / "preprocessor_config.json").open() as f:
        assert json.load(f)["min_pixels"] == 3136
    vision = model.params
    assert (vision.image_min_pixels, vision.image_max_pixels) == (3136, 12845056)
    assert (vision.video_min_pixels, vision.video_max_pixels) == (131072, 786432)
    assert (vision.patch_size, vision.image_mean) == (16, (0.5, 0.5, 0.5))


def test_frames_are_vllm_qwen2vl_loaders_whatever_the_folder_says(tmp_path):
    # vLLM's Qwen2VLVideoBackend samples with load_bytes' fps 2 and frames 4..768 (its
    # own constants, not the folder's), a multiple of 2 (numbers run through vLLM 0.32's
    # backend: scripts/families/check_unseen.py --family qwen3_omni_moe --loaders N).
    folder = tmp_path / "omni"
    shutil.copytree(FOLDER, folder)
    config = json.loads((folder / "preprocessor_config.json").read_text())
    config.update(fps=8, min_frames=16, max_frames=32)
    (folder / "preprocessor_config.json").write_text(json.dumps(config))
    vision = load_model(model_dir=folder).params
    assert (vision.fps, vision.min_frames, vision.max_frames) == (2.0, 4, 768)
    variant = qwen3_omni.VARIANT
    assert variant.sample_indices(16, 8.0, vision).tolist() == [0, 4, 8, 12]
    assert variant.sample_indices(7, 2.0, vision).tolist() == [0, 1, 2, 3, 4, 5]
    picked = variant.sample_indices(1600, 4.0, vision)
    assert len(picked) == 768 and picked[:3].tolist() == [0, 2, 4]
    assert variant.second_per_grid_ts(picked, 1600, 4.0, vision) == 2.0
    with pytest.raises(InputError, match="known source frame rate"):
        variant.sample_indices(100, 0.0, vision)


def test_pixels_are_float32_for_a_default_worker():
    processor = qwen3_omni.FAMILY.processor
    assert processor.worker_pixels is PixelFormat.FLOAT32
    assert processor.device_normalize is False


def _build(tmp_path: Path, *media: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "mmctl", "build", *(str(MEDIA / m) for m in media),
         "-p", "Describe it.", "--model-dir", str(FOLDER), "-o", str(tmp_path / "r.pb"),
         "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not a setting mmctl reproduces" not in done.stderr  # the sound keys are inert
    return json.loads(done.stdout)


def test_an_image_with_sound_is_worker_processed_as_a_whole(tmp_path):
    doc = _build(tmp_path, "rgb_odd.png", "sound_tone.wav")
    assert doc["schema"] == "mmctl.build-refs/1"
    processing = doc["decisions"]["processing"]
    assert processing["value"] == "worker"
    assert "a request with sound is processed by the worker as a whole" in processing["reason"]


def test_an_image_alone_is_preprocessed_here(tmp_path):
    doc = _build(tmp_path, "rgb_odd.png")
    assert doc["schema"] == "mmctl.build/1"
    assert doc["model"]["family"] == "qwen3-omni"
    assert doc["decisions"]["pixel_dtype"]["value"] == "float32"
    assert doc["check"] == {**doc["check"], "name": "mrope_walk", "ok": True}


def test_a_video_sends_vllm_field_config_keys(model):
    from mmctl.media.probe import MediaKind
    from mmctl.values.items import DEFAULT_OPTIONS

    pre = model.spec.processor.preprocess(
        MEDIA / "odd_count.mp4", MediaKind.VIDEO, model.params, PixelFormat.FLOAT32,
        DEFAULT_OPTIONS,
    )  # fmt: skip
    assert pre.pixel_values.dtype == np.float32 and pre.pixel_values.shape[1] == 1536
    assert np.asarray(pre.video_tensors["second_per_grid_ts"]).tolist() == [2.0]
    keys = {f.key for f in model.spec.wire.fields(MediaKind.VIDEO)}
    assert {"pixel_values", "video_grid_thw", "second_per_grid_ts"} <= keys
