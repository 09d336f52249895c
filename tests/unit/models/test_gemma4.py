"""Gemma 4's pixels, frame choice, timestamps and prompt tokens against the goldens.

The goldens (scripts/make_family_fixtures.py with scripts/families/gemma4_reference.py:
transformers 5.20.2's processor called as vLLM 0.33 calls it, vLLM's prompt
updates; scripts/families/vllm_check.py ran vLLM's own processor and loaders on
every one) hold the sha256 of each tensor's exact bytes, the sampled frame
indices, the source rate, each frame's timestamp and soft-token count, the
unexpanded ``template_ids`` and vLLM's ``vllm_input_ids``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.video import decode_sampled
from mmctl.models import gemma4

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "gemma4"
MEDIA = FIXTURES / "media"
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("gemma4-*.npz"))
VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".gif", ".mov"}
SETTINGS = gemma4.Settings()


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _record(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def encode():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


def _decode(path: Path) -> tuple[np.ndarray, np.ndarray, int, float]:
    frames: dict[int, np.ndarray] = {}

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    info, indices = decode_sampled(
        path, lambda total, fps: gemma4.sample_indices(total, fps, SETTINGS), sink
    )
    return (
        np.stack([frames[i] for i in range(len(indices))]),
        indices,
        info.total_frames,
        info.source_fps,
    )


def test_goldens_present():
    assert len(GOLDENS) == 24


def test_settings_are_the_folders():
    processor = json.loads((FOLDER / "processor_config.json").read_text())["image_processor"]
    config = json.loads((FOLDER / "config.json").read_text())
    assert SETTINGS.patch_size == processor["patch_size"] == config["vision_config"]["patch_size"]
    assert SETTINGS.pooling_kernel_size == processor["pooling_kernel_size"]
    assert SETTINGS.max_soft_tokens == processor["max_soft_tokens"]
    assert SETTINGS.default_output_length == config["vision_config"]["default_output_length"]
    assert SETTINGS.rescale_factor == processor["rescale_factor"]
    assert (SETTINGS.do_resize, SETTINGS.do_rescale, SETTINGS.do_normalize) == (
        processor["do_resize"],
        processor["do_rescale"],
        processor["do_normalize"],
    )
    assert list(SETTINGS.image_mean) == processor["image_mean"]
    assert list(SETTINGS.image_std) == processor["image_std"]
    for key in ("image_token_id", "video_token_id", "boi_token_id", "eoi_token_id"):
        assert getattr(SETTINGS, key) == config[key]


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_golden(golden: Path, encode) -> None:
    z = _record(golden)
    names = [str(n) for n in z["media"]]
    replacements: dict[int, list[list[int]]] = {
        SETTINGS.image_token_id: [],
        SETTINGS.video_token_id: [],
    }
    images = [load_image(MEDIA / n)[1] for n in names if Path(n).suffix not in VIDEO_SUFFIXES]
    videos = [n for n in names if Path(n).suffix in VIDEO_SUFFIXES]

    if images:
        assert np.array_equal([i.shape[:2] for i in images], z["image_sizes_hw"])
        items = [gemma4.image_pixels(i, SETTINGS) for i in images]
        pixels = np.stack([p.pixel_values for p in items])  # batched: one row per image
        positions = np.stack([p.pixel_position_ids for p in items])
        assert pixels.dtype == np.float32 and positions.dtype == np.int64
        assert list(pixels.shape) == z["pixel_values_shape"].tolist()
        assert _sha(pixels) == str(z["pixel_values_sha256"])
        assert _sha(positions) == str(z["pixel_position_ids_sha256"])
        assert [p.soft_tokens for p in items] == z["num_soft_tokens_per_image"].tolist()
        for image, item in zip(images, items, strict=True):
            ids = gemma4.image_token_ids(image.shape[0], image.shape[1], SETTINGS)
            assert ids.count(SETTINGS.image_token_id) == item.soft_tokens  # prompt = encoder
            replacements[SETTINGS.image_token_id].append(ids)

    frames_pixels, frames_positions, counts = [], [], []
    for k, name in enumerate(videos):
        frames, indices, total, fps = _decode(MEDIA / name)
        assert total == int(z[f"video{k}_total_frames"])
        assert np.array_equal(indices, z[f"video{k}_indices"])
        assert _sha(frames) == str(z[f"video{k}_frames_sha256"])
        assert fps == float(z[f"video{k}_fps"])
        seconds = gemma4.timestamps(indices.tolist(), fps)
        assert seconds == z[f"video{k}_timestamps"].tolist()  # exact: vLLM keeps them
        items = gemma4.video_pixels(frames, SETTINGS)
        per_frame = [gemma4.frame_soft_tokens(*frames.shape[1:3], SETTINGS)] * len(frames)
        assert (
            [p.soft_tokens for p in items] == per_frame == z[f"video{k}_num_soft_tokens"].tolist()
        )
        frames_pixels += [p.pixel_values for p in items]
        frames_positions += [p.pixel_position_ids for p in items]
        counts.append(len(items))
        ids = gemma4.video_token_ids(seconds, per_frame, SETTINGS, encode)
        replacements[SETTINGS.video_token_id].append(ids)
    if videos:
        # flat_from_sizes: every video's frames one after another, split by video_frame_counts.
        pixels = np.stack(frames_pixels)
        assert list(pixels.shape) == z["pixel_values_videos_shape"].tolist()
        assert _sha(pixels) == str(z["pixel_values_videos_sha256"])
        assert _sha(np.stack(frames_positions)) == str(z["pixel_position_ids_videos_sha256"])
        assert counts == z["video_frame_counts_full"].tolist()

    assert encode(str(z["text"])) == z["template_ids"].tolist()
    expanded: list[int] = []
    for token in z["template_ids"].tolist():
        queue = replacements.get(token)
        expanded += queue.pop(0) if queue else [token]
    assert expanded == z["vllm_input_ids"].tolist()


def test_one_video_replacement_by_hand(encode):
    # Two 64x96 frames at 2 fps: "00:00 " then " 00:00 ", 60 tokens each.
    seconds = gemma4.timestamps([0, 1], 2.0)
    assert seconds == [0.0, 0.5]
    count = gemma4.frame_soft_tokens(64, 96, SETTINGS)
    assert count == 60  # 240x336 after resize: 5 x 7 blocks of 48, less than 70
    ids = gemma4.video_token_ids(seconds, [count, count], SETTINGS, encode)
    first = encode("00:00 ")
    later = encode(" 00:00 ")
    assert ids[: len(first)] == first
    body = [SETTINGS.boi_token_id, *[SETTINGS.video_token_id] * count, SETTINGS.eoi_token_id]
    assert ids == first + body + later + body


def test_timestamp_text_truncates():
    assert gemma4.timestamp_text(0.0) == "00:00"
    assert gemma4.timestamp_text(59.999) == "00:59"
    assert gemma4.timestamp_text(61.5) == "01:01"
    assert gemma4.timestamp_text(3600.0) == "60:00"
    assert gemma4.timestamps([48], 0.0) == [2.0]  # no rate: vLLM assumes 24


def test_sample_indices_is_vllms_default_loader():
    assert gemma4.sample_indices(7, 2.0, SETTINGS).tolist() == list(range(7))
    picked = gemma4.sample_indices(1600, 4.0, SETTINGS)
    assert len(picked) == 32 and picked[:4].tolist() == [0, 51, 103, 154] and picked[-1] == 1599
    assert gemma4.sample_indices(1, 10.0, SETTINGS).tolist() == [0]
    # A target rate (media_io_kwargs fps) keeps floor(duration * fps) frames when fewer.
    slow = gemma4.Settings(sample_fps=1.0)
    assert (
        gemma4.sample_indices(100, 10.0, slow).tolist()
        == np.linspace(0, 99, 10, dtype=int).tolist()
    )
    with pytest.raises(InputError):
        gemma4.sample_indices(0, 10.0, SETTINGS)


@pytest.mark.parametrize(
    ("height", "width", "expected"),
    [
        (61, 97, (624, 1008)),  # 13 x 21 blocks: 273 soft tokens
        (10, 20, (528, 1104)),  # enlarged
        (900, 1400, (624, 960)),
        (480, 480, (768, 768)),  # 256 tokens for a square
        (3, 900, (48, 13440)),  # one side floors to nothing: whole multiples, capped
    ],
)
def test_target_size(height, width, expected):
    got = gemma4.target_size(
        height, width, patch_size=16, pooling_kernel_size=3, max_soft_tokens=280
    )
    assert got == expected


def test_vllm_count_is_clamped_to_the_budget():
    # vLLM's own formula rounds the short side up to one block here and would count
    # 289 tokens; it clamps to the budget, which is what the encoder yields.
    assert gemma4.soft_tokens(3, 900, SETTINGS, 280) == 280
    pixels = gemma4.image_pixels(np.zeros((3, 900, 3), np.uint8), SETTINGS)
    assert pixels.soft_tokens == 280


def test_padding_rows_and_positions():
    item = gemma4.image_pixels(np.full((64, 96, 3), 255, np.uint8), SETTINGS)
    real = item.soft_tokens * 9
    assert item.pixel_values.shape == (2520, 768)
    assert np.all(item.pixel_values[:real] == 1.0) and np.all(item.pixel_values[real:] == 0.0)
    assert item.pixel_position_ids[0].tolist() == [0, 0]
    assert item.pixel_position_ids[1].tolist() == [1, 0]  # (x, y): reading order
    assert np.all(item.pixel_position_ids[real:] == -1)


def test_bad_input_is_a_typed_error():
    with pytest.raises(InputError):
        gemma4.image_pixels(np.zeros((0, 5, 3), np.uint8), SETTINGS)
    with pytest.raises(InputError):
        gemma4.image_pixels(np.zeros((4, 4), np.uint8), SETTINGS)
    with pytest.raises(InputError):
        gemma4.video_pixels(np.zeros((0, 4, 4, 3), np.uint8), SETTINGS)
    unresized = gemma4.Settings(do_resize=False)
    with pytest.raises(InputError):
        gemma4.image_pixels(np.zeros((20, 32, 3), np.uint8), unresized)
    assert gemma4.image_pixels(np.zeros((48, 32, 3), np.uint8), unresized).soft_tokens == 0
