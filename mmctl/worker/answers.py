"""The stub worker's answers, computed from what it actually received.

``colors``: the dominant colour of each temporal patch of each item, read
from the pixel tensor (normalization undone), consecutive duplicates merged —
"red, blue" for the example clip. A wrong layout, dtype or normalization
shows up as a wrong answer, which is the point.

``echo``: what arrived — modality, tensor shapes and dtypes, spans, the
transport of each tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mmctl import modality
from mmctl.preprocessing.pixels import bfloat16_bits_to_float32
from mmctl.worker.checks import ReceivedBatch

if TYPE_CHECKING:
    from mmctl.models.model import Model
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest

PALETTE = {
    "red": (255, 0, 0),
    "green": (0, 160, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "cyan": (0, 255, 255),
    "magenta": (255, 0, 255),
    "orange": (255, 140, 0),
    "purple": (128, 0, 128),
    "white": (255, 255, 255),
    "gray": (128, 128, 128),
    "black": (0, 0, 0),
}
_NAMES = list(PALETTE)
_COLOURS = np.asarray(list(PALETTE.values()), dtype=np.float32)


def as_float(pixels: np.ndarray, dtype: str) -> np.ndarray:
    """The pixel tensor's values, whatever the wire dtype."""
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(pixels)
    return pixels.astype(np.float32, copy=False)


def unnormalized(means: np.ndarray, dtype: str, model: Model) -> np.ndarray:
    """Mean RGB on the 0–255 scale: undo ``(x/255 - mean)/std`` unless raw uint8."""
    if dtype == "uint8":
        return means
    params = model.params
    mean = np.asarray(params.image_mean, np.float32) / params.rescale_factor
    std = np.asarray(params.image_std, np.float32) / params.rescale_factor
    return means * std + mean


def colour_names(means: np.ndarray) -> list[str]:
    distance = ((means[:, None, :] - _COLOURS[None, :, :]) ** 2).sum(axis=2)
    return [_NAMES[i] for i in distance.argmin(axis=1)]


def item_colours(batch: ReceivedBatch, model: Model) -> list[list[str]]:
    """For each item of the batch: the dominant colour per temporal unit (a
    temporal patch, a frame, the image), merged."""
    pixels = as_float(batch.tensors[batch.pixel_key], batch.dtypes[batch.pixel_key])
    dtype = batch.dtypes[batch.pixel_key]
    units = model.spec.contract.unit_means(batch.kind, pixels, batch.items(model), model)
    out = []
    for item in units:
        colours: list[str] = []
        for means in item:
            names = colour_names(unnormalized(np.asarray(means).reshape(-1, 3), dtype, model))
            values, counts = np.unique(names, return_counts=True)
            dominant = str(values[counts.argmax()])
            if not colours or colours[-1] != dominant:
                colours.append(dominant)
        out.append(colours)
    return out


def colours_answer(batches: list[ReceivedBatch], model: Model) -> str:
    """Items in prompt order; "red, blue" for one item, "; " between items."""
    items: list[tuple[int, list[str]]] = []
    for batch in batches:
        for (offset, _), colours in zip(
            batch.placeholders, item_colours(batch, model), strict=True
        ):
            items.append((offset, colours))
    items.sort()
    if not items:
        return "no media received"
    return "; ".join(", ".join(c) for _, c in items)


def echo_answer(req: GenerateRequest, batches: list[ReceivedBatch]) -> str:
    tokenized = req.WhichOneof("input") == "tokenized"
    parts = [f"{len(req.tokenized.input_ids)} prompt tokens" if tokenized else "text prompt"]
    for batch in batches:
        tensors = ", ".join(
            f"{key} {list(array.shape)} {batch.dtypes[key]} via {batch.transports[key]}"
            for key, array in batch.tensors.items()
        )
        spans = ", ".join(f"[{o}, {o + n})" for o, n in batch.placeholders)
        kind = modality.of(batch.kind).wire_name
        parts.append(f"{batch.label}: {kind}, spans {spans}; {tensors}")
    return "; ".join(parts)
