"""What a processor setting's value may be, and the constants the families'
settings share (written once: ``OPENAI_CLIP_MEAN`` and friends).

Each :class:`Kind` parses one raw JSON value of a model folder into a
setting's value or says, in one sentence naming the file and key, why it
cannot: the wrong type, a zero, a negative, a value so large that a
processor would hang or ask for exbibytes, a non-finite number. The bounds
are generous (published processors stay far inside them) and written here
once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mmctl.errors import InputError
from mmctl.preprocessing.tiles import Size

#: ``transformers.image_utils.OPENAI_CLIP_MEAN`` / ``OPENAI_CLIP_STD``.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: ``IMAGENET_STANDARD_MEAN`` / ``IMAGENET_STANDARD_STD``.
HALF = (0.5, 0.5, 0.5)
#: HF's ``rescale_factor`` default.
RESCALE = 1 / 255
#: ``PILImageResampling`` values.
BILINEAR, BICUBIC = 2, 3

#: The longest side, in pixels, a processor may be told to produce (a resize
#: target, a crop, a tile, a canvas, a pinpoint). A hostile folder's
#: ``crop_size: 1e9`` would otherwise ask for exbibytes; published processors
#: stay under 4,096.
MAX_SIDE = 16_384
#: Pixels a Qwen-style budget may *require* (its ``shortest_edge``, a lower
#: bound that forces upscaling): the published image maximum, 4096².
MAX_MIN_PIXELS = 16_777_216
#: Token ids travel as uint32 (``TokenizedInput.input_ids``); config.json's
#: ``vocab_size`` bounds them tighter where the folder has one.
MAX_TOKEN_ID = 2**32 - 1


class Kind:
    """Parses one raw JSON value into a setting's value, or says why it cannot."""

    def parse(self, raw: Any, where: str) -> Any:
        raise NotImplementedError


def fail(where: str, wants: str, raw: Any) -> InputError:
    shown = repr(raw)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InputError(f"{where} must be {wants}, got {shown}")


def is_int(raw: Any) -> bool:
    return isinstance(raw, int) and not isinstance(raw, bool)


def _is_number(raw: Any) -> bool:
    return isinstance(raw, int | float) and not isinstance(raw, bool)


@dataclass(frozen=True)
class Int(Kind):
    lo: int = 1
    hi: int = MAX_SIDE

    def parse(self, raw: Any, where: str) -> int:
        if not is_int(raw) or not self.lo <= raw <= self.hi:
            raise fail(where, f"an integer from {self.lo:,} to {self.hi:,}", raw)
        return int(raw)


@dataclass(frozen=True)
class Number(Kind):
    """A finite number in ``(lo, hi]`` (``lo`` excluded: zero is never a scale here)."""

    lo: float = 0.0
    hi: float = math.inf

    def parse(self, raw: Any, where: str) -> float:
        if not _is_number(raw) or not math.isfinite(raw) or not self.lo < raw <= self.hi:
            upper = "" if self.hi == math.inf else f" and at most {self.hi:g}"
            raise fail(where, f"a finite number above {self.lo:g}{upper}", raw)
        return float(raw)


@dataclass(frozen=True)
class Flag(Kind):
    """A JSON boolean; ``only``: the one value mmctl reproduces."""

    only: bool | None = None

    def parse(self, raw: Any, where: str) -> bool:
        if not isinstance(raw, bool):
            raise fail(where, "true or false", raw)
        if self.only is not None and raw is not self.only:
            raise InputError(
                f"{where} is {str(raw).lower()}; mmctl reproduces this processor only with "
                f"{str(self.only).lower()}"
            )
        return raw


@dataclass(frozen=True)
class OneOf(Kind):
    """One of a few values mmctl reproduces (a filter, a strategy, a class)."""

    values: tuple[Any, ...]
    what: str = ""

    def parse(self, raw: Any, where: str) -> Any:
        if isinstance(raw, bool) or raw not in self.values:
            allowed = ", ".join(repr(v) for v in self.values)
            raise InputError(f"{where} is {raw!r}; mmctl reproduces {self.what or allowed}")
        return raw


@dataclass(frozen=True)
class Text(Kind):
    def parse(self, raw: Any, where: str) -> str:
        if not isinstance(raw, str) or not raw:
            raise fail(where, "a non-empty string", raw)
        return raw


@dataclass(frozen=True)
class Triple(Kind):
    """Three per-channel numbers (``image_mean``/``image_std``); ``scalar``: one
    number for all three is accepted too (torchvision's normalize takes it)."""

    std: bool = False
    scalar: bool = False

    def parse(self, raw: Any, where: str) -> tuple[float, float, float]:
        values = [raw] * 3 if self.scalar and _is_number(raw) else raw
        if (
            not isinstance(values, list | tuple)
            or len(values) != 3
            or not all(_is_number(v) and math.isfinite(v) for v in values)
        ):
            raise fail(where, "3 finite numbers (one per RGB channel)", raw)
        if self.std and not all(v > 0 for v in values):
            raise fail(where, "3 positive numbers (dividing by 0 makes inf pixels)", raw)
        return float(values[0]), float(values[1]), float(values[2])


@dataclass(frozen=True)
class SizeKind(Kind):
    """``{"shortest_edge": n}`` or ``{"height": h, "width": w}``; ``square``: h == w only."""

    square: bool = False

    def parse(self, raw: Any, where: str) -> Size:
        side = Int(1, MAX_SIDE)
        if is_int(raw) and not self.square:  # get_size_dict: an int is a shortest edge
            return Size(shortest_edge=side.parse(raw, where))
        if isinstance(raw, Mapping):
            keys = {k for k, v in raw.items() if v is not None}
            if keys == {"height", "width"}:
                height = side.parse(raw["height"], f"{where}.height")
                width = side.parse(raw["width"], f"{where}.width")
                if self.square and height != width:
                    raise InputError(f"{where} must be square, got {dict(raw)!r}")
                return Size(height=height, width=width)
            if keys == {"shortest_edge"} and not self.square:
                return Size(
                    shortest_edge=side.parse(raw["shortest_edge"], f"{where}.shortest_edge")
                )
        wants = "{height, width}" if self.square else "{shortest_edge} or {height, width}"
        raise fail(where, f"an object {wants}", raw)


@dataclass(frozen=True)
class Crop(Kind):
    """A crop: one side (square) or ``{height, width}``, as ``(height, width)``."""

    def parse(self, raw: Any, where: str) -> tuple[int, int]:
        side = Int(1, MAX_SIDE)
        if is_int(raw):
            value = side.parse(raw, where)
            return value, value
        if isinstance(raw, Mapping) and "height" in raw and "width" in raw:
            return side.parse(raw["height"], f"{where}.height"), side.parse(
                raw["width"], f"{where}.width"
            )
        raise fail(where, "an integer or an object {height, width}", raw)


@dataclass(frozen=True)
class Pinpoints(Kind):
    """``image_grid_pinpoints``: [height, width] pairs of at most :data:`MAX_SIDE`."""

    most: int = 256

    def parse(self, raw: Any, where: str) -> tuple[tuple[int, int], ...]:
        side = Int(1, MAX_SIDE)
        if not isinstance(raw, list | tuple) or not 1 <= len(raw) <= self.most:
            raise fail(where, f"a list of 1 to {self.most} [height, width] pairs", raw)
        pairs = []
        for n, pair in enumerate(raw):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise fail(f"{where}[{n}]", "a [height, width] pair", pair)
            pairs.append(
                (side.parse(pair[0], f"{where}[{n}][0]"), side.parse(pair[1], f"{where}[{n}][1]"))
            )
        return tuple(pairs)


@dataclass(frozen=True)
class TokenId(Kind):
    """A token id; :meth:`Settings.resolve` checks it against config.json's ``vocab_size``."""

    def parse(self, raw: Any, where: str) -> int:
        return Int(0, MAX_TOKEN_ID).parse(raw, where)
