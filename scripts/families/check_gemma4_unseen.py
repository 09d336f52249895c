"""mmctl's Gemma 4 functions against HF as vLLM drives it, on media the goldens never saw.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_gemma4_unseen.py --images 300 --clips 20

Random-size, random-content images (noise, gradients, flat colour; sides from 1
to ~3000 px, aspect ratios up to 1:400 — past the 1:280 where one side floors to
nothing — and sizes around multiples of 48) go through transformers'
``Gemma4Processor`` loaded from tests/fixtures/families/gemma4/ and called as
vLLM 0.33 calls it (scripts/families/gemma4_reference.py), at the published
budget and at a random one of the other supported budgets, alone and in
multi-image calls; and through ``mmctl.models.gemma4``. Equal means: the float32
``pixel_values`` and int64 ``pixel_position_ids`` bit for bit, mmctl's soft-token
count equal to the encoder's (HF's real patches / 9) and mmctl's prompt count
equal to vLLM's formula. Where vLLM's own prompt count differs from its encoder's
(vLLM would then fail the request), that is reported apart: not an mmctl
difference. Clips are random numpy frames (no encoding: codecs differ by
machine) with random lengths and source rates, sampled with ``sample_indices``
and compared frame tensors, timestamps and prompt ids. Prints "N equal, M
differ" per part; exits 1 on any mmctl difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import gemma4_reference as ref  # noqa: E402
from check_llava_unseen import content  # noqa: E402

from mmctl.media.probe import dimensions  # noqa: E402
from mmctl.models import gemma4  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "gemma4"
SETTINGS = gemma4.Settings()


def sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """(h, w): fixed edge cases first, then random ones."""
    fixed = [
        (1, 1), (1, 2), (2, 1), (3, 3), (16, 16), (47, 47), (48, 48), (49, 49), (1, 280),
        (1, 281), (3, 900), (900, 3), (2, 1000), (1000, 2), (1, 2000), (5, 2000), (803, 803),
        (804, 804), (768, 768), (480, 480), (624, 1008), (1008, 624), (48, 13440), (2000, 3000),
        (3000, 2000), (61, 97), (10, 20), (900, 1400), (650, 1000), (1080, 1920), (1920, 1080),
    ]  # fmt: skip
    out = list(fixed)
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # anything, log-uniform
            h, w = (int(np.exp(rng.uniform(0, np.log(3000)))) for _ in range(2))
        elif kind == 1:  # extreme aspect
            short = int(rng.integers(1, 40))
            long = int(min(3000, short * rng.uniform(20, 400)))
            h, w = (short, long) if rng.integers(2) else (long, short)
        elif kind == 2:  # around multiples of 48
            h, w = (int(48 * rng.integers(1, 40) + rng.integers(-2, 3)) for _ in range(2))
        else:  # photo-like
            h, w = int(rng.integers(200, 3000)), int(rng.integers(200, 3000))
        out.append((max(1, h), max(1, w)))
    return out[:count]


def _image_call(processor, frames: list[np.ndarray], budget: int) -> dict:
    from PIL import Image

    pils = [Image.fromarray(f) for f in frames]
    if budget == SETTINGS.max_soft_tokens:
        return ref.image_features(processor, pils)
    out = processor(
        text="".join("\t" + processor.image_token for _ in pils),
        images=pils,
        max_soft_tokens=budget,
        return_tensors="pt",
    )
    return {
        "pixel_values": out["pixel_values"],
        "pixel_position_ids": out["image_position_ids"],
        "num_soft_tokens_per_image": ref._counts(processor, out["image_position_ids"]),
    }


def _same(frames: list[np.ndarray], want: dict, budget: int, config: dict) -> tuple[bool, bool]:
    """(mmctl equals HF/vLLM, vLLM's prompt count equals its encoder's) for one call."""
    ok, vllm_ok = True, True
    for i, frame in enumerate(frames):
        mine = gemma4.image_pixels(frame, SETTINGS, budget)
        h, w = frame.shape[:2]
        encoder = want["num_soft_tokens_per_image"][i]
        ok = ok and mine.pixel_values.tobytes() == want["pixel_values"][i].numpy().tobytes()
        ok = (
            ok
            and mine.pixel_position_ids.tobytes() == want["pixel_position_ids"][i].numpy().tobytes()
        )
        ok = ok and mine.soft_tokens == encoder
        prompt = ref.soft_tokens(config, h, w, budget)
        ok = ok and gemma4.soft_tokens(h, w, SETTINGS, budget) == prompt
        vllm_ok = vllm_ok and prompt == encoder
    return ok, vllm_ok


def check_images(processor, config, rng, count: int, batches: int) -> bool:
    frames = [content(rng, h, w) for h, w in sizes(rng, count)]
    others = [b for b in gemma4.SUPPORTED_SOFT_TOKENS if b != SETTINGS.max_soft_tokens]
    equal = differ = vllm_mismatch = refused = 0
    notes: list[str] = []
    for frame in frames:
        for budget in (SETTINGS.max_soft_tokens, int(rng.choice(others))):
            h, w = frame.shape[:2]
            try:
                want = _image_call(processor, [frame], budget)
            except ValueError as err:  # HF refuses: mmctl must refuse too
                try:
                    gemma4.image_pixels(frame, SETTINGS, budget)
                except Exception:
                    refused += 1
                    continue
                differ += 1
                notes.append(f"{dimensions(w, h)}@{budget}: HF refuses ({err}), mmctl does not")
                continue
            ok, vllm_ok = _same([frame], want, budget, config)
            equal += ok
            differ += not ok
            if not ok and len(notes) < 12:
                notes.append(f"{dimensions(w, h)}@{budget}")
            if not vllm_ok:
                vllm_mismatch += 1
                notes.append(f"{dimensions(w, h)}@{budget}: vLLM's prompt count != its encoder's")
    for _ in range(batches):  # several images in one call: vLLM's image batch
        picked = [frames[int(i)] for i in rng.choice(len(frames), size=int(rng.integers(2, 5)))]
        want = _image_call(processor, picked, SETTINGS.max_soft_tokens)
        ok, _ = _same(picked, want, SETTINGS.max_soft_tokens, config)
        equal += ok
        differ += not ok
    print(
        f"images: {equal} equal, {differ} differ ({len(frames)} sizes x 2 budgets + {batches} "
        f"multi-image calls; {refused} refused by both; vLLM prompt != encoder: {vllm_mismatch})"
    )
    for note in notes:
        print(f"  {note}")
    return differ == 0


def check_clips(processor, config, rng, count: int) -> bool:
    tokenizer = processor.tokenizer

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    equal = differ = 0
    notes: list[str] = []
    for _ in range(count):
        total = int(rng.integers(1, 120))
        fps = float(rng.choice([0.0, 1.0, 2.5, 8.0, 24000 / 1001, 30.0, 59.94]))
        h, w = int(rng.integers(8, 400)), int(rng.integers(8, 400))
        indices = gemma4.sample_indices(total, fps, SETTINGS)
        want_indices = (
            np.arange(total)
            if min(32, total) == total
            else np.linspace(0, total - 1, 32, dtype=int)
        )
        frames = np.stack([content(rng, h, w) for _ in indices])
        parts = ref.video_features(processor, frames)
        mine = gemma4.video_pixels(frames, SETTINGS)
        seconds = gemma4.timestamps(indices.tolist(), fps)
        per_frame = [gemma4.frame_soft_tokens(h, w, SETTINGS)] * len(frames)
        ids = gemma4.video_token_ids(seconds, per_frame, SETTINGS, encode)
        want_ids = ref.video_replacement(
            tokenizer,
            config,
            ref.timestamps(indices.tolist(), fps),
            parts["num_soft_tokens_per_frame"],
        )
        ok = (
            np.array_equal(indices, want_indices)
            and np.stack([p.pixel_values for p in mine]).tobytes()
            == parts["pixel_values_videos"].numpy().tobytes()
            and np.stack([p.pixel_position_ids for p in mine]).tobytes()
            == parts["pixel_position_ids_videos"].numpy().tobytes()
            and seconds == ref.timestamps(indices.tolist(), fps)
            and ids == want_ids
        )
        equal += ok
        differ += not ok
        if not ok:
            notes.append(f"{total} frames {dimensions(w, h)} at {fps} fps")
    print(f"clips: {equal} equal, {differ} differ")
    for note in notes:
        print(f"  {note}")
    return differ == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=20)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()

    import torch
    from transformers import AutoProcessor
    from transformers.utils import logging

    logging.set_verbosity_error()  # "channel dimension is ambiguous" on 1-3 px images: HF picks right
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    processor = AutoProcessor.from_pretrained(FOLDER)
    config = json.loads((FOLDER / "config.json").read_text())
    ok = check_images(processor, config, rng, args.images, args.batches)
    ok = check_clips(processor, config, rng, args.clips) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
