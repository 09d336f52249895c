"""GLM-5-Next: the family's own functions against the committed goldens, and its
settings, ids and refusals on folders changed one value at a time.

Every ``glm5_next-*`` golden of tests/fixtures/families/goldens/ (transformers
5.20.2's ``Glm5NextProcessor`` driven as vLLM 0.33 drives it,
scripts/families/glm_golden.py (``GLM5_NEXT``)) gives the frame count and rate vLLM's decoder
saw: ``loader_indices`` / ``sample_indices`` / ``patch_seconds`` must name the frames
and seconds it kept, ``canvas_size`` its grids. The pixels go through mmctl's real
path in tests/compat/test_family_requests.py. Torch-free.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import glm5_next
from mmctl.models.glm5_next import Glm5NextVision
from mmctl.models.model import load_model
from mmctl.models.settings import VisionOverrides

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "glm5_next"
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("glm5_next-*.npz"))
VIDEOS = [g for g in GOLDENS if "video" in g.stem]
IMAGES = [g for g in GOLDENS if "video" not in g.stem]


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_the_published_folder_is_the_family_with_its_published_values() -> None:
    model = load_model(model_dir=FOLDER)
    assert model.spec is glm5_next.FAMILY
    assert model.params == Glm5NextVision()  # every value the published one
    assert model.warnings == ()
    assert model.token_ids.as_dict() == {
        "image_token_id": 154854,
        "video_token_id": 154855,
        "image_start_token_id": 154830,
        "image_end_token_id": 154831,
        "video_start_token_id": 154832,
        "video_end_token_id": 154833,
    }
    # vLLM's get_hf_processor caps the video budget; the image one is the file's.
    assert model.params.budget(MediaKind.VIDEO) == (16, 30000)
    assert model.params.budget(MediaKind.IMAGE) == (16, 8000)


def test_the_goldens_cover_images_and_every_clip() -> None:
    assert len(GOLDENS) == 24 and len(VIDEOS) == 14


@pytest.mark.parametrize("golden", VIDEOS, ids=[g.stem for g in VIDEOS])
def test_frames_and_seconds_are_the_goldens(golden: Path) -> None:
    record, s = _golden(golden), Glm5NextVision()
    total, fps = int(record["video0_total_frames"]), float(record["video0_fps"])
    loaded = sorted(set(record["video0_loader_indices"].tolist()))
    assert glm5_next.loader_indices(total, fps) == loaded
    kept = glm5_next.sample_indices(total, fps, s)
    assert kept == record["video0_indices"].tolist()
    assert (len(loaded) == total) == bool(record["video0_do_sample_frames"])
    assert glm5_next.patch_seconds(kept, fps, s) == record["video0_seconds"].tolist()


@pytest.mark.parametrize("golden", IMAGES, ids=[g.stem for g in IMAGES])
def test_image_grids_are_the_goldens(golden: Path) -> None:
    record, s = _golden(golden), Glm5NextVision()
    grids = [
        (1, *(side // s.patch_size for side in glm5_next.VARIANT.image_size(h, w, s)))
        for h, w in record["image_sizes_hw"].tolist()
    ]
    assert grids == [tuple(g) for g in record["image_grid_thw_full"].tolist()]


def test_an_image_is_fitted_into_its_canvas_never_enlarged() -> None:
    s = Glm5NextVision()
    # 500 x 333: the canvas rounds up to 28s; the image stays as it is, padded.
    canvas = glm5_next.VARIANT.image_size(333, 500, s)
    assert canvas == (336, 504)
    assert glm5_next.content_size(MediaKind.IMAGE, canvas, 2, 333, 500, s) == (333, 500)
    # Under the 16-token minimum: enlarged to fill it.
    canvas = glm5_next.VARIANT.image_size(10, 10, s)
    assert canvas == (112, 112)
    assert glm5_next.content_size(MediaKind.IMAGE, canvas, 2, 10, 10, s) == (112, 112)
    # Over the 8000-token maximum: the tallest canvas that fits, the image shrunk into it.
    h, w = glm5_next.VARIANT.image_size(3000, 4000, s)
    assert h % 28 == w % 28 == 0 and (h // 28) * (w // 28) <= 8000
    assert max(glm5_next.content_size(MediaKind.IMAGE, (h, w), 2, 3000, 4000, s)) < 4000


def test_a_clip_too_short_for_one_frame_is_refused_as_vllm_refuses_it() -> None:
    s = Glm5NextVision()
    # 0.1 s: the loader's 2 frames a second round down to none (vLLM raises too).
    with pytest.raises(InputError, match="keeps no frame") as refused:
        glm5_next.sample_indices(1, 10.0, s)
    assert refused.value.hint and "0.5 s" in refused.value.hint
    # 0.6 s keeps one frame, padded to a temporal patch of one second 0.
    assert glm5_next.sample_indices(6, 10.0, s) == [0]
    assert glm5_next.patch_seconds([0], 10.0, s) == [0]


def test_every_frame_decoded_lets_the_processor_sample_again() -> None:
    s = Glm5NextVision()
    # 10 frames at 1 fps: the loader asks for 20, so every frame; the processor then
    # samples with its own fps (2) and evens the count (10 stays 10).
    assert glm5_next.loader_indices(10, 1.0) == list(range(10))
    assert glm5_next.sample_indices(10, 1.0, s) == list(range(10))
    slower = Glm5NextVision(fps=0.5)
    assert glm5_next.sample_indices(10, 1.0, slower) == [0, 2, 4, 6, 8, 8]


def test_prompt_writes_each_patch_second_with_one_decimal() -> None:
    model = load_model(model_dir=FOLDER)
    video = FIXTURES / "media" / "ties.mp4"
    from mmctl.request.compose import compose

    composed = compose([video], "What happens?", model)
    text = model.tokenizer.decode(list(composed.plan.to_proto().tokenized.input_ids))
    assert "0.0 seconds" in text and "1.0 seconds" in text and "2.0 seconds" in text
    assert composed.check.ok


def _folder_with(tmp_path: Path, kind: str, **values: object) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    path = folder / "processor_config.json"
    data = json.loads(path.read_text())
    data[f"{kind}_processor"].update(values)
    path.write_text(json.dumps(data))
    return folder


def test_a_budget_whose_minimum_exceeds_its_maximum_is_refused(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "image", min_image_tokens=900, max_image_tokens=800)
    with pytest.raises(InputError, match="min_image_tokens <= max_image_tokens"):
        load_model(model_dir=folder)


def test_the_image_and_video_processors_must_agree_on_the_expand_factor(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "image", patch_expand_factor=2)
    with pytest.raises(InputError, match="disagree on patch_expand_factor"):
        load_model(model_dir=folder)


def test_a_folders_own_values_are_read(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "video", max_image_tokens=1000, fps=1)
    model = load_model(model_dir=folder)
    assert model.params.budget(MediaKind.VIDEO) == (16, 1000)
    assert model.params.fps == 1.0
    # A key the class has and the file leaves out takes the class's value.
    assert model.params.max_frames == 2048


def test_budget_flags_are_refused_the_files_decide() -> None:
    with pytest.raises(UsageError, match="no such setting"):
        Glm5NextVision().overridden(VisionOverrides(max_pixels=10**6))
