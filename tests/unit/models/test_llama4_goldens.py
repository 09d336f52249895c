"""Llama 4's tiles and prompt tokens against the HF/vLLM goldens, bit for bit.

The goldens (scripts/make_family_fixtures.py, transformers 5.20.2) hold HF's
bfloat16 ``pixel_values`` widened to float32, vLLM's ``aspect_ratios`` and
``patches_per_image``, and the expanded ``input_ids`` beside the unexpanded
``template_ids``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mmctl.checkpoint.files import ModelFiles, load_model_files
from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.models import llama4

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "llama4"
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("llama4-*.npz"))


def _json(name: str) -> dict:
    return json.loads((FOLDER / name).read_text())


@pytest.fixture(scope="module")
def vision() -> llama4.Vision:
    resolved = llama4.Vision.resolve(load_model_files(FOLDER), "llama4")
    assert resolved.warnings == (), resolved.warnings
    vision: llama4.Vision = resolved.settings
    return vision


@pytest.fixture(scope="module")
def tokens(vision: llama4.Vision) -> llama4.Llama4Tokens:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    return llama4.Llama4Tokens.from_vocab(tokenizer.token_to_id, image_token=vision.image_token)


def test_goldens_present():
    assert len(GOLDENS) == 10


def test_folder_is_scout(vision, tokens):
    assert vision == llama4.Vision()
    assert vision.patches_per_tile == 144
    assert tokens.patch == vision.image_token_index == 200092
    assert (tokens.image, tokens.image_start, tokens.image_end) == (200090, 200080, 200081)
    assert (tokens.tile_x_separator, tokens.tile_y_separator) == (200084, 200085)


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_golden(golden, vision, tokens):
    with np.load(golden) as data:
        record = {key: data[key] for key in data.files}
    tiles, ratios = [], []
    for name in record["media"].tolist():
        _, rgb = load_image(FIXTURES / "media" / name)
        image, ratio = llama4.image_tiles(rgb, vision)
        assert image.dtype == np.float32 and image.shape[1:] == (3, 336, 336)
        assert image.shape[0] == llama4.patches_per_image(ratio)
        tiles.append(image)
        ratios.append(ratio)
    # vLLM's flat_from_sizes: every image's tiles, one after another.
    pixels = np.ascontiguousarray(np.concatenate(tiles))
    assert list(pixels.shape) == record["pixel_values_shape"].tolist()
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == str(record["pixel_values_sha256"])
    assert ratios == [tuple(r) for r in record["aspect_ratios"].tolist()]
    assert [llama4.patches_per_image(r) for r in ratios] == record["patches_per_image"].tolist()

    queue = list(ratios)
    ids: list[int] = []
    for token in record["template_ids"].tolist():
        if token == tokens.image:
            ids += llama4.image_token_ids(
                queue.pop(0), tokens, patches_per_tile=vision.patches_per_tile
            )
        else:
            ids.append(token)
    assert not queue
    assert ids == record["input_ids"].tolist()
    assert ids == record["vllm_input_ids"].tolist()


def test_tiles_are_bfloat16_values(vision):
    rgb = np.random.default_rng(3).integers(0, 256, (700, 300, 3), dtype=np.uint8)
    tiles, ratio = llama4.image_tiles(rgb, vision)
    bits = tiles.view(np.uint32)
    assert not (bits & 0xFFFF).any()
    assert tiles.shape[0] == llama4.patches_per_image(ratio) == 1 + ratio[0] * ratio[1]
    # the padding (uint8 0) is -1 exactly
    assert tiles.min() == -1.0 and tiles.max() == 1.0


def test_one_tile_has_no_separators():
    tokens = llama4.Llama4Tokens(1, 2, 3, 4, 5, 6)
    assert llama4.image_token_ids((1, 1), tokens, patches_per_tile=2) == [1, 3, 4, 4, 2]


def test_tile_grid_tokens():
    tokens = llama4.Llama4Tokens(1, 2, 3, 4, 5, 6)
    ids = llama4.image_token_ids((2, 3), tokens, patches_per_tile=1)
    row = [4, 5, 4, 5, 4, 6]
    assert ids == [1, *row, *row, 3, 4, 2]


def test_missing_token_is_a_typed_error():
    vocab = {"<|image_start|>": 1, "<|image_end|>": 2, "<|image|>": 3, "<|patch|>": 4}
    with pytest.raises(InputError, match="tile_x_separator"):
        llama4.Llama4Tokens.from_vocab(vocab.get)


def test_patches_per_image():
    assert llama4.patches_per_image((1, 1)) == 1
    assert llama4.patches_per_image((1, 2)) == 3
    assert llama4.patches_per_image((3, 5)) == 16


# ---- the canvas ----


def test_supported_resolutions_in_hf_order():
    # HF's docstring example: max_num_chunks=4, patch 224.
    assert llama4.find_supported_resolutions(4, 224) == (
        (224, 896),
        (448, 448),
        (224, 224),
        (896, 224),
        (224, 672),
        (672, 224),
        (224, 448),
        (448, 224),
    )
    sixteen = llama4.find_supported_resolutions(16, 336)
    assert len(set(sixteen)) == len(sixteen)
    assert all((h // 336) * (w // 336) <= 16 for h, w in sixteen)
    assert {(h // 336, w // 336) for h, w in sixteen} == {
        (r, c) for r in range(1, 17) for c in range(1, 17) if r * c <= 16
    }


def test_best_fit_upscaling_picks_the_smallest_scale_then_the_smallest_area():
    # HF's docstring example: 200x300 fits 224x448 (scale 1.12, less padding than 672x224).
    resolutions = ((224, 672), (672, 224), (224, 448), (448, 224), (224, 224))
    assert llama4.get_best_fit(200, 300, resolutions) == (224, 448)
    # A square image ties every canvas of its short side; the square one is the smallest.
    sixteen = llama4.find_supported_resolutions(16, 336)
    assert llama4.get_best_fit(100, 100, sixteen) == (336, 336)
    assert llama4.get_best_fit(10, 20, sixteen) == (336, 336)


def test_best_fit_resize_to_max_canvas_takes_the_largest_upscale():
    sixteen = llama4.find_supported_resolutions(16, 336)
    assert llama4.get_best_fit(100, 100, sixteen, resize_to_max_canvas=True) == (1344, 1344)


def test_best_fit_downscaling_keeps_as_much_as_possible():
    sixteen = llama4.find_supported_resolutions(16, 336)
    # 900x1400 still grows (1.12) into 3x5 tiles; a 6000x100 strip and a
    # 4000x4000 square can only shrink: the mildest shrink wins.
    assert llama4.get_best_fit(900, 1400, sixteen) == (1008, 1680)
    assert llama4.get_best_fit(6000, 100, sixteen) == (5376, 336)
    assert llama4.get_best_fit(4000, 4000, sixteen) == (1344, 1344)


def test_resized_size_caps_upscaling_at_one_tile(vision):
    # tiny images grow to one tile on their long side, no further
    assert llama4.resized_size(10, 20, vision) == ((336, 336), (168, 336))
    # an image larger than a tile but smaller than its canvas keeps its size
    assert llama4.resized_size(650, 1000, vision) == ((672, 1008), (650, 1000))
    # downscaling: the long side fills the canvas
    assert llama4.resized_size(6000, 100, vision) == ((5376, 336), (5376, 89))


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((1420, 1065), ((1344, 1008), (1344, 1007))),
        ((1700, 1275), ((1344, 1008), (1344, 1008))),
        ((1920, 1450), ((1344, 1344), (1344, 1015))),
        ((2065, 1121), ((1680, 1008), (1680, 911))),
    ],
)
def test_resized_size_rounds_where_hf_uses_float32(size, expected, vision):
    """HF's values (ran, transformers 5.20.2): sizes where computing the whole of
    get_max_res_without_distortion in float64 would be one pixel off."""
    assert llama4.resized_size(*size, vision) == expected


def from_files(pre: dict, proc: dict, config: dict) -> llama4.Vision:
    vision: llama4.Vision = llama4.Vision.resolve(
        ModelFiles(config, pre, {}, proc), "llama4"
    ).settings
    return vision


def test_bad_settings_are_refused():
    with pytest.raises(InputError, match="square"):
        from_files({"size": {"height": 336, "width": 448}}, {}, {})
    with pytest.raises(InputError, match="resample"):
        from_files({"resample": 0}, {}, {})
    with pytest.raises(InputError, match="do_normalize"):
        from_files({"do_normalize": False}, {}, {})


def test_nested_image_processor_wins_and_class_defaults_fill_in():
    vision = from_files(
        {"max_patches": 4, "image_mean": [0.1, 0.2, 0.3]},
        {"image_processor": {"max_patches": 9, "resample": 3}},
        {"vision_config": {"patch_size": 16}},
    )
    assert vision.max_patches == 9
    assert vision.filter == "bicubic"
    assert vision.image_mean == (0.5, 0.5, 0.5)  # the nested dict replaces the file
    assert vision.image_size == 448  # Llama4VisionConfig's class default
    assert vision.patch_size == 16
    assert vision.image_token_index == 200092


def test_empty_image_is_an_input_error(vision):
    with pytest.raises(InputError):
        llama4.image_tiles(np.zeros((0, 5, 3), np.uint8), vision)
