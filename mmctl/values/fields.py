"""A modality batch's tensors, declared once per family (the field table).

The counterpart of vLLM's per-model ``_get_mm_fields_config``: for each
modality, which tensors a batch carries, whether each is *flat* (the rows
of all items together, split per item by a sizes tensor), *batched* (one
row per item) or *shared* (one value for the batch), its dtype and per-item shape, and whether it stays on the
CPU. One table per family drives the request builder
(:func:`mmctl.request.build.make_batches`), the stub worker's checks
(:mod:`mmctl.worker.checks`) and the table in docs/contracts.md (a test keeps them equal).

The servicer turns the key lists into vLLM field configs, renames
``pixel_values`` to ``pixel_values_videos`` for VIDEO batches, and splits
flat tensors with ``batch[sizes].flatten()`` — which is why a per-item sizes
tensor travels rather than the grid itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: ``WireField.value``: the negotiated pixel tensor.
PIXELS = "pixels"
#: ``WireField.value``: the item's ``(t, h, w)`` patch grid.
GRID = "grid"
#: ``WireField.value``: the item's pixel rows, ``t·h·w``.
ROWS = "rows"
#: ``WireField.value``: the batch's embedding token id (its ``im_token_id``).
EMBED = "embed"


class FieldLayout(StrEnum):
    FLAT = "flat"  # all items' rows together, split by the sizes tensor
    BATCHED = "batched"  # one row per item
    #: One value for the whole batch, in no key list: the servicer makes every
    #: other tensor ``MultiModalFieldConfig.shared`` (InternVL's token ids).
    SHARED = "shared"


@dataclass(frozen=True)
class WireField:
    """One tensor of a modality batch."""

    key: str
    layout: FieldLayout
    #: What fills it per item: :data:`PIXELS`, :data:`GRID`, :data:`ROWS`,
    #: :data:`EMBED` (SHARED: once, shape ``[1]``), or a key of
    #: ``Family.video_tensors`` (values the family computes).
    value: str
    #: Wire dtype name; :data:`PIXELS` is negotiated (``--pixel-dtype``).
    dtype: str
    #: Shape after the first (item or row) dimension; "P" is the patch
    #: features, "t" the item's temporal patches (its grid's t).
    item_shape: tuple[int | str, ...]
    content: str  # for people: docs/contracts.md's table
    sizes: str | None = None  # FLAT: the tensor whose values split it per item
    keep_on_cpu: bool = False
    #: Left out of a batch whose items' rows differ in length (a dense tensor
    #: cannot hold them); the model must then do without it.
    optional: bool = False


def by_value(fields: tuple[WireField, ...], value: str) -> WireField:
    return next(f for f in fields if f.value == value)
