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
SETTINGS = gemma4.Gemma4Vision()
IDS = gemma4.Gemma4Tokens()


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
    """The published folder resolves to the declared defaults, without a warning."""
    from mmctl.models.model import load_model

    model = load_model(model_dir=FOLDER)
    assert model.spec.name == "gemma4" and model.warnings == ()
    assert model.params == SETTINGS and model.token_ids == IDS
    processor = json.loads((FOLDER / "processor_config.json").read_text())["image_processor"]
    config = json.loads((FOLDER / "config.json").read_text())
    assert SETTINGS.patch_size == processor["patch_size"] == config["vision_config"]["patch_size"]
    assert SETTINGS.max_soft_tokens == processor["max_soft_tokens"]
    assert SETTINGS.default_output_length == config["vision_config"]["default_output_length"]
    for key in ("image_token_id", "video_token_id", "boi_token_id", "eoi_token_id"):
        assert getattr(IDS, key) == config[key]


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_golden(golden: Path, encode) -> None:
    z = _record(golden)
    names = [str(n) for n in z["media"]]
    replacements: dict[int, list[list[int]]] = {
        IDS.image_token_id: [],
        IDS.video_token_id: [],
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
            count = gemma4.soft_tokens(*image.shape[:2], SETTINGS, SETTINGS.default_output_length)
            assert count == item.soft_tokens  # prompt = encoder
            replacements[IDS.image_token_id].append(gemma4.image_token_ids(count, IDS))

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
        ids = gemma4.video_token_ids(seconds, per_frame, IDS, encode)
        replacements[IDS.video_token_id].append(ids)
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
    ids = gemma4.video_token_ids(seconds, [count, count], IDS, encode)
    first = encode("00:00 ")
    later = encode(" 00:00 ")
    assert ids[: len(first)] == first
    body = [IDS.boi_token_id, *[IDS.video_token_id] * count, IDS.eoi_token_id]
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
    slow = gemma4.Gemma4Vision(sample_fps=1.0)
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
    unresized = gemma4.Gemma4Vision(do_resize=False)
    with pytest.raises(InputError):
        gemma4.image_pixels(np.zeros((20, 32, 3), np.uint8), unresized)
    assert gemma4.image_pixels(np.zeros((48, 32, 3), np.uint8), unresized).soft_tokens == 0


# ---- the family on the seam: its folder's settings, prompt and the worker's reading ----


def _folder(tmp_path: Path, **files: dict) -> Path:
    """A copy of the published folder with keys of files changed (``a.b`` a nested
    key; ``None`` removes it)."""
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    for stem, changes in files.items():
        path = folder / f"{stem}.json"
        data = json.loads(path.read_text())
        for dotted, value in changes.items():
            *parents, last = dotted.split(".")
            node = data
            for part in parents:
                node = node[part]
            if value is None:
                node.pop(last, None)
            else:
                node[last] = value
        path.write_text(json.dumps(data))
    return folder


def _load(folder: Path):
    from mmctl.models.model import load_model

    return load_model(model_dir=folder)


@pytest.fixture(scope="module")
def model():
    return _load(FOLDER)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        # vLLM counts by config.json and encodes by the image processor: one budget.
        ({"processor_config": {"image_processor.max_soft_tokens": 560}}, "default_output_length"),
        ({"config": {"vision_config.patch_size": 14}}, "patch_size is 16 but config.json"),
        ({"config": {"vision_config.default_output_length": None}}, "default_output_length"),
        ({"processor_config": {"image_processor.max_soft_tokens": 300}}, "70, 140, 280"),
        ({"processor_config": {"image_processor.resample": 2}}, "bicubic"),
        ({"processor_config": {"image_processor.image_processor_type": "SiglipImageProcessor"}}, "reproduces"),
        ({"config": {"image_token_id": 258884}}, r"image_token_id is 258884 but the tokenizer has <\|image\|> at 258880"),
        ({"processor_config": {"image_processor.patch_size": 64, "image_processor.pooling_kernel_size": 16},
          "config": {"vision_config.patch_size": 64, "vision_config.pooling_kernel_size": 16}}, "pixels per image"),
    ],
)  # fmt: skip
def test_a_folder_vllm_cannot_serve_as_published_is_refused(tmp_path, changes, match):
    with pytest.raises(InputError, match=match) as refused:
        _load(_folder(tmp_path, **changes))
    assert "\n" not in refused.value.message


def test_both_budgets_changed_together_are_a_server_with_another_budget(tmp_path):
    folder = _folder(
        tmp_path,
        processor_config={"image_processor.max_soft_tokens": 560},
        config={"vision_config.default_output_length": 560},
    )
    s = _load(folder).params
    item = gemma4.image_item(np.zeros((61, 97, 3), np.uint8), s)
    assert item.pixels.shape == (560 * 9, 768) and item.resized == (864, 1392)
    assert item.tokens == 18 * 29  # blocks of 48 px


def test_the_video_processor_section_is_not_read(tmp_path):
    """vLLM sends frames through the image processor: nothing in the video one changes them."""
    folder = _folder(
        tmp_path,
        processor_config={"video_processor.max_soft_tokens": 280, "video_processor.num_frames": 8},
    )
    loaded = _load(folder)
    assert loaded.params == SETTINGS and loaded.warnings == ()


def test_an_unknown_image_processor_key_is_warned_and_inert_ones_are_not(tmp_path):
    folder = _folder(
        tmp_path,
        processor_config={
            "image_processor.do_sharpen": True,
            "image_processor.size": {"height": 9},
        },
    )
    warnings = _load(folder).warnings
    assert len(warnings) == 1 and "'do_sharpen'" in warnings[0]


def test_resize_off_is_refused_per_item_where_vllm_counts_otherwise(tmp_path):
    s = _load(_folder(tmp_path, processor_config={"image_processor.do_resize": False})).params
    with pytest.raises(InputError, match=r"vLLM counts 256 soft tokens .* encoder yields 9"):
        gemma4.image_item(np.zeros((144, 144, 3), np.uint8), s)  # 9 x 9 patches, not resized


def test_frames_and_rate_are_the_loaders_and_can_be_overridden(model):
    from mmctl.models.settings import VisionOverrides

    assert model.params.num_frames == 32 and model.params.sample_fps == -1.0
    changed = model.with_vision(VisionOverrides(num_frames=8, fps=1.0)).params
    assert (changed.num_frames, changed.sample_fps) == (8, 1.0)
    assert gemma4.sample_indices(100, 10.0, changed).tolist() == [0, 14, 28, 42, 56, 70, 84, 99]
    assert len(gemma4.sample_indices(100, 4.0, changed)) == 8  # 25 s: the count wins
    assert gemma4.sample_indices(100, 40.0, changed).tolist() == [0, 99]  # 2.5 s at 1 fps


def _expanded(model, kinds: list, stamps: tuple[float, ...] = (0.0, 0.5)):
    from mmctl.choices import LayoutKind
    from mmctl.media.probe import MediaKind
    from mmctl.values.items import ItemFacts

    body = "".join(model.spec.prompt.placeholder_text(k, model) for k in kinds) + "Hi."
    ids = model.tokenizer.encode(model.spec.prompt.chat_format(body, None))
    items = [
        ItemFacts(MediaKind.IMAGE, 12)
        if k is MediaKind.IMAGE
        else ItemFacts(k, 20, patch_times=stamps, extra={"frames": 2, "frame_tokens": (10, 10)})
        for k in kinds
    ]
    return model.spec.prompt.expand(ids, items, model, LayoutKind.VLLM), items


def test_the_check_reads_spans_as_vllms_gemma4_lays_them_out(model):
    from mmctl.media.probe import MediaKind
    from mmctl.values.layout import Layout

    layout, items = _expanded(model, [MediaKind.IMAGE, MediaKind.VIDEO])
    check = model.spec.prompt.check
    assert check(layout, items, model).ok
    image, video = layout.spans
    assert layout.ids[image.offset] == IDS.boi_token_id and image.length == 14
    read_back = [items[0], type(items[1])(MediaKind.VIDEO, 20, extra=dict(items[1].extra))]
    assert check(layout, read_back, model).ok  # no times: a time in vLLM's form
    first = video.offset
    padded = layout.ids.copy()
    padded[first] = 0  # "<pad>0:00 " is no time
    result = check(Layout(layout.kind, padded, layout.spans), read_back, model)
    assert not result.ok and "frame 1 of 2 is led by '<pad>0:00 '" in result.reason
    broken = {
        "a run one short": (first + 8, 0, "frame 1 of 2 holds a run of"),
        "another time": (first + 3, IDS.boi_token_id - 1, "is not led by its time '00:00'"),
        "no <image|>": (video.end - 1, 0, "frame 2 of 2 does not close"),
        "an image token": (image.offset + 3, IDS.video_token_id, "holds 11 <|image|>"),
    }
    for name, (at, value, reason) in broken.items():
        ids = layout.ids.copy()
        ids[at] = value
        result = check(Layout(layout.kind, ids, layout.spans), items, model)
        assert not result.ok and reason in result.reason, (name, result.reason)


def test_a_video_without_frame_times_cannot_be_expanded(model):
    from mmctl.media.probe import MediaKind

    with pytest.raises(InputError, match="frame times"):
        _expanded(model, [MediaKind.VIDEO], stamps=())


def test_the_builtin_chat_format_is_the_templates(model):
    from mmctl.media.probe import MediaKind
    from mmctl.prompt.chat import render

    parts: list = [MediaKind.IMAGE, MediaKind.VIDEO, "Describe what you see."]
    rendered = render(parts, model.tokenizer, model.source, model.chat, system=None)
    assert rendered.how.startswith("chat template")
    body = "".join(p if isinstance(p, str) else model.chat.placeholder_text(p) for p in parts)
    assert gemma4.chat_format(body, None) == rendered.text


def test_the_worker_counts_tokens_from_positions_as_vllms_pooler(model):
    from mmctl.values.received import ContractError

    image = gemma4.image_pixels(np.zeros((61, 97, 3), np.uint8), SETTINGS)
    assert gemma4.pooled_tokens(image.pixel_position_ids, SETTINGS) == image.soft_tokens == 273
    frame = gemma4.image_pixels(np.zeros((64, 96, 3), np.uint8), SETTINGS, 70)
    assert gemma4.pooled_tokens(frame.pixel_position_ids, SETTINGS) == frame.soft_tokens == 60
    with pytest.raises(ContractError, match="pooling cells"):
        gemma4.pooled_tokens(image.pixel_position_ids[:-1], SETTINGS)
    far = image.pixel_position_ids.copy()
    far[0] = (10240, 0)
    with pytest.raises(ContractError, match="outside -1"):
        gemma4.pooled_tokens(far, SETTINGS)
    wide = image.pixel_position_ids.copy()
    wide[0] = (0, 600)  # a cell past the pooler's 280
    with pytest.raises(ContractError, match="pooling cell"):
        gemma4.pooled_tokens(wide, SETTINGS)
