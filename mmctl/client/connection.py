"""How a client reaches its workers and whose files describe their model.

One value for the options every entry point shares — :class:`~mmctl.Client`,
:class:`~mmctl.AsyncClient`, ``mmctl.batch`` and ``mmctl bench`` — so each
is named, defaulted and checked once (a bad combination is a usage error
before any worker is contacted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mmctl.choices import DEFAULT_PIXEL_CACHE_MB
from mmctl.errors import UsageError
from mmctl.models.settings import VisionOverrides
from mmctl.request.pixel_cache import budget_bytes
from mmctl.values.pruning import NO_PRUNING, VideoPruning


@dataclass(frozen=True)
class Connection:
    """``headers``: gRPC metadata for every call (``{"key": "value"}`` or
    ``["key:value"]``). ``tls``: ``True`` for the system's roots, or the path
    of a PEM root certificate. ``timeout``: the default deadline of each
    ``Generate``, seconds (none by default; probing calls wait at most 10 s).
    ``model_dir`` / ``bundle``: local model files instead of the worker's
    own bundle; ``family`` forces a model family; ``vision`` changes the
    model's sampling and pixel budget for every request; ``refresh_bundle``
    fetches the worker's bundle again. ``pixel_cache_mb``: MiB of
    preprocessed media kept for later requests about the same media (LRU; 0
    turns it off; :mod:`mmctl.request.pixel_cache`). ``video_pruning``: the
    worker's ``--video-pruning-rate`` / ``--video-pruning-method`` (a
    :class:`~mmctl.values.pruning.VideoPruning`; no worker says its own), so
    each video is laid out with only the tokens it keeps."""

    headers: Mapping[str, str] | Sequence[str] | None = None
    tls: bool | str | Path | None = None
    timeout: float | None = None
    model_dir: Path | None = None
    bundle: Path | None = None
    family: str | None = None
    vision: VisionOverrides = field(default_factory=VisionOverrides)
    refresh_bundle: bool = False
    pixel_cache_mb: int = DEFAULT_PIXEL_CACHE_MB
    video_pruning: VideoPruning = NO_PRUNING

    def __post_init__(self) -> None:
        # Paths as the caller spelled them (str or Path), held as Paths.
        for name in ("model_dir", "bundle"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
        if self.vision is None:
            object.__setattr__(self, "vision", VisionOverrides())
        if self.video_pruning is None:
            object.__setattr__(self, "video_pruning", NO_PRUNING)
        if not isinstance(self.video_pruning, VideoPruning):
            raise UsageError(
                f"video_pruning takes a VideoPruning(rate, method), got {self.video_pruning!r}"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise UsageError(f"--timeout must be positive, got {self.timeout}")
        if self.model_dir is not None and self.bundle is not None:
            raise UsageError("--model-dir and --bundle are alternatives; pass one")
        if self.refresh_bundle and (self.model_dir is not None or self.bundle is not None):
            raise UsageError(
                "--refresh-bundle fetches the worker's files; it cannot apply with "
                "--model-dir or --bundle"
            )
        budget_bytes(self.pixel_cache_mb)

    @property
    def ca_cert(self) -> Path | None:
        return Path(self.tls) if isinstance(self.tls, str | Path) else None
