"""GLM-4.1V / GLM-4.6V: the family's own functions against the committed goldens,
and its settings, ids and prompt check on folders changed one value at a time.

Every ``glm4v-*`` and ``glm46v-*`` golden of tests/fixtures/families/goldens/
(transformers 5.20.2's processors driven as vLLM 0.33 drives them, vLLM's own
processor shown equal by scripts/families/vllm_check.py) gives the frame
count and rate vLLM's decoder saw: ``loader_indices`` / ``sample_indices`` /
``patch_seconds`` must name the frames and seconds it kept, ``image_size`` /
``video_size`` its grids, and the family's prompt expansion of the template's
ids must be vLLM's prompt ids. The pixels themselves go through mmctl's real
path in tests/compat/test_family_requests.py. Torch-free.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmctl.choices import LayoutKind
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import glm4v
from mmctl.models.model import Model, load_model
from mmctl.models.settings import VisionOverrides
from mmctl.values.items import ItemFacts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FAMILIES = FIXTURES / "families"
GOLDENS = FAMILIES / "goldens"
FOLDERS = ("glm4v", "glm46v")
VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".gif", ".mov"}


@pytest.fixture(scope="module")
def models() -> dict[str, Model]:
    return {f: load_model(model_dir=FAMILIES / f) for f in FOLDERS}


def _goldens() -> list[Path]:
    return [p for f in FOLDERS for p in sorted(GOLDENS.glob(f"{f}-*.npz"))]


def _items(z: Any, model: Model) -> list[ItemFacts]:
    """The golden's items as the prompt reads them: grids, and a video's seconds."""
    s = model.params
    names = [str(n) for n in z["media"]]
    grids = {
        "image": iter(z["image_grid_thw_full"].tolist()) if "image_grid_thw_full" in z else None
    }
    items = []
    for name in names:
        if Path(name).suffix in VIDEO_SUFFIXES:
            grid = tuple(z["video_grid_thw_full"][0].tolist())
            seconds = tuple(float(v) for v in z["video0_seconds"].tolist())
            items.append(ItemFacts(MediaKind.VIDEO, s.tokens_for_grid(grid), grid, seconds))
        else:
            assert grids["image"] is not None
            grid = tuple(next(grids["image"]))
            items.append(ItemFacts(MediaKind.IMAGE, s.tokens_for_grid(grid), grid))
    return items


@pytest.mark.parametrize("golden", _goldens(), ids=lambda p: p.stem)
def test_golden(golden: Path, models: dict[str, Model]) -> None:
    z = np.load(golden)
    model = models[golden.name.split("-", 1)[0]]
    s = model.params
    if "image_sizes_hw" in z:
        sizes = [glm4v.image_size(h, w, s) for h, w in z["image_sizes_hw"].tolist()]
        grids = [[1, h // s.patch_size, w // s.patch_size] for h, w in sizes]
        assert grids == z["image_grid_thw_full"].tolist()
    if "video0_total_frames" in z:
        total, fps = int(z["video0_total_frames"]), float(z["video0_fps"])
        # vLLM's loader lists an odd count's last frame twice and decodes it once.
        decoded = sorted(set(z["video0_loader_indices"].tolist()))
        assert glm4v.loader_indices(total, fps, s) == decoded
        sampled = glm4v.sample_indices(total, fps, s)
        assert sampled.resampled == bool(z["video0_do_sample_frames"])
        assert list(sampled.indices) == z["video0_indices"].tolist()
        assert glm4v.patch_seconds(sampled.indices, fps) == z["video0_seconds"].tolist()
        t = z["video_grid_thw_full"][0][0]
        assert t == (len(sampled.indices) + 1) // 2

    items = _items(z, model)
    layout = model.spec.prompt.expand(z["template_ids"].tolist(), items, model, LayoutKind.VLLM)
    assert layout.id_list() == z["vllm_input_ids"].tolist()
    check = model.spec.prompt.check(layout, items, model)
    assert check.ok, check.reason
    assert check.frames_checked == sum(it.grid[0] for it in items)
    for span, item in zip(layout.spans, items, strict=True):
        got = layout.ids[span.offset : span.end]
        assert int(np.count_nonzero(got == model.token_ids.embed(item.kind))) == item.tokens
        if item.kind is MediaKind.VIDEO:  # the span is the whole video target's replacement
            assert got[0] == model.token_ids.video_start_token_id  # type: ignore[attr-defined]
            assert got[-1] == model.token_ids.video_end_token_id  # type: ignore[attr-defined]


def test_every_variant_has_image_and_video_goldens() -> None:
    for family in FOLDERS:
        names = [p.name for p in GOLDENS.glob(f"{family}-*.npz")]
        assert any("-image-" in n for n in names) and any("-video-" in n for n in names)


def test_the_published_defaults_are_the_glm41v_folder(models: dict[str, Model]) -> None:
    published = glm4v.GlmVision()
    assert models["glm4v"].params == published
    assert models["glm46v"].params == glm4v.GlmVision(
        processor_class="Glm46VProcessor", video_processor_type="Glm46VVideoProcessor"
    )
    assert models["glm4v"].token_ids == glm4v.GlmTokens()
    ids = models["glm46v"].token_ids
    assert (ids.image_token_id, ids.video_token_id) == (151363, 151364)  # type: ignore[attr-defined]


def test_timestamps_differ_by_variant(models: dict[str, Model]) -> None:
    assert glm4v.timestamp_text(3, models["glm4v"].params) == "3"
    assert glm4v.timestamp_text(3, models["glm46v"].params) == "3.0 seconds"


@pytest.mark.parametrize("family", FOLDERS)
def test_a_clip_under_one_second_is_refused_as_vllm_refuses_it(family: str, models) -> None:
    s = models[family].params
    # min_frames.mp4: 6 frames at 10 fps; both loaders keep frame 0 alone.
    assert len(glm4v.loader_indices(6, 10.0, s)) == 1
    with pytest.raises(InputError, match="needs 2"):
        glm4v.sample_indices(6, 10.0, s)


def _folder(tmp_path: Path, base: str = "glm4v", **files: dict[str, Any] | None) -> Path:
    """A copy of a published folder with files changed (a key set to None is removed;
    a file set to None is removed)."""
    folder = tmp_path / "model"
    shutil.copytree(FAMILIES / base, folder)
    for stem, changes in files.items():
        path = folder / f"{stem}.json"
        if changes is None:
            path.unlink()
            continue
        data = json.loads(path.read_text()) if path.exists() else {}
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        path.write_text(json.dumps(data))
    return folder


def test_glm46v_flash_is_a_glm4v_config_with_the_46v_processor(tmp_path: Path) -> None:
    """GLM-4.6V-Flash: model_type glm4v, Glm46VProcessor files: GLM-4.6V's processing."""
    folder = _folder(tmp_path, "glm46v", config={"model_type": "glm4v"})
    model = load_model(model_dir=folder)
    assert model.spec.name == "glm4v" and model.params.variant == "glm46v"


@pytest.mark.parametrize(
    ("files", "expected", "origin"),
    [
        # AutoProcessor's order: processor_config.json first, …
        (
            {"processor_config": {"processor_class": "Glm46VProcessor"}},
            "Glm46VProcessor",
            "processor_config.json",
        ),
        # … then preprocessor_config.json, …
        ({}, "Glm4vProcessor", "preprocessor_config.json"),
        # … then tokenizer_config.json (the video file is read only without a preprocessor file), …
        (
            {
                "preprocessor_config": {"processor_class": None},
                "video_preprocessor_config": {"processor_class": "Glm46VProcessor"},
                "tokenizer_config": {"processor_class": "Glm4vProcessor"},
            },
            "Glm4vProcessor",
            "tokenizer_config.json",
        ),
        # … and with none, the model type's class.
        (
            {
                "preprocessor_config": {"processor_class": None},
                "video_preprocessor_config": {"processor_class": None},
                "tokenizer_config": {"processor_class": None},
            },
            "Glm4vProcessor",
            "transformers' class",
        ),
    ],
)
def test_the_processor_class_is_found_where_autoprocessor_looks(
    files: dict, expected: str, origin: str, tmp_path: Path
) -> None:
    video = "Glm46VVideoProcessor" if expected == "Glm46VProcessor" else "Glm4vVideoProcessor"
    changes = {**files}
    changes.setdefault("video_preprocessor_config", {})
    changes["video_preprocessor_config"] = {
        **changes["video_preprocessor_config"],
        "video_processor_type": video,
    }
    model = load_model(model_dir=_folder(tmp_path, **changes))
    assert model.params.processor_class == expected
    assert model.vision_from["processor_class"].startswith(origin)


def test_a_processor_and_video_processor_of_two_versions_are_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, preprocessor_config={"processor_class": "Glm46VProcessor"})
    with pytest.raises(InputError, match=r"Glm46VProcessor .* Glm4vVideoProcessor") as refused:
        load_model(model_dir=folder)
    assert "\n" not in refused.value.message


def test_a_glm4v_moe_folder_must_name_its_video_processor(tmp_path: Path) -> None:
    """vLLM picks GLM's frame loader by video_processor_type, else by the model
    type, and has none for glm4v_moe: without the key its generic loader runs."""
    folder = _folder(tmp_path, "glm46v", video_preprocessor_config={"video_processor_type": None})
    with pytest.raises(InputError, match="generic loader"):
        load_model(model_dir=folder)


@pytest.mark.parametrize("value", ["Qwen2VLProcessor", 3])
def test_another_processor_class_is_refused(value: Any, tmp_path: Path) -> None:
    folder = _folder(tmp_path, preprocessor_config={"processor_class": value})
    with pytest.raises(InputError, match="processor_class"):
        load_model(model_dir=folder)


def test_config_ids_the_tokenizer_disagrees_with_are_refused(tmp_path: Path) -> None:
    # GLM-4.1V's folder with GLM-4.6V's <|image|> id: vLLM takes the tokenizer's.
    folder = _folder(tmp_path, config={"image_token_id": 151363})
    with pytest.raises(
        InputError,
        match=re.escape("image_token_id is 151363 but the tokenizer has <|image|> at 151343"),
    ):
        load_model(model_dir=folder)


def test_a_config_without_the_ids_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, config={"video_end_token_id": None})
    with pytest.raises(InputError, match=re.escape("config.json lacks video_end_token_id")):
        load_model(model_dir=folder)


def test_only_the_budgets_can_be_overridden(models: dict[str, Model]) -> None:
    model = models["glm4v"]
    changed = model.with_vision(VisionOverrides(max_pixels=1_000_000))
    assert changed.params.video_max_pixels == 1_000_000
    with pytest.raises(UsageError, match="--fps"):
        model.with_vision(VisionOverrides(fps=1.0))


def _one(model: Model, kinds: list[MediaKind]) -> tuple[list[int], list[ItemFacts]]:
    """A prompt with a placeholder per item (GLM's template text) and items of small grids."""
    body = "".join(model.spec.prompt.placeholder_text(k, model) for k in kinds) + "Hi."
    ids = model.tokenizer.encode(model.spec.prompt.chat_format(body, None))
    items = [
        ItemFacts(k, 4 if k is MediaKind.IMAGE else 8, (1 if k is MediaKind.IMAGE else 2, 4, 4),
                  () if k is MediaKind.IMAGE else (0.0, 1.0))
        for k in kinds
    ]  # fmt: skip
    return ids, items


@pytest.mark.parametrize("family", FOLDERS)
def test_the_check_reads_spans_as_vllms_glm_mrope_does(family: str, models) -> None:
    model = models[family]
    ids, items = _one(model, [MediaKind.IMAGE, MediaKind.VIDEO])
    layout = model.spec.prompt.expand(ids, items, model, LayoutKind.VLLM)
    assert model.spec.prompt.check(layout, items, model).ok
    video = layout.spans[1]
    tokens = model.token_ids
    broken = {
        "a run one short": lambda a: a.__setitem__(video.offset + 2, 0),
        "an image token in the timestamp": lambda a: a.__setitem__(video.offset + 7, tokens.embed(MediaKind.IMAGE)),
        "no <|end_of_video|>": lambda a: a.__setitem__(video.end - 1, 0),
    }  # fmt: skip
    for name, change in broken.items():
        ids2 = layout.ids.copy()
        change(ids2)
        check = model.spec.prompt.check(type(layout)(layout.kind, ids2, layout.spans), items, model)
        assert not check.ok and check.item == 2, name
        assert check.reason.startswith("item 2: "), check.reason


def test_one_video_per_prompt(models: dict[str, Model]) -> None:
    model = models["glm46v"]
    ids, items = _one(model, [MediaKind.VIDEO, MediaKind.VIDEO])
    with pytest.raises(InputError, match="2 videos in one prompt"):
        model.spec.prompt.expand(ids, items, model, LayoutKind.VLLM)


def test_a_video_token_without_its_markers_is_no_placeholder(models: dict[str, Model]) -> None:
    model = models["glm4v"]
    ids, items = _one(model, [MediaKind.VIDEO])
    bare = [i for i in ids if i not in (151341, 151342)]  # <|video|> alone
    with pytest.raises(InputError, match="0 video placeholder"):
        model.spec.prompt.expand(bare, items, model, LayoutKind.VLLM)
