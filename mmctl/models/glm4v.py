"""GLM-4.1V and GLM-4.6V (``glm4v``, ``glm4v_moe``) as vLLM 0.33 processes them.

vLLM serves both with one model class (``glm4_1v.py``) and tells them apart by
the folder's *processor class*, not its model type: ``Glm4vProcessor``
(GLM-4.1V) or ``Glm46VProcessor`` (GLM-4.6V, GLM-4.6V-Flash — a ``glm4v``
config). The two differ only in video: the frame loader vLLM registers for the
video processor (:func:`loader_indices`), the processor's own resampling, and
the timestamp text (:func:`timestamp_text`). scripts/families/glm4v.md has the
whole account, with the source lines.

Pixels are Qwen2-VL's: frames resized to multiples of ``patch_size *
merge_size`` (28) within a budget that counts frames too (an image is two),
bicubic as torchvision does on uint8, patchified into ``(t, h/2, w/2, 2, 2)``
rows of ``3 * 2 * 14 * 14`` values — so a GLM item goes through the Qwen-VL
pipeline with :class:`GlmVariant`, travels in Qwen2-VL's field table and is
read back by its contract; vLLM normalizes GLM pixels on the device
(``supports_mm_device_do_normalize``), so a default worker takes raw uint8.

The prompt is GLM's own (:class:`GlmPrompt`): an image's ``<|image|>`` becomes
``t*h*w/4`` of them; a video's ``<|begin_of_video|><|video|><|end_of_video|>``
becomes one block per temporal patch (``<|begin_of_image|>``, the patch's
``<|image|>`` run, ``<|end_of_image|>``, its timestamp's tokens) between the
video markers. Only the ``<|image|>`` positions take embeddings, in both
batches, and vLLM's GLM mrope walks those runs (``iter_mm_grid_thw``): the
check is that each span holds exactly them. vLLM takes one video per prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from mmctl.checkpoint.files import ModelFiles
from mmctl.choices import LayoutKind
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds
from mmctl.models.family import Family, ModelView
from mmctl.models.qwen_vl.parts import QwenContract, QwenProcessor, QwenWire, qwen_fields
from mmctl.models.qwen_vl.settings import PATCH14_CLIP, PatchVision
from mmctl.models.settings import (
    File,
    HFClass,
    Resolved,
    Settings,
    check_vocab,
    processor_class,
    processor_dict,
    setting,
)
from mmctl.values.items import Frames, ItemFacts
from mmctl.values.layout import Layout, LayoutCheck, span_outside

IMAGE, VIDEO, CONFIG = File.IMAGE, File.VIDEO, File.CONFIG

#: ``processor_class`` -> the processing it selects: what vLLM's
#: ``Glm4vMultiModalProcessor`` branches on (``isinstance(…, Glm4vProcessor)``).
VARIANTS = {"Glm4vProcessor": "glm4v", "Glm46VProcessor": "glm46v"}
#: The video processor each processor class goes with (vLLM picks the frame
#: loader by the video processor, the timestamps by the processor).
VIDEO_PROCESSORS = {
    "Glm4vProcessor": "Glm4vVideoProcessor",
    "Glm46VProcessor": "Glm46VVideoProcessor",
}
#: transformers' AutoProcessor class for ``glm4v`` and ``glm4v_moe`` folders
#: that name none.
DEFAULT_PROCESSOR = "Glm4vProcessor"

_IMAGE = {**PATCH14_CLIP, "size": {"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 15000}}
_VIDEO = {
    **PATCH14_CLIP,
    "size": {"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 2 * 30000},
    "fps": 2,
    "max_duration": 300,
}
#: transformers 5.20.2's classes (the GLM-4.6V ones differ only in name, and in
#: the video class's ``sample_frames``).
IMAGE_CLASSES = (HFClass("Glm4vImageProcessor", _IMAGE), HFClass("Glm46VImageProcessor", _IMAGE))
VIDEO_CLASSES = (HFClass("Glm4vVideoProcessor", _VIDEO), HFClass("Glm46VVideoProcessor", _VIDEO))


@dataclass(frozen=True)
class GlmVision(PatchVision):
    """Every setting that shapes a GLM item's pixels, grid and tokens; defaults
    are GLM-4.1V-9B-Thinking's published files (tests/fixtures/families/glm4v).
    Both budgets count frames (an image is ``temporal_patch_size`` frames)."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = IMAGE_CLASSES
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = VIDEO_CLASSES
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "video_min_pixels": 12544,
        "video_max_pixels": 47040000,
        "image_min_pixels": 12544,
        "image_max_pixels": 9633792,
        "patch_size": 14,
        "image_mean": kinds.CLIP_MEAN,
        "image_std": kinds.CLIP_STD,
    }
    #: The budgets only: vLLM's GLM loaders sample with their own rates, so
    #: ``--fps`` / ``--num-frames`` would describe a worker that does not exist.
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ("video_min_pixels", "video_max_pixels")
    #: vLLM samples frames itself and tells the processor whether to sample
    #: again (``do_sample_frames``, its own metadata); ``num_frames`` and
    #: ``max_image_size`` are sampling inputs no GLM path reads.
    INERT: ClassVar[frozenset[str]] = frozenset(
        {
            "do_sample_frames",
            "return_metadata",
            "video_metadata",
            "num_frames",
            "max_image_size",
            "default_to_square",
        }
    )

    #: Resolved from the folder as transformers' AutoProcessor finds it
    #: (:func:`~mmctl.models.settings.processor_class`), in :meth:`resolve`.
    processor_class: str = DEFAULT_PROCESSOR
    video_processor_type: str = setting(
        VIDEO,
        "video_processor_type",
        VIDEO_CLASSES[0].name,
        kinds.OneOf(tuple(c.name for c in VIDEO_CLASSES)),
    )
    #: GLM-4.1V's processor resamples at ``fps`` up to ``max_duration`` seconds
    #: when vLLM's loader decoded every frame (GLM-4.6V's ignores both).
    fps: float = setting(VIDEO, "fps", 2.0, kinds.Number(0, 1000))
    max_duration: int = setting(VIDEO, "max_duration", 300, kinds.Int(1, 10**6))

    @classmethod
    def resolve(cls, files: ModelFiles, family: str) -> Resolved:
        """The base resolver's settings, with the processor class transformers'
        AutoProcessor builds for the folder; the video processor must be its."""
        resolved = super().resolve(files, family)
        raw, where = processor_class(files)
        if raw is None:
            name, origin = (
                DEFAULT_PROCESSOR,
                "transformers' class for glm4v/glm4v_moe (no file names one)",
            )
        else:
            name = kinds.OneOf(tuple(VARIANTS)).parse(raw, f"{where}: processor_class")
            origin = where
        settings = replace(resolved.settings, processor_class=name)
        named = "video_processor_type" in (processor_dict(files, "video")[0] or {})
        if not named and files.config.get("model_type") == "glm4v_moe":
            # vLLM picks the frame loader by that key, else by the model type,
            # and has none for glm4v_moe: its generic 32-frame loader would run.
            raise InputError(
                "a glm4v_moe folder whose video processor file names no "
                "video_processor_type: vLLM would load its videos with its generic loader, "
                "not GLM's",
                hint=f'add "video_processor_type": "{VIDEO_PROCESSORS[name]}" to its file',
            )
        wanted = VIDEO_PROCESSORS[name]
        if settings.video_processor_type != wanted:
            raise InputError(
                f"the processor is {name} ({origin}) but the video processor "
                f"{settings.video_processor_type} ({resolved.origins['video_processor_type']}); "
                "vLLM would sample frames with one and write timestamps with the other",
                hint=f"a {name} folder ships a {wanted}",
            )
        return replace(
            resolved, settings=settings, origins={**resolved.origins, "processor_class": origin}
        )

    @property
    def variant(self) -> str:
        """``glm4v`` (GLM-4.1V's processing) or ``glm46v`` (GLM-4.6V's)."""
        return VARIANTS[self.processor_class]


TOKEN_KEYS = (
    "image_token_id",
    "video_token_id",
    "image_start_token_id",
    "image_end_token_id",
    "video_start_token_id",
    "video_end_token_id",
)
#: The ids vLLM takes from the tokenizer rather than config.json (its prompt
#: targets and the embedding token): :func:`~mmctl.models.settings.check_vocab`.
VOCAB = {
    "image_token_id": "<|image|>",
    "video_token_id": "<|video|>",
    "video_start_token_id": "<|begin_of_video|>",
    "video_end_token_id": "<|end_of_video|>",
}


def _token(key: str, published: int) -> Any:
    return setting(CONFIG, key, published, kinds.TokenId())


@dataclass(frozen=True)
class GlmTokens(Settings):
    """GLM's special ids, mirroring config.json keys of the same names
    (GLM-4.1V's published values); a :class:`~mmctl.values.tokens.Tokens`.
    Both batches embed at ``<|image|>``: a video's frames are image runs."""

    image_token_id: int = _token("image_token_id", 151343)  # <|image|>
    video_token_id: int = _token("video_token_id", 151344)  # <|video|>
    image_start_token_id: int = _token("image_start_token_id", 151339)  # <|begin_of_image|>
    image_end_token_id: int = _token("image_end_token_id", 151340)  # <|end_of_image|>
    video_start_token_id: int = _token("video_start_token_id", 151341)  # <|begin_of_video|>
    video_end_token_id: int = _token("video_end_token_id", 151342)  # <|end_of_video|>

    def placeholder(self, kind: MediaKind) -> int:
        return self.video_token_id if kind is MediaKind.VIDEO else self.image_token_id

    def embed(self, kind: MediaKind) -> int:
        return self.image_token_id

    def markers(self) -> dict[int, str]:
        # A frame's block in a video opens and closes as Qwen's vision_start/end do.
        return {
            self.image_start_token_id: "vision_start",
            self.image_end_token_id: "vision_end",
            self.video_start_token_id: "begin_of_video",
            self.video_end_token_id: "end_of_video",
        }

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))

    def specials(self) -> frozenset[int]:
        return frozenset(vars(self).values())


def glm_tokens(
    config: Mapping[str, Any],
    vocab: Callable[[str], int | None],
    cls: type[GlmTokens] = GlmTokens,
) -> GlmTokens:
    """The family's :class:`~mmctl.models.family.TokenReader`: all six ids from
    config.json (the model types' config classes default differently, so
    none is guessed), checked against the tokenizer where vLLM reads that one;
    ``cls`` holds the published ids (a folder without config.json)."""
    if config:
        missing = [k for k in TOKEN_KEYS if k not in config]
        if missing:
            raise InputError(
                f"config.json lacks {', '.join(missing)}",
                hint="GLM checkpoints name all six; pass --family only over such a folder",
            )
    ids: GlmTokens = cls.resolve(ModelFiles(config=config), "GLM").settings
    check_vocab(ids, VOCAB, vocab)
    return ids


# ---- sizes ------------------------------------------------------------------------


def image_size(height: int, width: int, s: GlmVision) -> tuple[int, int]:
    """(h, w) an image is resized to: HF's GLM ``smart_resize`` with two frames
    (``num_frames=temporal_patch_size``), the image budget."""
    low, high = s.image_min_pixels, s.image_max_pixels
    return s.frames_size(s.temporal_patch_size, height, width, low, high)


def video_size(num_frames: int, height: int, width: int, s: GlmVision) -> tuple[int, int]:
    """(h, w) every frame of a clip of ``num_frames`` kept frames is resized to."""
    return s.frames_size(num_frames, height, width, s.video_min_pixels, s.video_max_pixels)


# ---- frame choice -----------------------------------------------------------------


@dataclass(frozen=True)
class SampledFrames:
    """What the processor works on for one clip."""

    #: Indices into the clip, in order, as the processor keeps them (the last
    #: may repeat: the even padding of a resampled list, which counts in its size).
    indices: tuple[int, ...]
    #: Whether vLLM let the processor resample (its loader decoded every frame).
    resampled: bool


def _unique(indices: Sequence[int]) -> list[int]:
    return list(dict.fromkeys(indices))


def _even(indices: list[int]) -> list[int]:
    return indices + indices[-1:] if len(indices) % 2 else indices


def _glm41v_indices(total: int, fps: float, duration: float, rate: float, max_s: int) -> list[int]:
    """``DynamicVideoBackend`` / ``Glm4vVideoProcessor.sample_frames`` (before de-dup)."""
    last = total - 1
    if duration <= max_s:
        return [min(last, math.ceil(i * fps / rate)) for i in range(math.floor(duration * rate))]
    samples = int(max_s * rate)
    if samples >= total:
        return list(range(total))
    seconds = np.linspace(0, duration, samples, endpoint=True)
    return [min(last, math.ceil(float(t) * fps)) for t in seconds]


#: GLM-4.6V's dynamic rate: (longest clip in s, frames per second).
GLM46V_RATES = ((30, 3.0), (300, 1.0), (2400, 0.5))
GLM46V_MAX_FRAMES = 640
GLM46V_MAX_DURATION = 2400
#: vLLM's GLM-4.1V loader (``opencv_dynamic``): its own rate and limit, not the processor's.
GLM41V_LOADER_FPS, GLM41V_LOADER_MAX_S = 2.0, 300
#: vLLM's GLM-4.6V loader samples for a temporal patch of 2 whatever the processor's.
GLM46V_LOADER_TPS = 2


def _glm46v_indices(total: int, fps: float, duration: float, tps: int) -> list[int]:
    """``GLM46VVideoBackend`` / ``Glm46VVideoProcessor.sample_frames``, even, de-duplicated."""
    effective = min(duration, GLM46V_MAX_DURATION)
    rate = next((r for limit, r in GLM46V_RATES if effective <= limit), GLM46V_RATES[-1][1])
    extract = min(int(effective * rate * tps), GLM46V_MAX_FRAMES)
    per_frame = 1 / fps
    max_second = int(duration)
    chosen: list[int]
    if total < extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    else:
        chosen, current, step = [], 0.0, 1 / (tps * rate)
        for index in range(total):
            if index * per_frame >= current:
                current += step
                chosen.append(index)
                if current >= max_second:
                    break
    if len(chosen) < extract:
        start, end = (chosen[0], chosen[-1]) if chosen else (0, max(total - 1, 0))
        chosen = np.linspace(start, end, extract, dtype=int).tolist()
    elif len(chosen) > extract:
        chosen = np.linspace(0, total - 1, extract, dtype=int).tolist()
    return _even(_unique(chosen))


def loader_indices(total: int, fps: float, s: GlmVision) -> list[int]:
    """The frames vLLM's GLM loader decodes, ascending, each once (its ``read_frames``
    reads a set). ``total`` and ``fps`` as the decoder reports them; vLLM's
    duration is ``total / fps``."""
    if total < 1 or fps <= 0:
        raise InputError(f"a video needs frames and a frame rate, got {total} at {fps} fps")
    duration = total / fps
    if s.variant == "glm4v":
        return sorted(
            set(_glm41v_indices(total, fps, duration, GLM41V_LOADER_FPS, GLM41V_LOADER_MAX_S))
        )
    return sorted(set(_glm46v_indices(total, fps, duration, GLM46V_LOADER_TPS)))


def sample_indices(total: int, fps: float, s: GlmVision) -> SampledFrames:
    """The frames the processor keeps.

    vLLM hands the processor the loader's frames with ``do_sample_frames`` true only
    when the loader decoded every frame; the processor then samples again with its
    own settings (``fps``, ``max_duration``, ``temporal_patch_size``). A clip under
    1 s leaves one frame, which the processor refuses (vLLM does too).
    """
    decoded = loader_indices(total, fps, s)
    resampled = len(decoded) == total
    duration = total / fps
    if not resampled:
        kept = decoded
    elif s.variant == "glm4v" and duration <= s.max_duration:
        n = max(math.floor(duration * s.fps), 1)  # HF samples at least one frame
        kept = _even(_unique([min(total - 1, math.ceil(i * fps / s.fps)) for i in range(n)]))
    elif s.variant == "glm4v":
        kept = _even(_unique(_glm41v_indices(total, fps, duration, s.fps, s.max_duration)))
    else:
        kept = _glm46v_indices(total, fps, duration, s.temporal_patch_size)
    if len(kept) < s.temporal_patch_size:
        raise InputError(
            f"vLLM keeps {len(kept)} frame(s) of this {duration:.2f} s clip and GLM needs "
            f"{s.temporal_patch_size}",
            hint="send a clip of at least 1 s, or the frame as an image",
        )
    return SampledFrames(tuple(kept), resampled)


def patch_seconds(indices: Sequence[int], fps: float) -> list[int]:
    """The whole second of each temporal patch (its first frame), as vLLM's
    ``_get_video_second_idx_*`` writes them: ``int(i / fps)`` of every second
    kept frame, the list de-duplicated and evened first."""
    return [int(i / fps) for i in _even(_unique([int(i) for i in indices]))][::2]


# ---- the prompt -------------------------------------------------------------------


@runtime_checkable
class GlmSettings(Protocol):
    """What GLM's prompt reads of a family's settings (GLM-4.1V/4.6V's, GLM-5-Next's)."""

    @property
    def variant(self) -> str:
        """``glm4v`` writes bare seconds after each frame; the others ``"3.0 seconds"``."""
        ...

    def tokens_for_grid(self, grid_thw: tuple[int, int, int]) -> int: ...


def timestamp_text(second: int, s: GlmSettings) -> str:
    """The text after each frame, tokenized on its own: ``"3"`` (GLM-4.1V) or
    ``"3.0 seconds"`` (GLM-4.6V; vLLM writes whole seconds, HF the exact time)."""
    return str(second) if s.variant == "glm4v" else f"{second:.1f} seconds"


def image_replacement(grid: tuple[int, int, int], s: GlmSettings, ids: GlmTokens) -> list[int]:
    """``t*h*w/4`` x ``<|image|>`` (every one an embedding position)."""
    return [ids.image_token_id] * s.tokens_for_grid(grid)


def video_replacement(
    grid: tuple[int, int, int],
    seconds: Sequence[int],
    encode: Callable[[str], Sequence[int]],
    s: GlmSettings,
    ids: GlmTokens,
) -> list[int]:
    """``_construct_video_placeholder``: ``<|begin_of_video|>``, then per temporal patch
    ``<|begin_of_image|>`` + ``h*w/4`` x ``<|image|>`` + ``<|end_of_image|>`` + the
    tokens of its timestamp (``encode``: the folder's tokenizer, no special tokens),
    then ``<|end_of_video|>``. Only the ``<|image|>`` ids take embeddings."""
    t, h, w = grid
    if len(seconds) != t:
        raise InputError(f"{len(seconds)} timestamps for a video of {t} temporal patches")
    per_frame = s.tokens_for_grid((1, h, w))
    out = [ids.video_start_token_id]
    for second in seconds:
        out.append(ids.image_start_token_id)
        out += [ids.image_token_id] * per_frame
        out.append(ids.image_end_token_id)
        out += encode(timestamp_text(second, s))
    out.append(ids.video_end_token_id)
    return out


def span_problem(got: Sequence[int], item: ItemFacts, s: GlmSettings, ids: GlmTokens) -> str | None:
    """What in one item's span vLLM's GLM model would not read as its item, or
    ``None``. An image is one run of ``h*w/4`` ``<|image|>`` (``iter_mm_grid_thw``
    asserts it); a video is ``<|begin_of_video|>``, ``t`` blocks of
    ``<|begin_of_image|>`` + a run of ``h*w/4`` + ``<|end_of_image|>`` + timestamp
    text, ``<|end_of_video|>`` — with any other run count vLLM silently positions
    the video as one block, which is not the model's layout."""
    t, h, w = item.grid
    per = s.tokens_for_grid((1, h, w))
    embed = ids.image_token_id
    if item.kind is MediaKind.IMAGE:
        if t != 1:
            return f"an image must have 1 temporal patch, its grid has {t}"
        if len(got) != per or any(i != embed for i in got):
            held = sum(1 for i in got if i == embed)
            return f"its span of {len(got)} tokens holds {held} <|image|>; the image needs a run of {per}"
        return None
    if len(got) < 2 or got[0] != ids.video_start_token_id or got[-1] != ids.video_end_token_id:
        return "its span is not <|begin_of_video|> … <|end_of_video|>"
    specials = ids.specials()
    pos, end = 1, len(got) - 1
    for frame in range(1, t + 1):
        if pos >= end or got[pos] != ids.image_start_token_id:
            return (
                f"temporal patch {frame} of {t} does not open with <|begin_of_image|> (token {pos})"
            )
        run = pos + 1
        while run < end and got[run] == embed:
            run += 1
        if run - pos - 1 != per:
            return f"temporal patch {frame} holds a run of {run - pos - 1} <|image|>; its grid needs {per}"
        if run >= end or got[run] != ids.image_end_token_id:
            return f"temporal patch {frame} does not close with <|end_of_image|> (token {run})"
        pos = run + 1
        while pos < end and got[pos] not in specials:  # the timestamp's text
            pos += 1
    if pos != end:
        return f"after {t} temporal patches the span holds more than a timestamp (token {pos})"
    return None


def _settings(model: ModelView) -> tuple[GlmSettings, GlmTokens]:
    s, ids = model.params, model.token_ids
    assert isinstance(s, GlmSettings) and isinstance(ids, GlmTokens), "a GLM model"
    return s, ids


def chat_format(body: str, system: str | None) -> str:
    """What GLM-4.1V's template writes for one user turn."""
    turns = ["[gMASK]<sop>"]
    if system:
        turns.append(f"<|system|>\n{system}")
    turns.append(f"<|user|>\n{body}<|assistant|>\n")
    return "".join(turns)


@dataclass(frozen=True)
class GlmPrompt:
    """vLLM's GLM prompt updates: ``<|image|>`` and
    ``<|begin_of_video|><|video|><|end_of_video|>`` replaced per item; the check
    is :func:`span_problem` on every span, and one video at most."""

    default_system: str | None = None
    #: vLLM's GLM mrope position pass walks each span's ``<|image|>`` runs.
    check_name: str = "mrope_walk"

    def knows_media(self, template: str) -> bool:
        return "<|image|>" in template

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        """What GLM's templates write: ``<|begin_of_image|><|image|><|end_of_image|>``
        (the begin/end stay outside vLLM's target) or the video triple."""
        _, ids = _settings(model)
        triple = (
            (ids.video_start_token_id, ids.video_token_id, ids.video_end_token_id)
            if kind is MediaKind.VIDEO
            else (ids.image_start_token_id, ids.image_token_id, ids.image_end_token_id)
        )
        names = [model.tokenizer.id_to_token(i) for i in triple]
        if any(n is None for n in names):
            raise InputError(
                f"the tokenizer ({model.tokenizer.label}) lacks the {kind.value} tokens of "
                f"config.json ({', '.join(map(str, triple))})"
            )
        return "".join(n for n in names if n is not None)

    def chat_format(self, body: str, system: str | None) -> str:
        return chat_format(body, system)

    def expand(
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        from mmctl.prompt.layout import replace_placeholders

        if layout is not LayoutKind.VLLM:
            raise UsageError(f"--layout {layout.value} is a Qwen3-VL video layout")
        s, tokens = _settings(model)
        videos = sum(1 for it in items if it.kind is MediaKind.VIDEO)
        if videos > 1:
            raise InputError(
                f"{videos} videos in one prompt; vLLM's GLM processing takes one",
                hint="send each video in its own request",
            )
        encode = model.tokenizer.encode_cached

        def replacement(item: ItemFacts) -> list[int]:
            if item.kind is MediaKind.IMAGE:
                return image_replacement(item.grid, s, tokens)
            seconds = [int(t) for t in item.patch_times]
            return video_replacement(item.grid, seconds, encode, s, tokens)

        target = [tokens.video_start_token_id, tokens.video_token_id, tokens.video_end_token_id]
        return replace_placeholders(ids, items, tokens, replacement, {MediaKind.VIDEO: target})

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        """A video's ``<|image|>`` runs: one per temporal patch."""
        if item.kind is not MediaKind.VIDEO:
            return None
        s, _ = _settings(model)
        t, h, w = item.grid
        return Frames(t, s.tokens_for_grid((1, h, w)))

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        s, tokens = _settings(model)
        ids = layout.ids
        videos = [n for n, it in enumerate(items) if it.kind is MediaKind.VIDEO]
        if len(videos) > 1:
            return LayoutCheck(
                False, f"{len(videos)} videos in one prompt; vLLM's GLM takes one", videos[1] + 1
            )
        frames = 0
        for span, item in zip(layout.spans, items, strict=True):
            n = span.item + 1
            outside = span_outside(span, len(ids))
            if outside is not None:
                return outside
            problem = span_problem(ids[span.offset : span.end].tolist(), item, s, tokens)
            if problem is not None:
                return LayoutCheck(False, f"item {n}: {problem}", n, frames_checked=frames)
            frames += item.grid[0]
        return LayoutCheck(True, frames_checked=frames)


@dataclass(frozen=True)
class GlmVariant:
    """What the Qwen-VL pipeline reads of GLM (a
    :class:`~mmctl.models.qwen_vl.variant.PatchVariant` of :class:`GlmVision`)."""

    name: str = "glm4v"

    def sample_indices(self, total_frames: int, source_fps: float, vision: GlmVision) -> np.ndarray:
        return np.asarray(sample_indices(total_frames, source_fps, vision).indices, dtype=np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: GlmVision
    ) -> list[float]:
        """The whole seconds the prompt writes, one per temporal patch."""
        return [float(s) for s in patch_seconds(indices.tolist(), source_fps)]

    def video_size(
        self, num_frames: int, height: int, width: int, vision: GlmVision
    ) -> tuple[int, int]:
        return video_size(num_frames, height, width, vision)

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: GlmVision,
    ) -> tuple[int, int]:  # fmt: skip
        return canvas  # resized to fill it

    def image_size(self, height: int, width: int, vision: GlmVision) -> tuple[int, int]:
        return image_size(height, width, vision)

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: GlmVision
    ) -> dict[str, np.ndarray]:
        return {}


VARIANT = GlmVariant()
#: vLLM's ``_create_qwen2vl_field_factory``: Qwen2-VL's table as it is.
WIRE = QwenWire({kind: qwen_fields(kind) for kind in (MediaKind.IMAGE, MediaKind.VIDEO)})
FAMILY = Family(
    name=VARIANT.name,
    aliases=("glm4v-moe", "glm-4.1v"),
    model_types=("glm4v", "glm4v_moe"),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=GlmVision,
    tokens=glm_tokens,
    processor=QwenProcessor(VARIANT),
    prompt=GlmPrompt(),
    wire=WIRE,
    contract=QwenContract(WIRE),
)
