"""Model loading from the shared command-line options (one place for all commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def overrides(
    *,
    fps: float | None = None,
    num_frames: int | None = None,
    min_frames: int | None = None,
    max_frames: int | None = None,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> dict[str, Any]:
    """The sampling/budget flags as VisionParams overrides (``None`` = keep)."""
    return dict(
        fps=fps,
        num_frames=num_frames,
        min_frames=min_frames,
        max_frames=max_frames,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
    )


def load_from_options(
    *,
    model_dir: Path | None,
    bundle: Path | None,
    family: str | None,
    params: dict[str, Any],
):
    """The model ``--model-dir`` / ``--bundle`` name, else the built-in Qwen3-VL files."""
    from mmctl.models.model import load_model

    return load_model(model_dir=model_dir, bundle=bundle, family=family, overrides=params)


def pixel_format(name: str | None, default: str = "float32"):
    """``--pixel-dtype`` as a PixelFormat, with a usage error naming the choices."""
    from mmctl.errors import UsageError
    from mmctl.preprocess.pixels import PixelFormat

    try:
        return PixelFormat(name or default)
    except ValueError:
        choices = ", ".join(f.value for f in PixelFormat)
        raise UsageError(f"--pixel-dtype must be one of {choices}; got {name!r}") from None


def sampling(
    *,
    max_tokens: int,
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    seed: int | None,
    stop: list[str] | None,
):
    from mmctl.errors import UsageError
    from mmctl.request.build import Sampling

    if max_tokens < 1:
        raise UsageError(f"--max-tokens must be at least 1, got {max_tokens}")
    return Sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        stop=tuple(stop or ()),
    )
