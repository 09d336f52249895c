"""mmctl's Gemma 4 processing against HF as vLLM drives it, on media the goldens never saw.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_gemma4_unseen.py --images 300 --clips 20

mmctl's side is its real path: the folder loaded with ``load_model`` (the family
chosen from config.json), each item through ``model.spec.processor.preprocess``
from a file, several images joined by ``model.spec.wire.batch_pixels``, a
video's prompt by the family's replacement. Random-size, random-content images
(noise, gradients, flat colour; sides from 1 to ~3000 px, aspect ratios up to
1:400 — past the 1:280 where one side floors to nothing — and sizes around
multiples of 48) are written as PNG (lossless) and go through transformers'
``Gemma4Processor`` loaded from tests/fixtures/families/gemma4/ and called as
vLLM 0.33 calls it (scripts/families/gemma4_reference.py), at the published
budget and at a random other supported one (a copy of the folder with
``max_soft_tokens`` and ``default_output_length`` both set to it: a server
started with that ``mm_processor_kwargs``), alone and in multi-image calls.
Equal means: the float32 ``pixel_values`` and int64 ``pixel_position_ids`` bit
for bit and mmctl's token count equal to vLLM's formula and to the encoder's
(HF's real patches / 9). Where vLLM's own prompt count differs from its
encoder's (vLLM would then fail the request), mmctl must refuse: reported apart.
Clips are random frames written losslessly (FFV1 RGB in AVI; the frames mmctl
decodes are checked to be the written ones) at random lengths and rates: the
kept frames (vLLM's default loader), every frame tensor, the timestamps and the
replacement ids must be HF's / vLLM's. Prints "N equal, M differ" per part;
exits 1 on any mmctl difference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import gemma4_reference as ref  # noqa: E402
from check_glm4v_unseen import _preprocess, decoded_frames, write_clip  # noqa: E402
from check_llava_unseen import content  # noqa: E402

from mmctl.errors import InputError  # noqa: E402
from mmctl.media.probe import MediaKind, dimensions  # noqa: E402
from mmctl.models import gemma4  # noqa: E402
from mmctl.models.model import Model, load_model  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "gemma4"
PUBLISHED = 280


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


def models(tmp: Path) -> dict[int, Model]:
    """The published folder, and a copy per other budget with both values set to it."""
    out = {PUBLISHED: load_model(model_dir=FOLDER)}
    for budget in gemma4.SUPPORTED_SOFT_TOKENS:
        if budget == PUBLISHED:
            continue
        folder = tmp / f"budget-{budget}"
        shutil.copytree(FOLDER, folder)
        processor = json.loads((folder / "processor_config.json").read_text())
        processor["image_processor"]["max_soft_tokens"] = budget
        (folder / "processor_config.json").write_text(json.dumps(processor))
        config = json.loads((folder / "config.json").read_text())
        config["vision_config"]["default_output_length"] = budget
        (folder / "config.json").write_text(json.dumps(config))
        out[budget] = load_model(model_dir=folder)
    return out


def _hf_images(processor: Any, frames: list[np.ndarray], budget: int) -> dict:
    from PIL import Image

    pils = [Image.fromarray(f) for f in frames]
    if budget == PUBLISHED:
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


def check_images(
    processor: Any, config: dict, by_budget: dict[int, Model], rng, count: int, batches: int, tmp
) -> bool:
    from PIL import Image

    others = [b for b in gemma4.SUPPORTED_SOFT_TOKENS if b != PUBLISHED]
    equal = differ = vllm_fails = 0
    notes: list[str] = []
    written: list[tuple[np.ndarray, Path]] = []
    for n, (h, w) in enumerate(sizes(rng, count)):
        frame = content(rng, h, w)
        path = tmp / f"{n}.png"
        Image.fromarray(frame).save(path)
        written.append((frame, path))
        for budget in (PUBLISHED, int(rng.choice(others))):
            pre = _preprocess(by_budget[budget], path, MediaKind.IMAGE)
            try:
                want = _hf_images(processor, [frame], budget)
            except ValueError as err:  # HF refuses: mmctl must refuse too
                ok = isinstance(pre, InputError)
                equal += ok
                differ += not ok
                if not ok:
                    notes.append(f"{dimensions(w, h)}@{budget}: HF refuses ({err}), mmctl does not")
                continue
            encoder = want["num_soft_tokens_per_image"][0]
            prompt = ref.soft_tokens(config, h, w, budget)
            if prompt != encoder:  # vLLM would fail the request: mmctl refuses it
                vllm_fails += 1
                ok = isinstance(pre, InputError)
            else:
                ok = (
                    not isinstance(pre, InputError)
                    and pre.pixel_values.tobytes() == want["pixel_values"][0].numpy().tobytes()
                    and pre.item_tensors["pixel_position_ids"].tobytes()
                    == want["pixel_position_ids"][0].numpy().tobytes()
                    and pre.num_tokens == prompt
                )
            equal += ok
            differ += not ok
            if not ok and len(notes) < 12:
                notes.append(f"{dimensions(w, h)}@{budget}: {pre!r:.100}")
    model = by_budget[PUBLISHED]
    for _ in range(batches):  # several images in one call: vLLM's image batch
        picked = [written[int(i)] for i in rng.choice(len(written), size=int(rng.integers(2, 5)))]
        pres = [_preprocess(model, path, MediaKind.IMAGE) for _, path in picked]
        want = _hf_images(processor, [frame for frame, _ in picked], PUBLISHED)
        ok = not any(isinstance(p, InputError) for p in pres) and (
            model.spec.wire.batch_pixels(MediaKind.IMAGE, [p.pixel_values for p in pres]).tobytes()
            == want["pixel_values"].numpy().tobytes()
        )
        equal += ok
        differ += not ok
    print(
        f"images: {equal} equal, {differ} differ ({count} sizes x 2 budgets + {batches} "
        f"multi-image calls; where vLLM's prompt count != its encoder's, mmctl refused: "
        f"{vllm_fails})",
        flush=True,
    )
    for note in notes:
        print(f"  {note}")
    return differ == 0


RATES = (Fraction(1), Fraction(5, 2), Fraction(8), Fraction(24000, 1001), Fraction(30),
         Fraction(60000, 1001))  # fmt: skip


def check_clips(processor: Any, config: dict, model: Model, rng, count: int, tmp: Path) -> bool:
    tokenizer = processor.tokenizer
    equal = differ = 0
    notes: list[str] = []
    for n in range(count):
        total = int(rng.integers(1, 120))
        rate = RATES[int(rng.integers(len(RATES)))]
        h, w = int(rng.integers(8, 400)), int(rng.integers(8, 400))
        clip = np.stack([content(rng, h, w) for _ in range(total)])
        path = tmp / f"{n}.avi"
        write_clip(path, clip, rate)
        pre = _preprocess(model, path, MediaKind.VIDEO)
        problems = []
        if isinstance(pre, InputError):
            problems.append(f"mmctl refused: {pre}")
        else:
            fps = float(rate)
            want_indices = (
                np.arange(total) if total <= 32 else np.linspace(0, total - 1, 32, dtype=int)
            )
            ours = pre.frame_indices
            parts = ref.video_features(processor, clip[want_indices])
            stamps = ref.timestamps(want_indices.tolist(), fps)
            want_ids = ref.video_replacement(
                tokenizer, config, stamps, parts["num_soft_tokens_per_frame"]
            )
            if pre.source.total_frames != total or pre.source.source_fps != fps:
                problems.append(
                    f"decoded {pre.source.total_frames} frames at {pre.source.source_fps}"
                )
            elif not np.array_equal(decoded_frames(path, ours.tolist()), clip[ours]):
                problems.append("the codec was not lossless here (not a difference of mmctl's)")
            if not np.array_equal(ours, want_indices):
                problems.append(f"frames {ours[:6].tolist()}.. vs {want_indices[:6].tolist()}..")
            elif pre.pixel_values.tobytes() != parts["pixel_values_videos"].numpy().tobytes():
                problems.append("pixels")
            elif (
                pre.item_tensors["pixel_position_ids_videos"].tobytes()
                != parts["pixel_position_ids_videos"].numpy().tobytes()
            ):
                problems.append("positions")
            if list(pre.patch_times) != stamps:
                problems.append(f"timestamps {list(pre.patch_times)[:3]}.. vs {stamps[:3]}..")
            elif gemma4.replacement(pre.facts, model) != want_ids:
                problems.append("replacement ids")
        ok = not problems
        equal += ok
        differ += not ok
        if not ok:
            notes.append(f"{total} frames {dimensions(w, h)} at {float(rate):.3f} fps: {problems}")
        path.unlink()
    print(f"clips: {equal} equal, {differ} differ", flush=True)
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
    with tempfile.TemporaryDirectory(prefix="mmctl-gemma4-unseen-") as folder:
        tmp = Path(folder)
        by_budget = models(tmp)
        ok = check_images(processor, config, by_budget, rng, args.images, args.batches, tmp)
        ok = check_clips(processor, config, by_budget[PUBLISHED], rng, args.clips, tmp) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
