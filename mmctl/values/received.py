"""What a worker receives, read back: the sentence for a batch that breaks a
family's contract, and the rows of a batched tensor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mmctl.media.probe import MediaKind


@dataclass(frozen=True)
class Received:
    """One received modality batch as a family's contract reads it: its tensors
    by worker-side names (``pixel_values_videos`` for video), how many items its
    placeholders say it holds, and whether its pixels are raw uint8."""

    kind: MediaKind
    tensors: Mapping[str, np.ndarray]
    count: int
    raw: bool = False


class ContractError(ValueError):
    """A received batch breaks the family's contract (the stub turns it into a refusal).

    ``key``: the tensor the sentence is about (it then reads "<key> <message>");
    without one the sentence is about the batch ("carries no … tensor").
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message, self.key = message, key

    def about(self, label: str, kind: MediaKind) -> str:
        """The sentence, for the batch ``label`` of ``kind``."""
        if self.key is not None:
            return f"{label}.{self.key} {self.message}"
        return f"{label} ({kind.value}) {self.message}"


def table_rows(
    tensors: Mapping[str, np.ndarray], key: str, count: int, width: int
) -> list[tuple[int, ...]]:
    """A batched int tensor's rows, checked to be ``[count, width]``."""
    if key not in tensors:
        raise ContractError(f"carries no {key} tensor")
    array = np.asarray(tensors[key])
    if list(array.shape) != [count, width]:
        raise ContractError(
            f"has shape {list(array.shape)}; {count} placeholder(s) need [{count}, {width}]", key
        )
    return [tuple(int(v) for v in row) for row in array.reshape(count, width).tolist()]
