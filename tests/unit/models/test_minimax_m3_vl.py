"""MiniMax-M3-VL: the family's own functions against the committed goldens, and its
settings, ids and refusals on folders changed one value at a time.

Every ``minimax_m3_vl-*`` golden of tests/fixtures/families/goldens/ (vLLM 0.33's
vendored ``MiniMaxVLProcessor`` driven as vLLM drives it,
scripts/families/minimax_m3_vl_golden.py) gives the frame count and rate vLLM's decoder
saw: ``loader_indices`` / ``patch_seconds`` must name the frames and times it kept, the
image sizes its grids. tests/fixtures/families/goldens/minimax_m3_vl-sizes.json holds the
vendored ``smart_resize`` on odd, huge and extreme sizes under the published budgets and
with ``max_long_side_pixel`` set. The pixels go through mmctl's real path in
tests/compat/test_family_requests.py. Torch-free.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mmctl.errors import InputError, UsageError
from mmctl.models import minimax_m3_vl
from mmctl.models.minimax_m3_vl import MiniMaxVision
from mmctl.models.model import load_model
from mmctl.models.settings import VisionOverrides

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "minimax_m3_vl"
SIZES = json.loads((FIXTURES / "families" / "goldens" / "minimax_m3_vl-sizes.json").read_text())
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("minimax_m3_vl-*.npz"))
VIDEOS = [g for g in GOLDENS if "video" in g.stem]
IMAGES = [g for g in GOLDENS if "image" in g.stem]


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_the_published_folder_is_the_family_with_its_published_values() -> None:
    model = load_model(model_dir=FOLDER)
    assert model.spec is minimax_m3_vl.FAMILY
    assert model.params == MiniMaxVision()  # every value the published one
    assert model.warnings == ()
    # vLLM looks the four markers up by name in the tokenizer (the folder's: from 200000).
    assert model.token_ids.as_dict() == {
        "vision_start_token_id": 200005,
        "vision_end_token_id": 200006,
        "image_token_id": 200003,
        "video_token_id": 200004,
    }
    s = model.params
    assert (s.image_max_pixels, s.video_min_pixels, s.video_max_pixels) == (451584, 3136, 602112)
    assert s.image_max_long_side is None and s.video_max_long_side is None


def test_the_goldens_cover_images_and_every_clip() -> None:
    assert len(GOLDENS) == 25 and len(VIDEOS) == 15 and len(IMAGES) == 11


@pytest.mark.parametrize("golden", VIDEOS, ids=[g.stem for g in VIDEOS])
def test_frames_and_seconds_are_the_goldens(golden: Path) -> None:
    record = _golden(golden)
    for n in range(len(record["video_grid_thw_full"])):
        total, fps = int(record[f"video{n}_total_frames"]), float(record[f"video{n}_fps"])
        kept = minimax_m3_vl.loader_indices(total, fps)
        assert kept == record[f"video{n}_loader_indices"].tolist()
        assert kept == record[f"video{n}_indices"].tolist()
        times = minimax_m3_vl.patch_seconds(kept, fps, 2)
        assert times == record[f"video{n}_seconds"].tolist()
        assert int(record["video_grid_thw_full"][n][0]) == len(times)


@pytest.mark.parametrize("golden", IMAGES, ids=[g.stem for g in IMAGES])
def test_image_grids_are_the_goldens(golden: Path) -> None:
    record, s = _golden(golden), MiniMaxVision()
    grids = [
        (1, *(side // s.patch_size for side in minimax_m3_vl.VARIANT.image_size(h, w, s)))
        for h, w in record["image_sizes_hw"].tolist()
    ]
    assert grids == [tuple(g) for g in record["image_grid_thw_full"].tolist()]


@pytest.mark.parametrize("row", SIZES["rows"], ids=[f"{r[0]}x{r[1]}-{r[2]}" for r in SIZES["rows"]])
def test_smart_resize_is_the_vendored_one(row: list) -> None:
    h, w, rule, *want = row
    low, high, side, total = SIZES["rules"][rule]
    if isinstance(want[0], str) or 0 in want:  # vLLM raises, or makes a side of 0 (fails later)
        with pytest.raises(InputError):
            minimax_m3_vl.smart_resize(h, w, 28, low, high, side, total)
        return
    assert list(minimax_m3_vl.smart_resize(h, w, 28, low, high, side, total)) == want


def test_the_size_table_exercises_every_branch() -> None:
    refusals = [r for r in SIZES["rows"] if isinstance(r[3], str)]
    reasons = {r[4].split(" ")[0] for r in refusals}
    assert reasons == {"absolute", "image"}  # the aspect ratio and the area cap
    assert any(r[2] in (2, 4) and max(r[3:5]) in (1008, 448) for r in SIZES["rows"])


def test_the_loader_keeps_one_frame_a_second_without_a_cap() -> None:
    # 25 fps, 10 s: frames 0, 25, ..., 225; the 1e-4 s slack keeps a 1.0 s step exact.
    assert minimax_m3_vl.loader_indices(250, 25.0) == list(range(0, 250, 25))
    # 29.97 fps: ceil((t + 1 - 1e-4) * fps) per step.
    assert minimax_m3_vl.loader_indices(90, 30000 / 1001) == [0, 30, 60]
    # No frame cap (vLLM's 32 is not read): an hour at 1 fps keeps 3600.
    assert len(minimax_m3_vl.loader_indices(3600, 1.0)) == 3600
    # A clip shorter than a second keeps its first frame, padded to a temporal patch.
    assert minimax_m3_vl.loader_indices(3, 10.0) == [0]
    assert minimax_m3_vl.patch_seconds([0], 10.0, 2) == [0.0]
    assert minimax_m3_vl.loader_indices(0, 10.0) == []


def test_prompt_writes_each_patch_time_with_one_decimal() -> None:
    model = load_model(model_dir=FOLDER)
    video = FIXTURES / "media" / "ties.mp4"
    from mmctl.request.compose import compose

    composed = compose([video], "What happens?", model)
    text = model.tokenizer.decode(list(composed.plan.to_proto().tokenized.input_ids))
    # 2.5 s at 30 fps: frames 0, 30, 60 kept, two temporal patches from 0 s and 2 s.
    assert "]<]0.0 seconds[>[" in text and "]<]2.0 seconds[>[" in text
    assert composed.check.ok


def _folder_with(tmp_path: Path, file: str, **values: object) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    path = folder / file
    data = json.loads(path.read_text())
    data.update(values)
    path.write_text(json.dumps(data))
    return folder


def test_a_folders_own_values_are_read(tmp_path: Path) -> None:
    folder = _folder_with(
        tmp_path, "video_preprocessor_config.json", max_pixels=100352, max_long_side_pixel=448
    )
    s = load_model(model_dir=folder).params
    assert (s.video_max_pixels, s.video_max_long_side) == (100352, 448)
    assert s.image_max_long_side is None  # the image file's own (unset)
    assert minimax_m3_vl.VARIANT.video_size(4, 720, 1280, s) == (252, 448)


def test_an_image_files_min_pixels_is_not_read_as_the_image_class_ignores_it(
    tmp_path: Path,
) -> None:
    folder = _folder_with(tmp_path, "preprocessor_config.json", min_pixels=10**6)
    model = load_model(model_dir=folder)
    assert model.warnings == ()
    assert minimax_m3_vl.VARIANT.image_size(10, 10, model.params) == (56, 56)


def test_the_long_side_rule_refuses_what_vllm_refuses() -> None:
    s = MiniMaxVision(video_max_long_side=4000)
    # 1000 frames of 1120x1120 pass the per-frame rule but not the clip's volume cap.
    with pytest.raises(InputError, match="301,056,000"):
        minimax_m3_vl.VARIANT.video_size(1000, 1120, 1120, s)
    with pytest.raises(InputError, match="aspect ratio"):
        minimax_m3_vl.VARIANT.image_size(10, 2010, MiniMaxVision())


def test_the_image_and_video_processors_must_agree_on_the_patch(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "preprocessor_config.json", patch_size=16)
    with pytest.raises(InputError, match="disagree on patch_size"):
        load_model(model_dir=folder)


def test_a_tokenizer_without_the_markers_is_refused() -> None:
    with pytest.raises(InputError, match=r"lacks \]<\]start of image"):
        minimax_m3_vl.read_tokens({}, lambda token: None)


def test_budget_flags_are_refused_the_files_decide() -> None:
    with pytest.raises(UsageError, match="no such setting"):
        MiniMaxVision().overridden(VisionOverrides(max_pixels=10**6))


def test_inspect_tokens_shows_each_frames_time_and_block() -> None:
    """``mmctl inspect-tokens``: the video's span, its loader frames, each temporal
    patch's time and block as vLLM's prompt update writes them."""
    import subprocess
    import sys

    video = FIXTURES / "media" / "ties.mp4"
    args = ["inspect-tokens", str(video), "--model-dir", str(FOLDER)]
    run = [sys.executable, "-m", "mmctl", *args]
    doc = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True,
                                    timeout=120, check=True).stdout)  # fmt: skip
    [item] = doc["items"]
    assert item["frame_indices"] == [0, 30, 60]  # one a second, padded with the last
    assert item["patch_times_s"] == [0.0, 2.0] and item["grid_thw"] == [2, 6, 10]
    assert item["span"]["length"] == 2 * (8 + 1 + 15 + 1)  # label, start, run, end
    text = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "]<]2.0 seconds[>[ ]<]start of image[>[ ]<]video[>[×15 ]<]end of image[>[" in text
    assert doc["check"]["name"] == "placeholder_spans" and doc["check"]["ok"]
    assert doc["check"]["frames_checked"] == 2


@pytest.mark.parametrize(
    ("size", "folder_values", "refusal"),
    [
        ((2010, 10), {}, "aspect ratio 201.0 is over 200"),
        # Under the long-side rule an image area over 3584² is refused, never shrunk.
        ((4000, 4000), {"max_long_side_pixel": 60000}, "12,845,056-pixel area"),
    ],
)
def test_hostile_media_is_one_line_exit_3(size, folder_values, refusal, tmp_path) -> None:
    """Media vLLM's processor refuses: ``mmctl build`` says so in one line, exit 3,
    nothing written."""
    import subprocess
    import sys

    from PIL import Image

    image = tmp_path / "odd.png"
    Image.new("RGB", size, (200, 30, 30)).save(image)
    folder = _folder_with(tmp_path, "preprocessor_config.json", **folder_values)
    out = tmp_path / "req.pb"
    args = ["build", str(image), "--model-dir", str(folder), "-o", str(out)]
    done = subprocess.run([sys.executable, "-m", "mmctl", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: ") and refusal in lines[0], lines
    assert not out.exists()
