"""How the LLaVA families read their files, and their token counts on hand-worked sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mmctl.checkpoint.files import ModelFiles
from mmctl.errors import InputError
from mmctl.models import llava, llava_next
from mmctl.models import llava_onevision as onevision
from mmctl.models.kinds import CLIP_MEAN
from mmctl.preprocessing.tiles import Size


def from_files(cls: Any, pre: dict, proc: dict, config: dict, video: dict | None = None) -> Any:
    """``cls``'s settings for a folder holding these files (empty: absent)."""
    files = ModelFiles(config, pre, video or {}, proc)
    return cls.resolve(files, "test").settings


CLIP_CONFIG = {
    "vision_config": {"image_size": 336, "patch_size": 14, "model_type": "clip_vision_model"}
}
SIGLIP_CONFIG = {
    "vision_config": {"image_size": 384, "patch_size": 14, "model_type": "siglip_vision_model"}
}


def test_llava_absent_keys_take_the_clip_class_defaults() -> None:
    pre = {"image_processor_type": "CLIPImageProcessor"}
    vision = from_files(llava.Vision, pre, {}, CLIP_CONFIG)
    assert vision.size == Size(shortest_edge=224) and vision.crop_size == (224, 224)
    assert vision.image_mean == CLIP_MEAN and not vision.do_pad
    assert vision.image_token_index == 32000 and vision.vision_feature_select_strategy == "default"


def test_nested_image_processor_wins_whole() -> None:
    nested = {"image_processor": {"image_processor_type": "LlavaImageProcessor", "do_pad": True}}
    legacy = {"size": {"shortest_edge": 336}, "crop_size": 336}
    vision = from_files(llava.Vision, legacy, nested, CLIP_CONFIG)
    assert vision.do_pad  # LlavaImageProcessor's pad-to-square
    assert vision.size == Size(shortest_edge=224)  # the legacy file is not merged in


def test_clip_processor_has_no_pad_to_square() -> None:
    assert not from_files(llava.Vision, {"do_pad": True}, {}, CLIP_CONFIG).do_pad


@pytest.mark.parametrize(
    "bad",
    [
        {"resample": 2},
        {"image_processor_type": "SiglipImageProcessor"},
        {"size": {"longest_edge": 336}},
    ],
)
def test_llava_refuses_what_it_does_not_implement(bad: dict) -> None:
    with pytest.raises(InputError):
        from_files(llava.Vision, bad, {}, CLIP_CONFIG)


def test_missing_vision_config_is_refused() -> None:
    with pytest.raises(InputError):
        from_files(llava.Vision, {}, {}, {"model_type": "llava"})


def test_llava_pad_to_square_uses_the_mean_colour() -> None:
    vision = llava.Vision(do_pad=True, do_normalize=False, do_rescale=False)
    out = llava.image_pixels(np.zeros((10, 40, 3), dtype=np.uint8), vision)
    assert out.shape == (3, 336, 336)
    # the top band is padding: int(mean * 255) per channel, resized flat
    assert out[:, 0, 0].tolist() == [122.0, 116.0, 104.0]


def test_llava_tokens_ignore_the_size() -> None:
    vision = llava.Vision()
    assert llava.image_tokens(1, 1, vision) == llava.image_tokens(2000, 30, vision) == 576


@pytest.mark.parametrize(
    ("h", "w", "expected"),
    [
        (61, 97, 1512),  # (1, 2) grid, 24 x 38 after unpadding: 912 + 24 + 576
        (336, 672, 24 * 48 + 24 + 576),
        (672, 672, 48 * 48 + 48 + 576),
    ],
)
def test_llava_next_tokens(h: int, w: int, expected: int) -> None:
    assert llava_next.image_tokens(h, w, llava_next.Vision()) == expected


def test_llava_next_pinpoints_must_agree_with_config() -> None:
    config = {**CLIP_CONFIG, "image_grid_pinpoints": [[336, 336]]}
    with pytest.raises(InputError, match="pinpoints"):
        from_files(llava_next.Vision, {}, {}, config)


def test_llava_next_one_image_shape() -> None:
    out = llava_next.image_pixels(np.zeros((61, 97, 3), dtype=np.uint8), llava_next.Vision())
    assert out.shape == (3, 3, 336, 336) and out.dtype == np.float32


@pytest.mark.parametrize(
    ("h", "w", "expected"),
    [
        (384, 384, 27 * 27 + 27 + 729),  # ratio 1/3: no shrink
        (2304, 2304, 81 * 81 + 81 + 729),  # 162x162 cells, ratio exactly 2: 81x81
    ],
)
def test_onevision_tokens(h: int, w: int, expected: int) -> None:
    assert onevision.image_tokens(h, w, onevision.Vision()) == expected


def test_onevision_video_tokens() -> None:
    vision = onevision.Vision()
    assert onevision.video_tokens(32, vision) == 196 * 32 + 1
    assert onevision.video_tokens(1, vision) == 197


def test_onevision_refuses_other_aspect_settings() -> None:
    with pytest.raises(InputError, match="anyres_max_9"):
        from_files(onevision.Vision, {}, {"vision_aspect_ratio": "anyres_max_4"}, SIGLIP_CONFIG)


def test_onevision_video_settings_fall_back_to_the_image_file() -> None:
    pre = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    vision = from_files(onevision.Vision, pre, {}, SIGLIP_CONFIG, None)
    assert vision.video_mean == (0.5, 0.5, 0.5)
    nested = {"video_processor": {"size": {"height": 192, "width": 192}}}
    vision = from_files(onevision.Vision, pre, nested, SIGLIP_CONFIG, {"size": 384})
    assert vision.video_size == Size(height=192, width=192)
    assert vision.video_mean == CLIP_MEAN  # the nested dict, not merged


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (1, [0]),
        (5, [0, 1, 2, 3, 4]),
        (32, list(range(32))),
        (33, [int(k * 32 / 31) for k in range(32)]),  # truncated, not rounded
    ],
)
def test_sample_indices(total: int, expected: list[int]) -> None:
    out = onevision.sample_indices(total)
    assert out.dtype == np.int64 and out.tolist() == expected


def test_sample_indices_long_video_and_edges() -> None:
    out = onevision.sample_indices(1600)
    assert out[:4].tolist() == [0, 51, 103, 154] and out[-1] == 1599 and len(out) == 32
    assert onevision.sample_indices(40, num_frames=0).tolist() == list(range(40))
    assert onevision.sample_indices(40, num_frames=4).tolist() == [0, 13, 26, 39]
    with pytest.raises(InputError):
        onevision.sample_indices(0)


def test_video_pixels_shape_and_refusal() -> None:
    frames = np.zeros((3, 50, 70, 3), dtype=np.uint8)
    out = onevision.video_pixels(frames, onevision.Vision())
    assert out.shape == (3, 3, 384, 384) and out.dtype == np.float32
    assert (out == -1.0).all()
    with pytest.raises(InputError):
        onevision.video_pixels(np.zeros((50, 70, 3), dtype=np.uint8), onevision.Vision())


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((0, 5, 3), dtype=np.uint8),
        np.zeros((5, 5, 4), dtype=np.uint8),
        np.zeros((5, 5, 3), dtype=np.float32),
        np.zeros((5, 5), dtype=np.uint8),
    ],
)
def test_image_pixels_refuse_what_is_not_rgb(bad: np.ndarray) -> None:
    with pytest.raises(InputError):
        llava.image_pixels(bad, llava.Vision())
    with pytest.raises(InputError):
        llava_next.image_pixels(bad, llava_next.Vision())
    with pytest.raises(InputError):
        onevision.image_pixels(bad, onevision.Vision())


def test_token_id_aliases_in_config() -> None:
    config = {**SIGLIP_CONFIG, "image_token_id": 5, "video_token_id": 6}
    vision = from_files(onevision.Vision, {}, {}, config)
    assert (vision.image_token_index, vision.video_token_index) == (5, 6)


def test_the_family_modules_load_no_heavy_module() -> None:
    """The families import numpy and mmctl's own modules, never torch, transformers or av."""
    import subprocess
    import sys

    code = (
        "import sys, mmctl.models.llava, mmctl.models.llava_next, mmctl.models.llava_onevision\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    heavy = {"torch", "transformers", "av", "grpc", "PIL"}
    assert not [m for m in loaded if m.split(".")[0] in heavy]


@pytest.mark.parametrize(
    "video", [{"resample": 2}, {"video_processor_type": "Qwen2VLVideoProcessor"}]
)
def test_onevision_refuses_video_settings_it_does_not_implement(video: dict) -> None:
    with pytest.raises(InputError):
        from_files(onevision.Vision, {}, {}, SIGLIP_CONFIG, video)
