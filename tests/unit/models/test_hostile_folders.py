"""Model folders with one bad value: the settings resolver refuses each one
in one sentence (``InputError``, exit 3) before any work.

Every published-values folder (``tests/fixtures/families/*`` and the built-in
Qwen3-VL files) is copied with one value changed, by class — zero, negative,
huge, wrong type, non-finite, outside the vocabulary. Such files may come
from a worker's ``GetTokenizer`` bundle, so the client reads them with the
same care. The CLI's side (one line, exit 3, in seconds and bounded memory)
is ``tests/cli/test_hostile_folders.py``.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmctl.checkpoint.source import BUILTIN_CONFIG_DIR
from mmctl.errors import InputError
from mmctl.models.model import load_model

FAMILIES = Path(__file__).resolve().parents[2] / "fixtures" / "families"
#: Not a model folder: the goldens of every family.
NOT_A_MODEL = {"goldens"}

#: (folder, file, dotted key, value, class). ``None`` as folder: the built-in Qwen3-VL files.
CASES: list[tuple[str | None, str, str, Any, str]] = [
    # Qwen3-VL
    (None, "preprocessor_config.json", "patch_size", 0, "zero"),
    (None, "video_preprocessor_config.json", "merge_size", 0, "zero"),
    (None, "video_preprocessor_config.json", "temporal_patch_size", -2, "negative"),
    (None, "video_preprocessor_config.json", "size.shortest_edge", 10**12, "huge"),
    (None, "preprocessor_config.json", "size.shortest_edge", -1, "negative"),
    (None, "video_preprocessor_config.json", "image_std", [0, 0, 0], "non-finite"),
    (None, "video_preprocessor_config.json", "image_mean", [math.nan, 0.5, 0.5], "non-finite"),
    (None, "video_preprocessor_config.json", "rescale_factor", math.inf, "non-finite"),
    (None, "video_preprocessor_config.json", "fps", "two", "wrong type"),
    (None, "video_preprocessor_config.json", "size", "big", "wrong type"),
    (None, "config.json", "video_token_id", 10**9, "out of vocabulary"),
    (None, "config.json", "image_token_id", -5, "negative"),
    # LLaVA-1.5
    ("llava", "config.json", "vision_config.patch_size", 0, "zero"),
    ("llava", "config.json", "vision_config.image_size", -336, "negative"),
    ("llava", "preprocessor_config.json", "crop_size", 10**9, "huge"),
    ("llava", "preprocessor_config.json", "crop_size", 1e9, "wrong type"),
    ("llava", "preprocessor_config.json", "size.shortest_edge", 10**9, "huge"),
    ("llava", "preprocessor_config.json", "image_std", [0, 0, 0], "non-finite"),
    ("llava", "preprocessor_config.json", "do_resize", "yes", "wrong type"),
    ("llava", "config.json", "image_token_index", 2**40, "out of vocabulary"),
    ("llava", "config.json", "image_token_index", 32064, "out of vocabulary"),
    # LLaVA-NeXT
    ("llava_next", "preprocessor_config.json", "image_grid_pinpoints", [[0, 0]], "zero"),
    ("llava_next", "config.json", "image_grid_pinpoints", [[0, 0]], "zero"),
    (
        "llava_next",
        "preprocessor_config.json",
        "image_grid_pinpoints",
        [[336000000, 336000000]],
        "huge",
    ),
    ("llava_next", "preprocessor_config.json", "image_grid_pinpoints", "336x672", "wrong type"),
    (
        "llava_next",
        "preprocessor_config.json",
        "image_grid_pinpoints",
        [["336", 672]],
        "wrong type",
    ),
    ("llava_next", "preprocessor_config.json", "image_mean", [1, 2], "wrong type"),
    ("llava_next", "config.json", "vision_config.image_size", 0, "zero"),
    # LLaVA-OneVision
    ("llava_onevision", "video_preprocessor_config.json", "size.height", -384, "negative"),
    ("llava_onevision", "video_preprocessor_config.json", "image_std", [0, 0, 0], "non-finite"),
    ("llava_onevision", "config.json", "spatial_pool_stride", 0, "zero"),
    ("llava_onevision", "config.json", "video_token_index", 10**12, "out of vocabulary"),
    ("llava_onevision", "preprocessor_config.json", "size", {"height": 1e9, "width": 1e9}, "huge"),
    # Llama 4
    ("llama4", "preprocessor_config.json", "max_patches", 0, "zero"),
    ("llama4", "preprocessor_config.json", "max_patches", 10**9, "huge"),
    ("llama4", "config.json", "vision_config.pixel_shuffle_ratio", 0, "zero"),
    ("llama4", "config.json", "vision_config.patch_size", 0, "zero"),
    ("llama4", "preprocessor_config.json", "size", {"height": 10**9, "width": 10**9}, "huge"),
    ("llama4", "preprocessor_config.json", "image_std", 0, "non-finite"),
    ("llama4", "config.json", "image_token_index", 2**40, "out of vocabulary"),
    # GLM-4.1V
    ("glm4v", "preprocessor_config.json", "patch_size", 0, "zero"),
    ("glm4v", "video_preprocessor_config.json", "size.shortest_edge", -1, "negative"),
    ("glm4v", "video_preprocessor_config.json", "size.shortest_edge", 10**12, "huge"),
    ("glm4v", "video_preprocessor_config.json", "fps", "two", "wrong type"),
    ("glm4v", "preprocessor_config.json", "image_std", [0, 0, 0], "non-finite"),
    ("glm4v", "config.json", "video_start_token_id", 10**9, "out of vocabulary"),
    # GLM-4.6V
    ("glm46v", "video_preprocessor_config.json", "max_duration", 0, "zero"),
    ("glm46v", "video_preprocessor_config.json", "temporal_patch_size", -2, "negative"),
    ("glm46v", "preprocessor_config.json", "size.longest_edge", 10**15, "huge"),
    ("glm46v", "preprocessor_config.json", "processor_class", 3, "wrong type"),
    ("glm46v", "video_preprocessor_config.json", "rescale_factor", math.inf, "non-finite"),
    ("glm46v", "config.json", "image_token_id", 151552, "out of vocabulary"),
    # GLM-5-Next (processor_config.json's nested processors; budgets in tokens)
    ("glm5_next", "processor_config.json", "image_processor.min_image_tokens", 0, "zero"),
    ("glm5_next", "processor_config.json", "video_processor.max_image_tokens", -8, "negative"),
    ("glm5_next", "processor_config.json", "image_processor.min_image_tokens", 10**9, "huge"),
    ("glm5_next", "processor_config.json", "video_processor.patch_expand_factor", 64, "huge"),
    ("glm5_next", "processor_config.json", "video_processor.fps", "two", "wrong type"),
    ("glm5_next", "processor_config.json", "image_processor.image_std", [0, 1, 1], "non-finite"),
    ("glm5_next", "config.json", "video_token_id", 154880, "out of vocabulary"),
    # Gemma 4 (processor_config.json's nested image processor; its video one is not read)
    ("gemma4", "processor_config.json", "image_processor.patch_size", 0, "zero"),
    ("gemma4", "processor_config.json", "image_processor.pooling_kernel_size", -3, "negative"),
    ("gemma4", "processor_config.json", "image_processor.max_soft_tokens", 10**9, "huge"),
    ("gemma4", "config.json", "vision_config.default_output_length", 10**9, "huge"),
    ("gemma4", "processor_config.json", "image_processor.do_resize", "yes", "wrong type"),
    ("gemma4", "processor_config.json", "image_processor.image_std", [1, 0, 1], "non-finite"),
    ("gemma4", "processor_config.json", "image_processor.rescale_factor", math.nan, "non-finite"),
    ("gemma4", "config.json", "video_token_id", 262144, "out of vocabulary"),
    # Qwen3.5 (its ids are read from config.json, where Qwen3-VL's keys are top level)
    ("qwen3_5", "video_preprocessor_config.json", "patch_size", 0, "zero"),
    ("qwen3_5", "preprocessor_config.json", "size.longest_edge", -1, "negative"),
    ("qwen3_5", "video_preprocessor_config.json", "size.shortest_edge", 10**12, "huge"),
    ("qwen3_5", "video_preprocessor_config.json", "max_frames", "768", "wrong type"),
    ("qwen3_5", "video_preprocessor_config.json", "image_std", [0.5, 0, 0.5], "non-finite"),
    ("qwen3_5", "config.json", "video_token_id", 248320, "out of vocabulary"),
    ("qwen3_5", "config.json", "vision_start_token_id", -1, "negative"),
    # InternVL (its token ids are the tokenizer's, as vLLM reads them)
    ("internvl", "processor_config.json", "image_seq_length", 0, "zero"),
    ("internvl", "config.json", "vision_config.patch_size", [0, 0], "zero"),
    ("internvl", "preprocessor_config.json", "max_patches", -1, "negative"),
    ("internvl", "preprocessor_config.json", "max_patches", 10**9, "huge"),
    ("internvl", "preprocessor_config.json", "size", {"height": 10**9, "width": 10**9}, "huge"),
    ("internvl", "preprocessor_config.json", "image_std", [0, 0, 0], "non-finite"),
    ("internvl", "config.json", "downsample_ratio", math.nan, "non-finite"),
    ("internvl", "preprocessor_config.json", "min_patches", "1", "wrong type"),
    ("internvl", "config.json", "vision_config.image_size", "448", "wrong type"),
    # MiniMax-M3-VL (vLLM's vendored classes; its ids are the tokenizer's, by name)
    ("minimax_m3_vl", "preprocessor_config.json", "patch_size", 0, "zero"),
    ("minimax_m3_vl", "video_preprocessor_config.json", "min_pixels", -1, "negative"),
    ("minimax_m3_vl", "preprocessor_config.json", "max_pixels", 10**15, "huge"),
    ("minimax_m3_vl", "video_preprocessor_config.json", "max_long_side_pixel", 10**9, "huge"),
    ("minimax_m3_vl", "preprocessor_config.json", "max_long_side_pixel", "1008", "wrong type"),
    ("minimax_m3_vl", "video_preprocessor_config.json", "image_std", [0, 1, 1], "non-finite"),
    # Inkling (processor_config.json's nested image processor; its token ids are vLLM's constants)
    ("inkling", "processor_config.json", "image_processor.rescale_image_frac", 0, "zero"),
    ("inkling", "config.json", "vision_config.patch_size", 0, "zero"),
    (
        "inkling",
        "processor_config.json",
        "image_processor.rescale_image_max_upscaled_long_edge",
        -2048,
        "negative",
    ),
    ("inkling", "processor_config.json", "image_processor.rescale_image_frac", 10**6, "huge"),
    (
        "inkling",
        "processor_config.json",
        "image_processor.size",
        {"height": 10**9, "width": 10**9},
        "huge",
    ),
    ("inkling", "processor_config.json", "image_processor.image_std", [0, 0, 0], "non-finite"),
    ("inkling", "processor_config.json", "image_processor.rescale_factor", math.nan, "non-finite"),
    ("inkling", "config.json", "vision_config.decoder_dmodel", "big", "wrong type"),
    # Qwen3-Omni (one preprocessor_config.json for both processors; ids the tokenizer's,
    # checked against thinker_config)
    ("qwen3_omni_moe", "preprocessor_config.json", "patch_size", 0, "zero"),
    ("qwen3_omni_moe", "preprocessor_config.json", "min_pixels", -1, "negative"),
    ("qwen3_omni_moe", "preprocessor_config.json", "max_pixels", 10**13, "huge"),
    ("qwen3_omni_moe", "preprocessor_config.json", "merge_size", "2", "wrong type"),
    ("qwen3_omni_moe", "preprocessor_config.json", "image_std", [0.5, 0, 0.5], "non-finite"),
    ("qwen3_omni_moe", "config.json", "thinker_config.video_token_id", 151936, "out of vocabulary"),
    # Nemotron-3-Nano-Omni (config.json alone: vLLM builds its processor from it)
    ("nemotron_h_omni", "config.json", "patch_size", 0, "zero"),
    ("nemotron_h_omni", "config.json", "vision_config.args.min_num_patches", -1024, "negative"),
    ("nemotron_h_omni", "config.json", "vision_config.video_target_num_patches", 10**9, "huge"),
    ("nemotron_h_omni", "config.json", "patch_size", 256, "huge"),
    (
        "nemotron_h_omni",
        "config.json",
        "vision_config.video_maintain_aspect_ratio",
        "yes",
        "wrong type",
    ),
    ("nemotron_h_omni", "config.json", "norm_std", [0.5, 0, 0.5], "non-finite"),
]


def folder_with(base: str | None, file: str, key: str, value: Any, root: Path) -> Path:
    """A copy of ``base``'s folder with ``key`` of ``file`` set to ``value``."""
    folder = root / "model"
    if base is None:
        folder.mkdir()
        from mmctl.checkpoint.source import builtin

        for path in builtin().files().values():
            shutil.copy(path, folder / path.name)
    else:
        shutil.copytree(FAMILIES / base, folder)
    data = json.loads((folder / file).read_text())
    *parents, last = key.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    (folder / file).write_text(json.dumps(data))
    return folder


def _id(case: tuple) -> str:
    base, file, key, value, kind = case
    return f"{base or 'qwen3_vl'}-{file.split('.')[0]}-{key}={str(value)[:20]}-{kind}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_a_hostile_value_is_one_sentence_naming_it(case, tmp_path: Path) -> None:
    base, file, key, value, _ = case
    folder = folder_with(base, file, key, value, tmp_path)
    with pytest.raises(InputError) as refused:
        load_model(model_dir=folder)
    message = refused.value.message
    assert "\n" not in message
    # It names the setting (its last key; a pinpoint or a size names its parent).
    assert key.split(".")[-1] in message or key.split(".")[0] in message, message


def test_the_classes_cover_every_family() -> None:
    assert {c[0] for c in CASES} == {
        None,
        *(p.name for p in FAMILIES.iterdir() if p.name not in NOT_A_MODEL),
    }
    kinds = {c[4] for c in CASES}
    assert kinds == {"zero", "negative", "huge", "wrong type", "non-finite", "out of vocabulary"}


def test_the_published_folders_resolve_without_a_warning() -> None:
    for folder in [BUILTIN_CONFIG_DIR.parent / "qwen3-vl", *sorted(FAMILIES.iterdir())]:
        if folder.name in NOT_A_MODEL:
            continue
        if folder == BUILTIN_CONFIG_DIR.parent / "qwen3-vl":
            model = load_model()
        else:
            model = load_model(model_dir=folder)
        assert model.warnings == (), (folder.name, model.warnings)


def test_an_unknown_key_is_named_in_a_warning(tmp_path: Path) -> None:
    folder = folder_with("llava", "preprocessor_config.json", "do_sharpen", True, tmp_path)
    model = load_model(model_dir=folder)
    assert len(model.warnings) == 1
    assert "'do_sharpen'" in model.warnings[0] and "preprocessor_config.json" in model.warnings[0]


@pytest.mark.parametrize(
    ("setter", "expected"),
    [
        (lambda v: v.update(cap_pixels_per_frame=True), (4, 40, 72)),
        (lambda v: v.update(cap_pixels_per_frame=True, max_video_tokens=64), (4, 12, 20)),
        (lambda v: None, (4, 44, 80)),
    ],
)
def test_qwen3_vl_per_frame_cap_as_transformers_applies_it(
    setter: Callable[[dict], None], expected: tuple[int, int, int], tmp_path: Path
) -> None:
    """``cap_pixels_per_frame`` / ``max_video_tokens`` (transformers 5.16): the clip's
    budget becomes max(min(tokens·factor², longest // frames), int(shortest·1.05))
    per frame. The grids of 8 frames of 1280x720 are what transformers 5.20.2's
    ``Qwen3VLVideoProcessor(size=the published budget, **setting).resize`` made of
    a ``[1, 8, 3, 720, 1280]`` tensor (ran in scripts/reference/install_env.sh's
    environment: 640x1152, 192x320 and, uncapped, 704x1280)."""
    folder = folder_with(None, "video_preprocessor_config.json", "fps", 2, tmp_path)
    path = folder / "video_preprocessor_config.json"
    video = json.loads(path.read_text())
    setter(video)
    path.write_text(json.dumps(video))
    model = load_model(model_dir=folder)
    variant = model.spec.processor.variant  # type: ignore[attr-defined]
    height, width = variant.video_size(8, 720, 1280, model.params)
    grid = (4, height // 16, width // 16)
    assert grid == expected
