"""InternVL's pure functions (mmctl/models/internvl.py) against the committed goldens.

Every ``internvl-*`` golden of tests/fixtures/families/goldens/ holds what vLLM
0.33's ``InternS1MultiModalProcessor`` makes of committed media (transformers
5.20.2's processors driven per item as vLLM drives them; vLLM's own processor
gave the same: scripts/families/vllm_check.py). Here the media are loaded as
mmctl loads them and run through the pure functions: the float32 bytes
(sha256) of ``pixel_values`` / ``pixel_values_videos``, the patch and frame
counts, the sampled frames, and the whole prompt — every placeholder replaced,
with its span and embedding positions — must be the golden's. Torch-free.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmctl.checkpoint.files import load_model_files
from mmctl.checkpoint.source import from_dir
from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.video import decode_sampled
from mmctl.models import internvl
from mmctl.prompt.tokenizer import Tokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "internvl"
GOLDENS = sorted((FIXTURES / "families" / "goldens").glob("internvl-*.npz"))
MEDIA = FIXTURES / "media"
VIDEO_SUFFIXES = {".mp4", ".mkv", ".webm", ".gif", ".mov"}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.load(from_dir(FOLDER))


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _decode(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    frames: dict[int, np.ndarray] = {}

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    info, indices = decode_sampled(path, lambda total, fps: internvl.sample_indices(total), sink)
    return np.stack([frames[i] for i in range(len(indices))]), indices, info.total_frames


def _expand(
    template: list[int], patches: list[int], frames: list[int], tok: Tokenizer
) -> tuple[list[int], dict[str, list[list[int]]]]:
    """The prompt with each placeholder replaced, and each item's (offset, length)."""
    tokens = internvl.Tokens()
    ids: list[int] = []
    spans: dict[str, list[list[int]]] = {"image": [], "video": []}
    patches, frames = list(patches), list(frames)
    for token in template:
        if token == tokens.context and patches:
            repl, kind = internvl.image_token_ids(patches.pop(0)), "image"
        elif token == tokens.video and frames:
            repl, kind = internvl.video_token_ids(frames.pop(0), tok.encode_cached), "video"
        else:
            ids.append(token)
            continue
        spans[kind].append([len(ids), len(repl)])
        ids += repl
    return ids, spans


def test_goldens_present() -> None:
    # 9 images, two images, 11 clips, image + video.
    assert len(GOLDENS) == 22


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_golden(golden: Path, tokenizer: Tokenizer) -> None:
    z = np.load(golden)
    names = [str(n) for n in z["media"]]
    images = [load_image(MEDIA / n)[1] for n in names if Path(n).suffix not in VIDEO_SUFFIXES]
    clips = [n for n in names if Path(n).suffix in VIDEO_SUFFIXES]

    patches: list[int] = []
    if images:
        sizes = np.asarray([i.shape[:2] for i in images], dtype=np.int64)
        assert np.array_equal(sizes, z["image_sizes_hw"])
        per_image = [internvl.image_pixels(i) for i in images]
        patches = [len(p) for p in per_image]
        assert patches == [internvl.num_patches(h, w) for h, w in sizes]
        assert patches == z["image_num_patches"].tolist()
        pixels = np.concatenate(per_image)  # flat: vLLM's flat_from_sizes
        assert pixels.dtype == np.float32
        assert list(pixels.shape) == z["pixel_values_shape"].tolist()
        assert _sha(pixels) == str(z["pixel_values_sha256"])
        assert int(z["image_token_id"]) == internvl.Tokens().context

    frames: list[int] = []
    per_video = []
    for k, name in enumerate(clips):
        rgb, indices, total = _decode(MEDIA / name)
        assert total == int(z[f"video{k}_total_frames"])
        assert np.array_equal(indices, z[f"video{k}_indices"])
        assert _sha(rgb) == str(z[f"video{k}_frames_sha256"])
        per_video.append(internvl.video_pixels(rgb))
        frames.append(len(indices))
    if clips:
        assert frames == z["video_num_patches"].tolist()
        pixels = np.concatenate(per_video)
        assert list(pixels.shape) == z["pixel_values_videos_shape"].tolist()
        assert _sha(pixels) == str(z["pixel_values_videos_sha256"])
        assert int(z["video_token_id"]) == internvl.Tokens().video

    ids, spans = _expand(z["template_ids"].tolist(), patches, frames, tokenizer)
    assert ids == z["vllm_input_ids"].tolist()
    for kind, token in (("image", internvl.Tokens().context), ("video", internvl.Tokens().video)):
        if f"{kind}_placeholders" not in z.files:
            assert spans[kind] == []
            continue
        assert spans[kind] == z[f"{kind}_placeholders"].tolist()
        expect = patches if kind == "image" else frames
        for (offset, length), count in zip(spans[kind], expect, strict=True):
            if kind == "image":
                assert length == internvl.image_tokens(count)
            mask = internvl.embed_mask(ids[offset : offset + length], token)
            assert int(mask.sum()) == count * internvl.Vision().image_seq_length
        # Every embedding position of the prompt lies in one of the spans.
        assert sum(
            int(internvl.embed_mask(ids[o : o + n], token).sum()) for o, n in spans[kind]
        ) == (int(np.count_nonzero(np.asarray(ids) == token)))


def test_vllm_fills_video_frames_with_the_video_token_where_hf_writes_img_context() -> None:
    """The goldens keep HF's own one-call expansion beside vLLM's: equal for images,
    for video they differ exactly where vLLM writes ``<video>`` (151674) and HF
    ``<IMG_CONTEXT>`` (151667) — mmctl must follow vLLM's."""
    tokens = internvl.Tokens()
    for golden in GOLDENS:
        z = np.load(golden)
        hf, vllm = z["input_ids"], z["vllm_input_ids"]
        assert len(hf) == len(vllm)
        differ = hf != vllm
        if "video_num_patches" not in z.files:
            assert not differ.any(), golden.name
            continue
        assert set(hf[differ].tolist()) == {tokens.context}
        assert set(vllm[differ].tolist()) == {tokens.video}
        assert int(differ.sum()) == int(z["video_num_patches"].sum()) * 256


def test_the_folders_tokens_are_the_defaults(tokenizer: Tokenizer) -> None:
    assert internvl.Tokens.from_vocab(tokenizer.token_to_id) == internvl.Tokens()


def test_a_tokenizer_without_the_video_token_is_refused() -> None:
    vocab = {"<img>": 1, "</img>": 2, "<IMG_CONTEXT>": 3}
    with pytest.raises(InputError, match="<video>"):
        internvl.Tokens.from_vocab(vocab.get)


def test_the_published_files_hold_the_defaults() -> None:
    """The defaults are the folder's values (the settings resolver reads them in
    earnest; this guards the two against drifting apart)."""
    pre = json.loads((FOLDER / "preprocessor_config.json").read_text())
    proc = json.loads((FOLDER / "processor_config.json").read_text())
    config = json.loads((FOLDER / "config.json").read_text())
    s = internvl.Vision()
    assert s.tile == (pre["size"]["height"], pre["size"]["width"])
    assert (s.min_patches, s.max_patches) == (pre["min_patches"], pre["max_patches"])
    assert s.image_mean == tuple(pre["image_mean"]) == s.video_mean
    assert s.image_std == tuple(pre["image_std"]) == s.video_std
    assert s.resample == pre["resample"]
    assert s.rescale_factor == pre["rescale_factor"]
    assert s.image_seq_length == proc["image_seq_length"]
    assert not (FOLDER / "video_preprocessor_config.json").exists()
    side = config["vision_config"]["image_size"][0] // config["vision_config"]["patch_size"][0]
    assert int(side**2 * config["downsample_ratio"] ** 2) == s.image_seq_length
    assert config["image_token_id"] == internvl.Tokens().context
    # The file says false; the processor's call default (true) is what runs.
    assert pre["crop_to_patches"] is False and "crop_to_patches" in internvl.Vision.INERT


@pytest.mark.parametrize(
    ("height", "width", "grid"),
    [
        (448, 448, (1, 1)),
        (10, 20, (2, 1)),  # exact 2:1 wins whatever the size
        (900, 1400, (3, 2)),
        (1, 4000, (12, 1)),
        (4000, 1, (1, 12)),
        (100, 100, (1, 1)),  # ties at 1:1 keep 1x1: the image is under half of 2x2 tiles
        (700, 700, (2, 2)),  # ... and take 2x2 once it covers more than half of them,
        (1000, 1000, (3, 3)),  # and 3x3 past half of those
    ],
)
def test_tile_grid(height: int, width: int, grid: tuple[int, int]) -> None:
    assert internvl.tile_grid(height, width) == grid


def _resolved(tmp_path: Path, **files: dict[str, Any]) -> Any:
    """The folder's settings with ``files`` merged into its JSON files (``video``:
    a video_preprocessor_config.json of its own)."""
    folder = tmp_path / "internvl"
    shutil.copytree(FOLDER, folder)
    for name, changes in files.items():
        path = folder / f"{name}.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**data, **changes}))
    return internvl.Vision.resolve(load_model_files(folder), "InternVL")


def test_the_folder_resolves_to_the_defaults_without_a_warning(tmp_path: Path) -> None:
    resolved = _resolved(tmp_path)
    assert resolved.settings == internvl.Vision() and resolved.warnings == ()
    assert internvl.num_patches(61, 97, resolved.settings) == 7  # crop_to_patches false: inert


def test_a_video_file_of_its_own_gives_the_frames_mean_not_its_size(tmp_path: Path) -> None:
    """InternVL3_5-*-HF ship one (size 384, CLIP mean/std): vLLM resizes frames to
    the image size and normalizes with the video file's mean/std."""
    video = {
        "video_processor_type": "InternVLVideoProcessor",
        "size": {"height": 384, "width": 384},
        "image_mean": list(internvl.kinds.CLIP_MEAN),
        "image_std": list(internvl.kinds.CLIP_STD),
    }
    s = _resolved(tmp_path, video_preprocessor_config=video).settings
    assert s.tile == (448, 448)
    assert (s.video_mean, s.video_std) == (internvl.kinds.CLIP_MEAN, internvl.kinds.CLIP_STD)
    assert s.image_mean == internvl.IMAGENET_MEAN
    frames = np.full((2, 30, 40, 3), 128, np.uint8)
    assert internvl.video_pixels(frames, s).shape == (2, 3, 448, 448)


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"preprocessor_config": {"do_sample_frames": True}}, "do_sample_frames"),
        ({"preprocessor_config": {"min_patches": 13}}, "min_patches"),
        ({"preprocessor_config": {"size": {"height": 384, "width": 384}}}, "image_size"),
        ({"processor_config": {"image_seq_length": 64}}, "image_seq_length"),
        ({"preprocessor_config": {"resample": 2}}, "bicubic"),
        ({"preprocessor_config": {"image_processor_type": "CLIPImageProcessor"}}, "GotOcr2"),
    ],
)
def test_a_folder_mmctl_cannot_reproduce_is_refused(
    tmp_path: Path, files: dict[str, dict[str, Any]], match: str
) -> None:
    with pytest.raises(InputError, match=match):
        _resolved(tmp_path, **files)


def test_video_replacement_text(tokenizer: Tokenizer) -> None:
    """Two frames: ``Frame1: <img><video>…</img>\\nFrame2: <img><video>…</img>``,
    as one string tokenized (what vLLM does) — the per-run encoding gives the same."""
    settings = dataclasses.replace(internvl.Vision(), image_seq_length=2)
    got = internvl.video_token_ids(2, tokenizer.encode, settings=settings)
    text = "\n".join(f"Frame{i}: <img><video><video></img>" for i in (1, 2))
    assert got == tokenizer.encode(text)
    assert tokenizer.decode(got) == text


@pytest.mark.parametrize(
    "bad",
    [np.zeros((4, 4), np.uint8), np.zeros((0, 4, 3), np.uint8), np.zeros((4, 4, 3), np.float32)],
)
def test_bad_images_are_refused(bad: np.ndarray) -> None:
    with pytest.raises(InputError):
        internvl.image_pixels(bad)


def test_bad_videos_are_refused(tokenizer: Tokenizer) -> None:
    with pytest.raises(InputError):
        internvl.video_pixels(np.zeros((0, 8, 8, 3), np.uint8))
    with pytest.raises(InputError):
        internvl.video_token_ids(0, tokenizer.encode)
    with pytest.raises(InputError):
        internvl.sample_indices(0)


def test_sampling_is_vllms_default_loader() -> None:
    assert internvl.sample_indices(7).tolist() == list(range(7))
    got = internvl.sample_indices(1600)
    assert len(got) == 32 and got[0] == 0 and got[-1] == 1599 and got[1] == 51
