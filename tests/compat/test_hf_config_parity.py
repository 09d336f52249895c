"""mmctl resolves a model folder's vision settings as transformers does.

The goldens (``tests/fixtures/hf_config/transformers-*.json``, made by
``scripts/make_hf_config_fixtures.py`` with transformers 5.20.2 — vLLM 0.33's
pin — and 5.24.0) record, per folder of ``hf_config_cases.py``, the settings
HF's ``AutoImageProcessor`` / ``AutoVideoProcessor`` resolve, the grids they
compute and the frames they sample. Here mmctl loads the same folders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mmctl.errors import InputError
from mmctl.models.model import load_model
from mmctl.models.settings import SERVER_DEFAULT

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))

import hf_config_cases as cases  # noqa: E402

#: The settings both Qwen processors have; mmctl keeps one value for both.
SHARED = (
    "patch_size",
    "temporal_patch_size",
    "merge_size",
    "image_mean",
    "image_std",
    "rescale_factor",
)
GOLDENS = sorted((FIXTURES / "hf_config").glob("transformers-*.json"))
RECORDS = [
    (path.stem, case, json.loads(path.read_text())["cases"][case.name])
    for path in GOLDENS
    for case in cases.CASES
]


def _id(record) -> str:
    return f"{record[0]}-{record[1].name}"


def test_goldens_exist_for_vllms_pin_and_the_newest():
    assert {p.stem for p in GOLDENS} >= {"transformers-5.20.2", "transformers-5.24.0"}
    recorded = json.loads(GOLDENS[0].read_text())["cases"]
    assert set(recorded) == {c.name for c in cases.CASES}


def _refused(record: dict) -> bool:
    return "error" not in record and all(isinstance(g[1], str) for g in record["grids"])


@pytest.mark.parametrize("record", RECORDS, ids=_id)
def test_mmctl_resolves_the_folder_as_transformers(record, tmp_path):
    _, case, hf = record
    folder = case.write(tmp_path / case.name)
    image, video = hf["image"], hf["video"]
    if _refused(image) or _refused(video):
        with pytest.raises(InputError, match="size lacks"):
            load_model(model_dir=folder)
        return
    shared = SHARED
    if "error" not in image and "error" not in video and any(image[k] != video[k] for k in shared):
        with pytest.raises(InputError, match="disagree"):
            load_model(model_dir=folder)
        return
    model = load_model(model_dir=folder)
    assert model.spec.name == case.family
    p, origin = model.params, model.vision_from
    if "error" in video:  # no processor file: the published checkpoint's values
        assert p == model.spec.settings()
        # Every value a file could hold is the published one; the frames a worker's
        # loader keeps are no file's (the server's default).
        assert all("published" in v or v == SERVER_DEFAULT for v in origin.values())
        return
    assert video["class"] == type(p).VIDEO_CLASSES[0].name
    assert (p.video_min_pixels, p.video_max_pixels) == (
        video["size"]["shortest_edge"],
        video["size"]["longest_edge"],
    )
    for key in shared:
        want = video[key]
        assert getattr(p, key) == (tuple(want) if isinstance(want, list) else want), key
    assert (p.min_frames, p.max_frames) == (video["min_frames"], video["max_frames"])
    assert p.fps == (video["fps"] if video["fps"] is not None else 2.0)
    tp = p.temporal_patch_size
    for (t, h, w), grid in video["grids"]:
        rh, rw = model.spec.processor.variant.video_size(t, h, w, p)
        assert [-(-t // tp), rh // p.patch_size, rw // p.patch_size] == grid, (t, h, w)
    for (total, fps), indices in video["samplings"]:
        # HF's sample_frames can name frame `total` (its float tail); vLLM's
        # Qwen2VLVideoBackend, which serves these folders, clamps it to the last frame.
        want = [min(i, total - 1) for i in indices]
        assert model.spec.processor.variant.sample_indices(total, fps, p).tolist() == want, (
            total,
            fps,
        )
    if "error" in image:
        assert "published" in origin["image_min_pixels"]
        published = model.spec.settings()
        assert (p.image_min_pixels, p.image_max_pixels) == (
            published.image_min_pixels,
            published.image_max_pixels,
        )
    else:
        assert image["class"] == type(p).IMAGE_CLASSES[0].name
        assert (p.image_min_pixels, p.image_max_pixels) == (
            image["size"]["shortest_edge"],
            image["size"]["longest_edge"],
        )
        for (h, w), grid in image["grids"]:
            rh, rw = model.spec.processor.variant.image_size(h, w, p)
            assert [1, rh // p.patch_size, rw // p.patch_size] == grid, (h, w)


def test_each_setting_names_the_file_it_came_from(tmp_path):
    by_name = {c.name: c for c in cases.CASES}
    qwen25 = load_model(model_dir=by_name["qwen2.5-vl-published"].write(tmp_path / "a"))
    assert qwen25.vision_from["video_max_pixels"] == "preprocessor_config.json"
    assert qwen25.vision_from["fps"] == "mmctl default (Qwen2VLVideoProcessor has none)"
    qwen3 = load_model(model_dir=by_name["qwen3-vl-nested-processor-config"].write(tmp_path / "b"))
    assert qwen3.vision_from["video_max_pixels"] == 'processor_config.json "video_processor"'
    assert qwen3.vision_from["image_max_pixels"] == 'processor_config.json "image_processor"'
    assert qwen3.vision_from["min_frames"] == "Qwen3VLVideoProcessor default"
    no_budget = load_model(model_dir=by_name["qwen3-vl-no-budget"].write(tmp_path / "c"))
    assert no_budget.vision_from["video_max_pixels"] == "Qwen3VLVideoProcessor default"
    assert no_budget.vision_from["image_max_pixels"] == "Qwen2VLImageProcessor default"


def test_the_issues_qwen25_example_gets_hfs_grid(tmp_path):
    """The case found: Qwen2.5-VL values and no video file — a 64x48 clip is
    [2, 4, 4] (8 tokens), 1280x720 is [2, 52, 92], as HF computes."""
    by_name = {c.name: c for c in cases.CASES}
    model = load_model(model_dir=by_name["qwen2.5-vl-published"].write(tmp_path / "m"))
    p = model.params
    assert model.spec.processor.variant.video_size(2, 48, 64, p) == (56, 56)
    assert model.spec.processor.variant.video_size(2, 720, 1280, p) == (728, 1288)


def test_a_mistyped_setting_is_refused_by_name(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cases.QWEN3_CONFIG))
    (folder / "video_preprocessor_config.json").write_text(json.dumps({"fps": "two"}))
    with pytest.raises(
        InputError, match=r"video_preprocessor_config.json: fps must be a finite number"
    ):
        load_model(model_dir=folder)
