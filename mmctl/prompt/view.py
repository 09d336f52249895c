"""A compact, readable account of a token layout: runs instead of 100k ids.

Rows, in prompt order: decoded text runs, vision markers, pad runs collapsed
with their count, span boundaries, and inside video spans the frame each
block belongs to (its timestamp text). ``inspect-tokens`` prints them and
``--diff`` compares two layouts row by row.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import PIXEL_KINDS
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.values.items import Frames
from mmctl.values.layout import Layout, Span
from mmctl.values.tokens import Tokens


@dataclass(frozen=True)
class Row:
    at: int  # token offset
    #: text | timestamp | vision_start | vision_end | marker | pads | span_start | span_end
    kind: str
    count: int = 1  # tokens in the row (0 for span boundaries)
    text: str = ""
    item: int | None = None  # 1-based
    frame: int | None = None  # 1-based, video spans
    token: str = ""  # the token's text, for marker and pad rows

    def signature(self) -> tuple:
        """What two layouts are compared on (offsets differ whenever anything before does)."""
        return (self.kind, self.count, self.text, self.item, self.frame)

    def as_dict(self) -> dict:
        d = {"at": self.at, "kind": self.kind, "count": self.count}
        for key in ("text", "item", "frame", "token"):
            value = getattr(self, key)
            if value not in ("", None):
                d[key] = value
        return d


def media_tokens(tokens: Tokens) -> dict[int, str]:
    """The family's embedding tokens (the positions that receive features), by id →
    kind; one id for both kinds (GLM's ``<|image|>``) is named by the first."""
    out: dict[int, str] = {}
    for kind in PIXEL_KINDS:
        with contextlib.suppress(InputError):  # a kind the family does not read
            out.setdefault(tokens.embed(kind), kind.value)
    return out


def marker_tokens(tokens: Tokens) -> dict[int, str]:
    """Structural tokens, and placeholders that are not embedding tokens (Llama 4's
    ``<|image|>`` inside its expansion), by id → name."""
    out = dict(tokens.markers())
    embeds = media_tokens(tokens)
    for kind in PIXEL_KINDS:
        with contextlib.suppress(InputError):
            placeholder = tokens.placeholder(kind)
            if placeholder not in embeds:
                out.setdefault(placeholder, kind.value)
    return out


def rows(
    layout: Layout,
    token_ids: Tokens,
    tokenizer: Tokenizer,
    frames: Sequence[Frames | None] = (),
) -> list[Row]:
    """``frames``: per item, how its embedding tokens divide into frames (the
    family's ``prompt.frames``), for the video spans whose expansion has no
    markers between frames."""
    ids = layout.ids
    n = len(ids)
    pads = media_tokens(token_ids)
    markers = marker_tokens(token_ids)
    by_name = {name: i for i, name in markers.items()}
    vs, ve = by_name.get("vision_start", -1), by_name.get("vision_end", -1)
    others = [i for i, name in markers.items() if name not in ("vision_start", "vision_end")]
    starts = {int(s.offset): s for s in layout.spans}
    ends: dict[int, list[Span]] = {}
    for s in layout.spans:
        ends.setdefault(s.end, []).append(s)
    # Cut points: every change of token category, span boundary.
    category = np.zeros(n, dtype=np.int8)  # 0 text, 1 vs, 2 ve, 3 pad, 4 other marker
    category[ids == vs] = 1
    category[ids == ve] = 2
    category[np.isin(ids, list(pads))] = 3
    category[np.isin(ids, others)] = 4
    cuts: set[int] = {int(c) for c in np.flatnonzero(np.diff(category) != 0) + 1}
    single = np.flatnonzero((category == 1) | (category == 2) | (category == 4))
    cuts |= {int(c) for c in single} | {int(c) + 1 for c in single}
    cuts |= set(starts) | set(ends)
    bounds = sorted(int(c) for c in cuts if 0 < c < n)
    out: list[Row] = []
    current: Span | None = None
    frame, has_pads = 0, False  # frames count within the current video span
    embedded = 0  # embedding tokens seen so far in the current span
    # A video's timestamps lead its frames (Qwen3-VL: "<t seconds>" then the
    # block) or trail them (GLM: the block, then "t seconds"): the span says
    # which by what comes first, text or a frame's start.
    leading = True

    def next_frame() -> int:
        nonlocal frame, has_pads
        if frame == 0 or has_pads:
            frame, has_pads = frame + 1, False
        return frame

    for start, stop in zip([0, *bounds], [*bounds, n], strict=True):
        for span in ends.get(start, ()):
            out.append(Row(start, "span_end", 0, span.kind.value, span.item + 1))
            current = None if current is span else current
        if start in starts:
            current, frame, has_pads, embedded = starts[start], 0, False, 0
            inside = category[current.offset : current.end]
            first_text = np.flatnonzero(inside == 0)
            first_start = np.flatnonzero(inside == 1)
            leading = not (
                len(first_start) and (not len(first_text) or first_start[0] < first_text[0])
            )
            out.append(Row(start, "span_start", 0, current.kind.value, current.item + 1))
        if start >= stop:
            continue
        cat = int(category[start])
        in_video = current is not None and current.kind.value == "video"
        item = current.item + 1 if current else None
        count = stop - start
        token = tokenizer.id_to_token(int(ids[start])) or ""
        if cat == 1:
            frame_no = next_frame() if in_video else None
            out.append(Row(start, "vision_start", 1, "", item, frame_no, token))
        elif cat == 2:
            out.append(Row(start, "vision_end", 1, "", item, frame if in_video else None, token))
        elif cat == 4:
            out.append(Row(start, "marker", 1, markers[int(ids[start])], item, None, token))
        elif cat == 3:
            runs = frames[current.item] if current and current.item < len(frames) else None
            kind = pads[int(ids[start])]
            if in_video and runs is not None:
                out += _frame_rows(start, count, embedded, runs, kind, item, token)
                frame = min(runs.count, (embedded + count - 1) // runs.tokens + 1)
            else:
                this = (frame or next_frame()) if in_video else None
                out.append(Row(start, "pads", count, kind, item, this, token))
            has_pads = True
            embedded += count
        else:
            text = tokenizer.decode(ids[start:stop].tolist())
            if in_video:
                this = next_frame() if leading or not frame else frame
                out.append(Row(start, "timestamp", count, text, item, this))
            else:
                out.append(Row(start, "text", count, text, item))
    for span in ends.get(n, ()):
        out.append(Row(n, "span_end", 0, span.kind.value, span.item + 1))
    return out


def _frame_rows(
    at: int, count: int, before: int, runs: Frames, kind: str, item: int | None, token: str
) -> list[Row]:
    """A run of ``count`` embedding tokens starting ``before`` tokens into its
    span, cut where one frame's tokens end; tokens after the last frame are a
    row of their own (no frame)."""
    out = []
    end = before + count
    framed = runs.count * runs.tokens
    while before < end:
        if before < framed and runs.tokens > 0:
            number = before // runs.tokens
            stop = min(end, (number + 1) * runs.tokens)
            out.append(Row(at, "pads", stop - before, kind, item, number + 1, token))
        else:
            stop = end
            out.append(Row(at, "pads", stop - before, kind, item, None, token))
        at += stop - before
        before = stop
    return out


def totals(layout: Layout, token_ids: Tokens) -> dict[str, int]:
    """Token counts by category. Embedding tokens count by the span they lie in
    (GLM's video embeds at <|image|>), outside spans by their id."""
    ids = layout.ids
    pads = media_tokens(token_ids)
    is_pad = np.isin(ids, list(pads))
    kind_of = np.full(len(ids), "", dtype=object)
    for token, kind in pads.items():
        kind_of[ids == token] = kind
    for span in layout.spans:
        kind_of[span.offset : span.end] = span.kind.value
    image = int(np.count_nonzero(is_pad & (kind_of == "image")))
    video = int(np.count_nonzero(is_pad & (kind_of == "video")))
    markers = int(np.count_nonzero(np.isin(ids, list(marker_tokens(token_ids)))))
    in_spans = sum(s.length for s in layout.spans)
    return {
        "tokens": len(ids),
        "image_pads": image,
        "video_pads": video,
        "vision_markers": markers,
        "in_spans": in_spans,
        "other": len(ids) - image - video - markers,
    }


@dataclass(frozen=True)
class Difference:
    op: str  # replace | delete | insert
    a: list[Row]
    b: list[Row]


def diff(a: Sequence[Row], b: Sequence[Row]) -> list[Difference]:
    """Where two layouts' rows differ (matching on content, not offsets)."""
    matcher = difflib.SequenceMatcher(
        a=[r.signature() for r in a], b=[r.signature() for r in b], autojunk=False
    )
    return [
        Difference(op, list(a[i1:i2]), list(b[j1:j2]))
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
        if op != "equal"
    ]
