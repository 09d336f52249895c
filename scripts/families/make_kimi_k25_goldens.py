"""Write tests/fixtures/families/goldens/kimi_k25/images.npz from vLLM's own Kimi-K2.5 processor.

Runs where vLLM (with numba) is installed, e.g. the engine environment:

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/make_kimi_k25_goldens.py

vLLM 0.33 processes Kimi images with its ``KimiK25FusedVisionProcessor`` (transformers'
``Kimi_K25ImageProcessor`` resizes differently), so the goldens come from it, not from the
transformers reference environment. For every ``hf_cases.IMAGE_CASES`` image loaded by vLLM's
``ImageMediaIO`` (EXIF applied, transparency onto white) and the ``two_images`` pair it
records, per case: ``<case>__media``, ``__sizes_hw``, ``__grid_thws``, ``__tokens`` and the
sha256 and shape of the uint8 patches (device normalization on: vLLM's default) and of the
float32 patches (off). No Kimi model folder is needed (only ``media_proc_cfg``); the
tokenizer is not involved. Deterministic: the same bytes on every run (np.savez, no
compression timestamps).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "fixtures"), str(Path(__file__).resolve().parent)]

import hf_cases  # noqa: E402
from check_kimi_k25_unseen import MEDIA_PROC_CFG  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "families" / "goldens" / "kimi_k25" / "images.npz"


def main() -> int:
    from vllm.multimodal.media import ImageMediaIO
    from vllm.transformers_utils.processors.kimi_k25_vision_fused import (
        KimiK25FusedVisionProcessor,
    )

    proc = KimiK25FusedVisionProcessor(media_proc_cfg=MEDIA_PROC_CFG)
    cases = [(f"image-{c.name}", (c,)) for c in hf_cases.IMAGE_CASES]
    by_name = {c.name: c for c in hf_cases.IMAGE_CASES}
    cases.append(("two_images", (by_name["rgb_odd"], by_name["large"])))
    out: dict[str, np.ndarray] = {"cases": np.asarray([name for name, _ in cases])}
    for name, media in cases:
        images = [
            ImageMediaIO().load_bytes(hf_cases.media_path(c).read_bytes()).media for c in media
        ]
        items = [{"type": "image", "image": image} for image in images]
        out[f"{name}__media"] = np.asarray([hf_cases.media_path(c).name for c in media])
        out[f"{name}__sizes_hw"] = np.asarray([[i.size[1], i.size[0]] for i in images])
        out[f"{name}__tokens"] = np.asarray([proc.media_tokens_calculator(dict(i)) for i in items])
        for label, normalize in (("raw", False), ("norm", True)):
            result = proc.preprocess(
                [dict(i) for i in items], do_rescale=normalize, do_normalize=normalize
            )
            pixels = np.ascontiguousarray(result["pixel_values"].numpy())
            out[f"{name}__{label}_shape"] = np.asarray(pixels.shape)
            out[f"{name}__{label}_dtype"] = np.asarray(str(pixels.dtype))
            out[f"{name}__{label}_sha256"] = np.asarray(
                hashlib.sha256(pixels.tobytes()).hexdigest()
            )
            out[f"{name}__grid_thws"] = result["grid_thws"].numpy().astype(np.int64)
        print(name, out[f"{name}__grid_thws"].tolist(), out[f"{name}__tokens"].tolist())
    np.savez(OUT, **out)
    print(f"{OUT.stat().st_size:,d} bytes, {len(cases)} cases -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
