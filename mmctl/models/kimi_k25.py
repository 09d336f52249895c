"""Kimi-K2.5 images as vLLM 0.33 processes them: pure functions (no family wiring yet).

vLLM runs its own ``KimiK25FusedVisionProcessor``
(``vllm/transformers_utils/processors/kimi_k25_vision_fused.py``; numba is a vLLM
requirement, so it is always the one), not transformers' ``Kimi_K25ImageProcessor``
(torchvision resize): Pillow's bicubic resize to the NaViT size, zero padding (before
normalization) to a multiple of ``patch_size * merge_kernel_size``, patches of
``[3, patch, patch]`` in row-major order, and a per-value float32 table for
``(v / 255 - mean) / std``. A worker that normalizes on the device (vLLM 0.33's default for
Kimi) takes the uint8 patches. The placeholder ``<|media_pad|>`` becomes that many pads
(``KimiK25MultiModalProcessor._get_prompt_updates``), all of them embedding positions.
``scripts/families/kimi_k25.md`` has the facts; ``scripts/families/check_unseen.py --family kimi_k25 --loaders N`` compares these
functions with vLLM's processor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import dimensions

_CHANNELS = 3


@dataclass(frozen=True)
class KimiK25Settings:
    """``preprocessor_config.json`` ``media_proc_cfg`` of ``moonshotai/Kimi-K2.5``."""

    patch_size: int = 14  # media_proc_cfg.patch_size
    merge_kernel_size: int = 2  # media_proc_cfg.merge_kernel_size (an int or [k, k])
    in_patch_limit: int = 16384  # media_proc_cfg.in_patch_limit: patches before merging
    patch_limit_on_one_side: int = 512  # media_proc_cfg.patch_limit_on_one_side
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)  # media_proc_cfg.image_mean
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)  # media_proc_cfg.image_std
    fixed_output_tokens: int | None = None  # media_proc_cfg.fixed_output_tokens
    media_pad_id: int = 163605  # config.json media_placeholder_token_id (<|media_pad|>)


@dataclass(frozen=True)
class KimiResize:
    """``navit_resize_image``'s answer for one image."""

    new_height: int
    new_width: int
    padded_height: int
    padded_width: int
    num_tokens: int

    def grid_thw(self, settings: KimiK25Settings) -> tuple[int, int, int]:
        """``grid_thws`` row: one frame, patches down and across the padded image."""
        patch = settings.patch_size
        return 1, self.padded_height // patch, self.padded_width // patch


def resize_config(height: int, width: int, settings: KimiK25Settings) -> KimiResize:
    """``navit_resize_image``: never upscale; fit the patch budget (both sides, hence the
    square root) and the per-side limit; truncate; pad up to a multiple of the merged patch."""
    if height < 1 or width < 1:
        raise InputError(f"an image of {dimensions(width, height)} pixels has no pixels")
    patch, side = settings.patch_size, settings.patch_limit_on_one_side
    budget = math.sqrt(
        settings.in_patch_limit / (max(1.0, width // patch) * max(1.0, height // patch))
    )
    scale = min(1.0, budget, side * patch / width, side * patch / height)
    new_width = min(max(1, int(width * scale)), side * patch)
    new_height = min(max(1, int(height * scale)), side * patch)
    factor = settings.merge_kernel_size * patch
    padded_height = new_height + (factor - new_height % factor) % factor
    padded_width = new_width + (factor - new_width % factor) % factor
    tokens = settings.fixed_output_tokens
    if tokens is None:
        tokens = (padded_height // factor) * (padded_width // factor)
    return KimiResize(new_height, new_width, padded_height, padded_width, tokens)


def normalize_table(settings: KimiK25Settings) -> np.ndarray:
    """``[256, 3]`` float32: each uint8 value per channel, ``(v / 255 - mean) * (1 / std)`` in
    float32 as vLLM computes it (a reciprocal, then a product: not a division)."""
    values = np.arange(256, dtype=np.float32)[:, None]
    mean = np.asarray(settings.image_mean, dtype=np.float32)
    inverse = 1.0 / np.asarray(settings.image_std, dtype=np.float32)
    table: np.ndarray = ((values / 255.0 - mean[None, :]) * inverse[None, :]).astype(np.float32)
    return table


def resized(rgb: np.ndarray, plan: KimiResize) -> np.ndarray:
    """Pillow's bicubic to ``plan``'s size (``KimiK25FusedVisionProcessor.resize_image``:
    ``Image.resize(..., BICUBIC)`` on the RGB image), as ``[h, w, 3]`` uint8."""
    from PIL import Image

    if rgb.ndim != 3 or rgb.shape[2] != _CHANNELS or rgb.dtype != np.uint8:
        raise InputError(f"expected uint8 RGB pixels [h, w, 3], got {rgb.dtype} {rgb.shape}")
    image = Image.fromarray(rgb, mode="RGB")
    size = (plan.new_width, plan.new_height)
    return np.asarray(image.resize(size, resample=Image.Resampling.BICUBIC))


def patches(frame: np.ndarray, plan: KimiResize, settings: KimiK25Settings) -> np.ndarray:
    """``[gh * gw, 3, patch, patch]`` uint8 from one resized ``[h, w, 3]`` frame, zero-padded
    right and bottom (before normalization: a padded pixel is value 0)."""
    patch = settings.patch_size
    canvas = np.zeros((plan.padded_height, plan.padded_width, _CHANNELS), dtype=np.uint8)
    canvas[: plan.new_height, : plan.new_width] = frame
    grid_h, grid_w = plan.padded_height // patch, plan.padded_width // patch
    tiles = canvas.reshape(grid_h, patch, grid_w, patch, _CHANNELS).transpose(0, 2, 4, 1, 3)
    return np.ascontiguousarray(tiles.reshape(grid_h * grid_w, _CHANNELS, patch, patch))


def image_pixels(
    rgb: np.ndarray, settings: KimiK25Settings, *, normalize: bool = True
) -> tuple[np.ndarray, tuple[int, int, int]]:
    """One image's ``pixel_values`` (float32 through the table, or the uint8 patches a
    device-normalizing worker takes) and its ``grid_thws`` row."""
    plan = resize_config(rgb.shape[0], rgb.shape[1], settings)
    raw = patches(resized(rgb, plan), plan, settings)
    grid = plan.grid_thw(settings)
    if not normalize:
        return raw, grid
    table = normalize_table(settings)
    channel = np.arange(_CHANNELS)[None, :, None, None]
    pixels: np.ndarray = table[raw, channel]
    return pixels, grid


def replacement_ids(height: int, width: int, settings: KimiK25Settings) -> list[int]:
    """What one ``<|media_pad|>`` of the prompt becomes: that many pads, all embedded."""
    return [settings.media_pad_id] * resize_config(height, width, settings).num_tokens
