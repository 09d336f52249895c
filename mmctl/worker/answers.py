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

from mmctl.media.probe import MediaKind
from mmctl.models.base import VisionParams
from mmctl.preprocessing.pixels import bfloat16_bits_to_float32
from mmctl.worker.checks import ReceivedBatch

if TYPE_CHECKING:
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


def patch_means(pixels: np.ndarray, dtype: str, params: VisionParams) -> np.ndarray:
    """Per-row mean RGB on the 0–255 scale, whatever the wire dtype."""
    rows = pixels.shape[0]
    if dtype == "bfloat16":
        values = bfloat16_bits_to_float32(pixels)
    else:
        values = pixels.astype(np.float32, copy=False)
    means = values.reshape(rows, 3, -1).mean(axis=2)
    if dtype != "uint8":  # undo (x/255 - mean)/std
        mean = np.asarray(params.image_mean, np.float32) / params.rescale_factor
        std = np.asarray(params.image_std, np.float32) / params.rescale_factor
        means = means * std + mean
    return means


def colour_names(means: np.ndarray) -> list[str]:
    distance = ((means[:, None, :] - _COLOURS[None, :, :]) ** 2).sum(axis=2)
    return [_NAMES[i] for i in distance.argmin(axis=1)]


def item_colours(batch: ReceivedBatch, params: VisionParams) -> list[list[str]]:
    """For each item of the batch: the dominant colour per temporal patch, merged."""
    pixels = batch.tensors[batch.pixel_key]
    dtype = batch.dtypes[batch.pixel_key]
    out = []
    start = 0
    for t, h, w in batch.grids():
        per_t = h * w
        colours: list[str] = []
        for i in range(t):
            rows = pixels[start + i * per_t : start + (i + 1) * per_t]
            names = colour_names(patch_means(rows, dtype, params))
            values, counts = np.unique(names, return_counts=True)
            dominant = str(values[counts.argmax()])
            if not colours or colours[-1] != dominant:
                colours.append(dominant)
        out.append(colours)
        start += t * per_t
    return out


def colours_answer(batches: list[ReceivedBatch], params: VisionParams) -> str:
    """Items in prompt order; "red, blue" for one item, "; " between items."""
    items: list[tuple[int, list[str]]] = []
    for batch in batches:
        for (offset, _), colours in zip(
            batch.placeholders, item_colours(batch, params), strict=True
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
        kind = "VIDEO" if batch.kind is MediaKind.VIDEO else "IMAGE"
        parts.append(f"{batch.label}: {kind}, spans {spans}; {tensors}")
    return "; ".join(parts)
