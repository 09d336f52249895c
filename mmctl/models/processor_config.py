"""A model folder's vision settings, resolved exactly as transformers resolves them.

A worker builds its image and video processors with ``from_pretrained`` on the
model folder; mmctl must arrive at the same numbers or its grids differ from
the worker's. What transformers (5.20 as vLLM 0.33 pins it, and 5.24 alike;
``tests/fixtures/hf_config``) does:

* **which file**: the image processor reads ``processor_config.json``'s nested
  ``"image_processor"`` if there is one, else ``preprocessor_config.json``; the
  video processor reads the nested ``"video_processor"``, else
  ``video_preprocessor_config.json``, else — the common case for Qwen2.5-VL
  checkpoints — the *image* file ``preprocessor_config.json``. No file: HF
  cannot build the processor.
* **which keys**: the class's own defaults for every key the file leaves out
  (or sets to null); unknown keys are ignored.
* **the budget**: ``size`` {shortest_edge, longest_edge}, replaced key by key
  by ``min_pixels`` / ``max_pixels`` in the classes that read them
  (``Qwen2VLImageProcessor``, ``Qwen2VLVideoProcessor``; not
  ``Qwen3VLVideoProcessor``). A ``size`` without both edges is accepted when
  loading and refused when processing; mmctl refuses it at once.

Where there is no file at all mmctl uses the published checkpoint's values
(the family's ``params``) and says so. The class facts live in
:data:`QWEN2VL_IMAGE`, :data:`QWEN2VL_VIDEO`, :data:`QWEN3VL_VIDEO`; which
classes a family uses lives in its module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mmctl.errors import InputError, UsageError
from mmctl.models.files import PREPROCESSOR, PROCESSOR, VIDEO_PREPROCESSOR

if TYPE_CHECKING:
    from mmctl.models.base import ModelFiles, VisionParams
    from mmctl.models.qwen import QwenFamily

#: OPENAI_CLIP_MEAN / OPENAI_CLIP_STD and IMAGENET_STANDARD_* in transformers.image_utils.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)


#: Settings both processors have; mmctl models one value for both.
SHARED = (
    "patch_size",
    "temporal_patch_size",
    "merge_size",
    "image_mean",
    "image_std",
    "rescale_factor",
)
#: Settings only the video processor has.
VIDEO_ONLY = ("fps", "min_frames", "max_frames")


@dataclass(frozen=True)
class ProcessorClass:
    """The defaults of one HF processor class (its class attributes)."""

    name: str
    min_pixels: int  # size["shortest_edge"]
    max_pixels: int  # size["longest_edge"]
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]
    #: Whether top-level ``min_pixels`` / ``max_pixels`` replace ``size``'s edges.
    reads_min_max_pixels: bool
    rescale_factor: float = 1 / 255
    fps: float | None = None  # None: the class samples no frames by itself
    min_frames: int = 4
    max_frames: int = 768


QWEN2VL_IMAGE = ProcessorClass(
    "Qwen2VLImageProcessor", 56 * 56, 28 * 28 * 1280, 14, 2, 2, CLIP_MEAN, CLIP_STD, True
)
QWEN2VL_VIDEO = ProcessorClass(
    "Qwen2VLVideoProcessor", 128 * 28 * 28, 28 * 28 * 768, 14, 2, 2, CLIP_MEAN, CLIP_STD, True
)
QWEN3VL_VIDEO = ProcessorClass(
    "Qwen3VLVideoProcessor", 128 * 32 * 32, 32 * 32 * 768, 16, 2, 2, HALF, HALF, False, fps=2.0
)


@dataclass(frozen=True)
class Resolved:
    """One processor's settings and, per setting, where its value came from."""

    values: dict[str, Any]
    origin: dict[str, str]


def processor_dict(files: ModelFiles, kind: str) -> tuple[Mapping[str, Any] | None, str]:
    """The dict transformers builds the ``kind`` ("image"/"video") processor from, and its file."""
    nested = files.processor_config.get(f"{kind}_processor")
    if isinstance(nested, Mapping):
        return nested, f'{PROCESSOR} "{kind}_processor"'
    if kind == "video" and files.video_preprocessor_config:
        return files.video_preprocessor_config, VIDEO_PREPROCESSOR
    if files.preprocessor_config:
        return files.preprocessor_config, PREPROCESSOR
    return None, ""


def resolve_processor(
    raw: Mapping[str, Any], where: str, cls: ProcessorClass, video: bool
) -> Resolved:
    """``cls(**raw)`` as transformers builds it: file values over class defaults."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    default = f"{cls.name} default"

    def take(key: str, value: Any, from_file: bool) -> None:
        values[key], origin[key] = value, where if from_file else default

    for key in SHARED + (VIDEO_ONLY if video else ()):
        found = raw.get(key)
        if found is None:
            take(key, getattr(cls, key), False)
        else:
            take(key, _checked(key, found, where), True)
    size = raw.get("size")
    if size is not None and not isinstance(size, Mapping):
        raise InputError(f"{where}: size must be an object, got {size!r}")
    if size is None:
        take("min_pixels", cls.min_pixels, False)
        take("max_pixels", cls.max_pixels, False)
    else:
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            if size.get(edge) is not None:
                take(key, _checked(edge, size[edge], where), True)
    if cls.reads_min_max_pixels:
        for key in ("min_pixels", "max_pixels"):
            if raw.get(key) is not None:
                take(key, _checked(key, raw[key], where), True)
    missing = [
        edge
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge"))
        if key not in values
    ]
    if missing:
        raise InputError(
            f"{where}: size lacks {' and '.join(missing)} (got {dict(size or {})}); "
            f"transformers' {cls.name} refuses to process with it too",
            hint="give size both shortest_edge and longest_edge (pixels)",
        )
    return Resolved(values, origin)


def _checked(key: str, value: Any, where: str) -> Any:
    if key in ("image_mean", "image_std"):
        if (
            isinstance(value, list | tuple)
            and len(value) == 3
            and all(_is_number(v) for v in value)
        ):
            return tuple(float(v) for v in value)
        raise InputError(f"{where}: {key} must be 3 numbers, got {value!r}")
    if key in ("fps", "rescale_factor"):
        if _is_number(value):
            return float(value)
        raise InputError(f"{where}: {key} must be a number, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InputError(f"{where}: {key} must be an integer, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def resolve_params(spec: QwenFamily, files: ModelFiles) -> tuple[VisionParams, dict[str, str]]:
    """The family's parameters as a worker serving ``files`` has them, and where
    each came from (keys as in :func:`settings`)."""
    published = f"published {spec.name} checkpoint (no processor config)"
    video_raw, video_where = processor_dict(files, "video")
    if video_raw is None:
        return spec.params, dict.fromkeys(settings(spec.params), published)
    video = resolve_processor(video_raw, video_where, spec.video_processor, video=True)
    image_raw, image_where = processor_dict(files, "image")
    image = (
        resolve_processor(image_raw, image_where, spec.image_processor, video=False)
        if image_raw is not None
        else None
    )
    if image is not None:
        for key in SHARED:
            if image.values[key] != video.values[key]:
                raise InputError(
                    f"the image processor ({image.origin[key]}) and the video processor "
                    f"({video.origin[key]}) disagree on {key}: {image.values[key]} vs "
                    f"{video.values[key]}",
                    hint="mmctl keeps one value for both; fix the model's processor configs",
                )
    changes = {
        key: video.values[key] for key in SHARED + VIDEO_ONLY if video.values[key] is not None
    }
    origin = {key: video.origin[key] for key in changes}
    if video.values["fps"] is None:
        origin["fps"] = f"mmctl default ({spec.video_processor.name} samples no frames itself)"
    changes["min_pixels"], changes["max_pixels"] = (
        video.values["min_pixels"],
        video.values["max_pixels"],
    )
    origin["video_min_pixels"], origin["video_max_pixels"] = (
        video.origin["min_pixels"],
        video.origin["max_pixels"],
    )
    if image is not None:
        changes["image_min_pixels"] = image.values["min_pixels"]
        changes["image_max_pixels"] = image.values["max_pixels"]
        origin["image_min_pixels"] = image.origin["min_pixels"]
        origin["image_max_pixels"] = image.origin["max_pixels"]
    else:
        origin["image_min_pixels"] = origin["image_max_pixels"] = published
    try:
        params = spec.params.with_overrides(**changes)
    except UsageError as err:
        raise InputError(f"model processor config: {err.message}") from None
    return params, {key: origin.get(key, "not set") for key in settings(params)}


def settings(params: VisionParams) -> dict[str, Any]:
    """The resolved settings by name (what ``preprocess --json`` and ``info`` show)."""
    return {
        "video_min_pixels": params.video_budget.min_pixels,
        "video_max_pixels": params.video_budget.max_pixels,
        "image_min_pixels": params.image_budget.min_pixels,
        "image_max_pixels": params.image_budget.max_pixels,
        "patch_size": params.patch_size,
        "temporal_patch_size": params.temporal_patch_size,
        "merge_size": params.merge_size,
        "image_mean": list(params.image_mean),
        "image_std": list(params.image_std),
        "rescale_factor": params.rescale_factor,
        "fps": params.fps,
        "min_frames": params.min_frames,
        "max_frames": params.max_frames,
        "num_frames": params.num_frames,
    }
