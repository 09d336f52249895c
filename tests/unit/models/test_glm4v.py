"""GLM-4.1V / GLM-4.6V pure functions against the committed goldens.

Every ``glm4v-*`` and ``glm46v-*`` golden of tests/fixtures/families/goldens/
(transformers 5.20.2's processors driven as vLLM 0.33 drives them, vLLM's own
processor shown equal by scripts/families/vllm_check.py): the committed media
loaded and decoded as mmctl does, the frames chosen by ``sample_indices``,
through ``image_pixels`` / ``video_pixels``, must give the golden's float32
bytes and grids; ``image_replacement`` / ``video_replacement`` spliced into the
template ids must give vLLM's prompt ids, every ``<|image|>`` an embedding.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.video import decode_sampled
from mmctl.models import glm4v

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDENS = FIXTURES / "families" / "goldens"
MEDIA = FIXTURES / "media"
SETTINGS = {"glm4v": glm4v.GLM41V, "glm46v": glm4v.GLM46V}
VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".gif", ".mov"}


def _goldens() -> list[Path]:
    return [p for f in SETTINGS for p in sorted(GOLDENS.glob(f"{f}-*.npz"))]


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _encoder(family: str):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(FIXTURES / "families" / family / "tokenizer.json"))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _decode(path: Path, s: glm4v.Glm4vSettings) -> tuple[np.ndarray, glm4v.SampledFrames, float]:
    frames: dict[int, np.ndarray] = {}
    chosen: list[glm4v.SampledFrames] = []

    def sampler(total: int, fps: float) -> np.ndarray:
        chosen[:] = [glm4v.sample_indices(total, fps, s)]
        return np.asarray(sorted(set(chosen[0].indices)), dtype=np.int64)

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    info, indices = decode_sampled(path, sampler, sink)
    by_index = {int(i): frames[k] for k, i in enumerate(indices)}
    sampled = chosen[0]
    return np.stack([by_index[i] for i in sampled.indices]), sampled, info.source_fps


def _splice(template: list[int], target: list[int], items: list[list[int]]) -> list[int]:
    out, i, queue = [], 0, list(items)
    while i < len(template):
        if queue and template[i : i + len(target)] == target:
            out += queue.pop(0)
            i += len(target)
        else:
            out.append(template[i])
            i += 1
    return out


@pytest.mark.parametrize("golden", _goldens(), ids=lambda p: p.stem)
def test_golden(golden: Path) -> None:
    z = np.load(golden)
    family = golden.name.split("-", 1)[0]
    s = SETTINGS[family]
    names = [str(n) for n in z["media"]]
    ids = z["template_ids"].tolist()

    images = [load_image(MEDIA / n)[1] for n in names if Path(n).suffix not in VIDEO_SUFFIXES]
    if images:
        assert np.array_equal([i.shape[:2] for i in images], z["image_sizes_hw"])
        done = [glm4v.image_pixels(i, s) for i in images]
        rows = np.concatenate([d[0] for d in done])
        assert list(rows.shape) == z["pixel_values_shape"].tolist()
        assert _sha(rows) == str(z["pixel_values_sha256"])
        grids = [d[1] for d in done]
        assert np.array_equal(grids, z["image_grid_thw_full"])
        ids = _splice(ids, glm4v.image_target(s), [glm4v.image_replacement(g, s) for g in grids])

    videos = [n for n in names if Path(n).suffix in VIDEO_SUFFIXES]
    for k, name in enumerate(videos):
        frames, sampled, fps = _decode(MEDIA / name, s)
        assert fps == float(z[f"video{k}_fps"])
        assert sampled.resampled == bool(z[f"video{k}_do_sample_frames"])
        assert list(sampled.indices) == z[f"video{k}_indices"].tolist()
        assert list(sampled.seconds) == z[f"video{k}_seconds"].tolist()
        rows, grid = glm4v.video_pixels(frames, s)
        assert list(rows.shape) == z["pixel_values_videos_shape"].tolist()
        assert _sha(rows) == str(z["pixel_values_videos_sha256"])
        assert [list(grid)] == z["video_grid_thw_full"].tolist()
        replacement = glm4v.video_replacement(grid, sampled.seconds, _encoder(family), s)
        mask = glm4v.embed_mask(replacement, s)
        assert mask.sum() == grid[0] * grid[1] * grid[2] // 4
        assert not mask[0] and not mask[-1]
        ids = _splice(ids, glm4v.video_target(s), [replacement])

    assert ids == z["vllm_input_ids"].tolist()


def test_every_variant_has_image_and_video_goldens() -> None:
    for family in SETTINGS:
        names = [p.name for p in GOLDENS.glob(f"{family}-*.npz")]
        assert any("-image-" in n for n in names) and any("-video-" in n for n in names)


def test_published_folders_hold_the_default_settings() -> None:
    for family, s in SETTINGS.items():
        folder = FIXTURES / "families" / family
        config = json.loads((folder / "config.json").read_text())
        pre = json.loads((folder / "preprocessor_config.json").read_text())
        video = json.loads((folder / "video_preprocessor_config.json").read_text())
        assert glm4v.PROCESSOR_VARIANTS[pre["processor_class"]] == s.variant
        assert config["image_token_id"] == s.image_token_id
        assert config["video_token_id"] == s.video_token_id
        assert config["video_start_token_id"] == s.video_start_token_id
        assert (pre["size"]["shortest_edge"], pre["size"]["longest_edge"]) == (
            s.image_min_pixels,
            s.image_max_pixels,
        )
        assert video["size"]["longest_edge"] == s.video_max_pixels
        assert config["vision_config"]["patch_size"] == s.patch_size


def test_timestamps_differ_by_variant() -> None:
    assert glm4v.timestamp_text(3, glm4v.GLM41V) == "3"
    assert glm4v.timestamp_text(3, glm4v.GLM46V) == "3.0 seconds"


@pytest.mark.parametrize("s", SETTINGS.values(), ids=SETTINGS.keys())
def test_a_clip_under_one_second_is_refused_as_vllm_refuses_it(s: glm4v.Glm4vSettings) -> None:
    # min_frames.mp4: 6 frames at 10 fps; both loaders keep frame 0 alone.
    assert len(glm4v.loader_indices(6, 10.0, s)) == 1
    with pytest.raises(InputError, match="needs 2"):
        glm4v.sample_indices(6, 10.0, s)


def test_uint8_rows_are_the_resized_pixels() -> None:
    rgb = np.arange(60 * 90 * 3, dtype=np.uint8).reshape(60, 90, 3)
    floats, grid = glm4v.image_pixels(rgb, glm4v.GLM41V)
    raw, grid8 = glm4v.image_pixels(rgb, glm4v.GLM41V, PixelFormat.UINT8)
    assert grid == grid8 and raw.dtype == np.uint8
    mean, std = (
        np.asarray(v, np.float32) * np.float32(255)
        for v in (glm4v.OPENAI_CLIP_MEAN, glm4v.OPENAI_CLIP_STD)
    )
    channel = raw.reshape(raw.shape[0], 3, -1).astype(np.float32)
    assert np.array_equal((channel - mean[:, None]) / std[:, None], floats.reshape(channel.shape))
