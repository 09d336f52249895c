"""mmctl's InternVL pixels and prompt replacements against HF, as vLLM drives it, on unseen media.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_internvl_unseen.py --images 300 --clips 16

The processor is built as vLLM 0.33's ``InternS1ProcessingInfo.get_hf_processor``
builds it (the folder's ``InternVLProcessor``, its video processor rebuilt with
the image processor's size) and called as ``InternS1MultiModalProcessor`` calls
it: once per image with ``text="<IMG_CONTEXT>"``, once per video with
``text="<video>"``. Images: random sizes and content (scripts/families/
check_llava_unseen.py's generator, plus InternVL's own edge cases: the exact
tile-grid ratios, the half-area tie boundaries between 1x1/2x2/3x3, 2x1/4x2 and
1x3/2x6, and 1:12 strips); the float32 ``pixel_values`` must be equal bit for
bit and the patch count (``<IMG_CONTEXT>`` runs in HF's ``input_ids`` / 256)
equal to :func:`mmctl.models.internvl.num_patches`; the image goes through
the family (``internvl.FAMILY``, its settings resolved from the folder) from a
PNG file, as ``mmctl build`` takes it. Videos: random numpy clips
(no encoding: codecs differ by machine), sampled with ``sample_indices``; the
pixels must be equal, and the replacement ids — vLLM's text (``Frame{i}: <img>``
+ ``<video>`` x 256 + ``</img>`` per frame) tokenized by transformers — equal to
the family's prompt replacement with mmctl's tokenizer. Prints
"N equal, M differ" per kind; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(Path(__file__).resolve().parent)]

from check_llava_unseen import content  # noqa: E402
from check_llava_unseen import sizes as llava_sizes  # noqa: E402

from mmctl.media.probe import dimensions  # noqa: E402
from mmctl.models import internvl  # noqa: E402
from mmctl.models.model import load_model  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "internvl"

#: (h, w) where InternVL's tiling turns: exact grid ratios, the half-area ties
#: (a square over 633.57 px takes 2x2, over 950.35 px 3x3; 2:1 over 633.57 px
#: high takes 4x2; 1:3 over 633.57 px high 2x6), 1:12 strips and tiny images.
FIXED = [
    (1, 1), (1, 2), (2, 1), (3, 3), (448, 448), (447, 449), (449, 447),
    (633, 633), (634, 634), (950, 950), (951, 951), (1344, 1344),
    (633, 1266), (634, 1268), (1266, 633), (1268, 634), (634, 1902), (633, 1899),
    (1902, 634), (448, 896), (896, 448), (448, 1344), (1344, 448), (448, 5376),
    (1, 12), (12, 1), (5, 60), (60, 5), (30, 400), (400, 30), (100, 150), (150, 100),
    (300, 400), (400, 300), (600, 800), (1080, 1920), (1920, 1080), (2000, 2000),
]  # fmt: skip


def vllm_processor():
    from transformers import AutoProcessor
    from transformers.models.internvl.video_processing_internvl import InternVLVideoProcessor

    processor = AutoProcessor.from_pretrained(str(FOLDER))
    processor.video_processor = InternVLVideoProcessor.from_pretrained(
        str(FOLDER), size=processor.image_processor.size
    )
    return processor


def check_images(processor, model, frames: list[np.ndarray]) -> tuple[int, int, list[str]]:
    """Each image written as a PNG (lossless) and taken through the family's
    processor from the file, as ``mmctl build`` takes it; its replacement through
    the family's prompt expansion."""
    import tempfile

    from PIL import Image

    from mmctl.choices import PixelFormat
    from mmctl.media.probe import MediaKind
    from mmctl.values.items import DEFAULT_OPTIONS

    seq = processor.image_seq_length
    family = internvl.FAMILY
    equal = differ = 0
    notes = []
    folder = Path(tempfile.mkdtemp(prefix="internvl-unseen-"))
    for n, frame in enumerate(frames):
        h, w = frame.shape[:2]
        ref = processor(
            text=processor.image_token, images=Image.fromarray(frame), return_tensors="pt"
        )
        want = ref["pixel_values"].numpy()
        ids = ref["input_ids"][0].numpy()
        hf_patches = int(np.count_nonzero(ids == processor.image_token_id)) // seq
        path = folder / f"{n}.png"
        Image.fromarray(frame).save(path)
        pre = family.processor.preprocess(
            path, MediaKind.IMAGE, model.params, PixelFormat.FLOAT32, DEFAULT_OPTIONS
        )
        path.unlink()
        mine = pre.pixel_values
        pixels_ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
        count_ok = internvl.num_patches(h, w, model.params) == hf_patches == pre.facts.rows
        repl_ok = ids.tolist() == internvl.replacement(pre.facts, model)
        if pixels_ok and count_ok and repl_ok:
            equal += 1
        else:
            differ += 1
            notes.append(
                f"{dimensions(w, h)}: pixels {'ok' if pixels_ok else 'DIFFER'}, patches "
                f"{pre.facts.rows} vs HF {hf_patches}, ids {'ok' if repl_ok else 'DIFFER'}"
            )
    folder.rmdir()
    return equal, differ, notes


def check_clips(
    processor, model, rng: np.random.Generator, count: int
) -> tuple[int, int, list[str]]:
    """Numpy clips (no codec) through the family's frame choice and video item,
    the replacement through its prompt expansion."""
    from mmctl.media.probe import MediaKind
    from mmctl.values.items import ItemFacts

    family, vision = internvl.FAMILY, model.params
    seq = processor.image_seq_length
    lengths = [1, 2, 31, 32, 33, 100]
    equal = differ = 0
    notes = []
    for n in range(count):
        total = lengths[n] if n < len(lengths) else int(rng.integers(1, 120))
        h, w = int(rng.integers(2, 700)), int(rng.integers(2, 700))
        clip = np.stack([content(rng, h, w) for _ in range(total)])
        assert family.processor.sample_indices is not None
        indices = family.processor.sample_indices(total, vision)
        sampled = clip[indices]
        ref = processor(text=processor.video_token, videos=sampled, return_tensors="pt")
        want = ref["pixel_values"].numpy()
        item = internvl.video_item(sampled, vision)
        mine = item.pixels
        pixels_ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
        frame = (
            processor.start_image_token + processor.video_token * seq + processor.end_image_token
        )
        text = "\n".join(f"Frame{i + 1}: {frame}" for i in range(len(indices)))
        vllm_ids = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
        facts = ItemFacts(MediaKind.VIDEO, item.tokens, extra=item.extra, rows=item.rows)
        ids_ok = internvl.replacement(facts, model) == vllm_ids
        count_ok = len(indices) == min(total, vision.num_frames) == len(want) == item.rows
        if pixels_ok and ids_ok and count_ok:
            equal += 1
        else:
            differ += 1
            notes.append(
                f"clip {total} frames {dimensions(w, h)}: pixels {'ok' if pixels_ok else 'DIFFER'}, "
                f"ids {'ok' if ids_ok else 'DIFFER'}, frames {len(indices)}"
            )
    return equal, differ, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()

    import torch
    from transformers.utils import logging

    logging.set_verbosity_error()  # "channel dimension is ambiguous" on 1-3 px images
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    shapes = FIXED + llava_sizes(rng, max(0, args.images - len(FIXED)))
    frames = [content(rng, h, w) for h, w in shapes[: args.images]]
    processor = vllm_processor()
    model = load_model(model_dir=FOLDER)  # the family and settings from the folder
    assert model.spec is internvl.FAMILY
    failed = False
    for kind, (equal, differ, notes) in (
        ("images", check_images(processor, model, frames)),
        ("clips", check_clips(processor, model, rng, args.clips)),
    ):
        print(f"internvl {kind}: {equal} equal, {differ} differ", flush=True)
        for note in notes[:20]:
            print("   ", note)
        failed |= bool(differ)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
