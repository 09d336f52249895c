"""The families' field tables: one declaration, and the docs' table says the same."""

from __future__ import annotations

from pathlib import Path

from mmctl.media.probe import PIXEL_KINDS, MediaKind
from mmctl.models import (
    gemma4,
    glm4v,
    inkling,
    internvl,
    llama4,
    llava,
    llava_next,
    llava_onevision,
    nemotron_h_omni,
)
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl
from mmctl.values.fields import FieldLayout, WireField

#: After the Qwen rows, each other family's batches, tagged with its name.
OTHERS = (
    llava.FAMILY,
    llava_next.FAMILY,
    llava_onevision.FAMILY,
    llama4.FAMILY,
    gemma4.FAMILY,
    internvl.FAMILY,
    inkling.FAMILY,
    nemotron_h_omni.FAMILY,
)

CONTRACTS = Path(__file__).resolve().parents[3] / "docs" / "contracts.md"


def expected_rows() -> list[str]:
    """The docs' rows, derived from the tables: what both families send, then
    what only Qwen3-VL sends, then what only Qwen2.5-VL sends."""
    rows = []
    for kind in (MediaKind.IMAGE, MediaKind.VIDEO):
        q3, q25 = qwen3_vl.FAMILY.wire.fields(kind), qwen2_vl.FAMILY.wire.fields(kind)
        tagged = [
            *((f, "") for f in q3 if f in q25),
            *((f, " (Qwen3-VL)") for f in q3 if f not in q25),
            *((f, " (Qwen2.5-VL)") for f in q25 if f not in q3),
        ]
        rows.extend(_row(f, kind, note) for f, note in tagged)
    for family in OTHERS:
        for kind in family.modalities:
            rows.extend(_row(f, kind, f" ({family.name})") for f in family.wire.fields(kind))
    return rows


def _row(f: WireField, kind: MediaKind, note: str) -> str:
    layout = {
        FieldLayout.FLAT: f"flat, split by `{f.sizes}`",
        FieldLayout.BATCHED: "batched",
        FieldLayout.SHARED: "shared by the batch's items",
    }[f.layout]
    layout += ", kept on CPU" if f.keep_on_cpu else ""
    return f"| `{f.key}` | {kind.value}{note} | {f.content} | {layout} |"


def test_docs_table_is_the_field_tables():
    text = CONTRACTS.read_text()
    table = [line for line in text.splitlines() if line.startswith("| `")]
    wire = [row for row in table if row.split("|")[2].strip().startswith(("image", "video"))]
    assert wire == expected_rows()


def test_glm_sends_the_rows_of_both_qwen_families():
    for kind in PIXEL_KINDS:
        q3, q25 = qwen3_vl.FAMILY.wire.fields(kind), qwen2_vl.FAMILY.wire.fields(kind)
        assert glm4v.FAMILY.wire.fields(kind) == tuple(f for f in q3 if f in q25)


def test_the_families_share_the_qwen_batch_and_video_adds_each_ones_timing():
    for kind in PIXEL_KINDS:
        keys3 = [f.key for f in qwen3_vl.FAMILY.wire.fields(kind)]
        keys25 = [f.key for f in qwen2_vl.FAMILY.wire.fields(kind)]
        assert keys25[:3] == keys3[:3]
    assert [f.key for f in qwen2_vl.FAMILY.wire.fields(MediaKind.VIDEO)][3:] == [
        "second_per_grid_ts"
    ]
    assert [f.key for f in qwen3_vl.FAMILY.wire.fields(MediaKind.VIDEO)][3:] == ["timestamps"]
