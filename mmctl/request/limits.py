"""Per-request media limits: ``mm_item_limits`` ("image=8,video=2") and the per-item
feature-token budget (``mm_encoder_budget``), checked before anything is shipped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mmctl.errors import InputError, UsageError

#: The modalities of smg's ``Modality`` enum that a limit can name.
MODALITIES = ("image", "video", "audio")


def parse_item_limits(label: str) -> dict[str, int]:
    """``"image=8,video=2"`` → ``{"image": 8, "video": 2}``; empty means no limits."""
    limits: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in label.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise UsageError(f"media limit {part!r} is not MODALITY=COUNT (e.g. image=8,video=2)")
        name = name.strip().lower()
        if name not in MODALITIES:
            raise UsageError(
                f"media limit {part!r}: the modality is one of {', '.join(MODALITIES)}"
            )
        limits[name] = int(value)
    return limits


def check_item_limits(kinds: Iterable[str], limits: dict[str, int], origin: str) -> None:
    counts = Counter(kinds)
    for kind, count in counts.items():
        if kind in limits and count > limits[kind]:
            raise InputError(
                f"{count} {kind} item(s) in one request, {origin} allows {limits[kind]} "
                f"(mm_item_limits {format_limits(limits)})",
                hint="send fewer items per request",
            )


def check_encoder_budget(tokens: list[tuple[str, int]], budget: int, origin: str) -> None:
    """``tokens``: (label, feature tokens) per item; ``budget`` 0 means none."""
    if budget <= 0:
        return
    for label, count in tokens:
        if count > budget:
            raise InputError(
                f"{label} carries {count} feature tokens, {origin} takes at most {budget} "
                "per item (mm_encoder_budget)",
                hint="lower --max-pixels (or --fps / --max-frames for video)",
            )


def format_limits(limits: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in limits.items())
