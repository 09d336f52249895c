"""Prompt layout + request metadata for a 768-frame video, against a reference, in one run.

    python bench/tokens.py [--runs 21]

No media is decoded: the item is what preprocessing a 30 fps 1280x720 clip
with ``max_frames`` 768 and the Qwen3-VL checkpoint budget yields (grid,
per-patch times). Timed, median of ``--runs``:

* mmctl — expand the bare ``<|video_pad|>`` (vllm layout), run the mrope
  walk, build the modality batch and the ``GenerateRequest`` protobuf with
  the pixel tensor placed as a shared-memory handle (metadata only: the
  pixel bytes are the transport's business, measured by the send bench).
* reference — the string route HF's processor takes: write the expanded
  prompt as text (timestamps, markers and every pad as a token string) and
  tokenize it whole with the same ``tokenizers`` tokenizer.

Goal: mmctl under 50 ms. Both must produce the same ids (checked).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()

    from mmctl.media.probe import MediaKind
    from mmctl.models.model import load_model
    from mmctl.models.qwen_vl import qwen3_vl
    from mmctl.models.qwen_vl.layout import expand
    from mmctl.prompt.mrope import walk
    from mmctl.request.build import Batch, RequestPlan
    from mmctl.values.items import ItemFacts
    from mmctl.wire import proto

    model = load_model()
    spec, params, ids = qwen3_vl.VARIANT, model.params, model.token_ids
    fps = 30.0
    total = 27000  # a 15-minute clip
    indices = spec.sample_indices(total, fps, params)
    height, width = spec.video_size(len(indices), 720, 1280, params)
    grid = (len(indices) // 2, height // 16, width // 16)
    times = tuple(spec.video_frame_times(indices, fps, params))
    t, h, w = grid
    item = ItemFacts(MediaKind.VIDEO, t * h * w // 4, grid, times, rows=t * h * w)
    tok = model.tokenizer
    text = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe.<|im_end|>\n<|im_start|>assistant\n"
    prompt_ids = tok.encode(text)
    rows = int(np.prod(grid))
    engine, common = proto.engine_pb2, proto.common_pb2

    def handle(key, array, dtype):
        return engine.TensorData(
            shape=list(array.shape),
            dtype=dtype,
            shm=common.ShmHandle(name=f"mmctl-{key}", nbytes=array.nbytes),
        )

    pixels = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (rows, 1536), (0, 0))

    def run_mmctl():
        layout = expand(prompt_ids, [item], spec=spec, token_ids=ids, tokenizer=tok, merge_size=2)
        check = walk(layout.ids, layout.spans, [grid], ids, 2)
        assert check.ok, check.reason
        span = layout.spans[0]
        batch = Batch(
            kind=MediaKind.VIDEO,
            pixel_values=pixels,
            pixel_dtype="uint8",
            tensors={
                "video_grid_thw": np.asarray([grid], np.int64),
                "patches_per_video": np.asarray([rows], np.int64),
            },
            im_token_id=ids.video_token_id,
            placeholders=[(span.offset, span.length)],
            hashes=["0" * 64],
            batched_keys=["video_grid_thw", "patches_per_video"],
            flat_keys={"pixel_values": "patches_per_video"},
            keep_on_cpu_keys=["video_grid_thw"],
        )
        req = RequestPlan(text=text, input_ids=layout.ids, batches=[batch]).to_proto(handle)
        return layout.ids, req

    per_frame = grid[1] * grid[2] // 4

    def run_reference():
        block = "".join(
            f"<{t:.1f} seconds><|vision_start|>" + "<|video_pad|>" * per_frame + "<|vision_end|>"
            for t in times
        )
        expanded = text.replace("<|video_pad|>", block, 1)
        return np.asarray(tok._tok.encode(expanded, add_special_tokens=False).ids, np.int64)

    ours, req = run_mmctl()
    theirs = run_reference()
    assert np.array_equal(ours, theirs), "mmctl and the reference disagree"
    timings = {"mmctl": [], "reference": []}
    for _ in range(args.runs):
        for name, fn in (("mmctl", run_mmctl), ("reference", run_reference)):
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) * 1000 for k, v in timings.items()}
    print(
        f"768-frame video: {len(indices)} frames sampled, grid {list(grid)}, "
        f"{len(ours)} prompt tokens, request metadata {req.ByteSize():,} bytes"
    )
    for name, ms in med.items():
        print(f"{name:10s} {ms:8.2f} ms  (median of {args.runs})")
    print(f"reference / mmctl = {med['reference'] / med['mmctl']:.2f}")
    print(f"mmctl {med['mmctl']:.2f} ms; goal < 50 ms: {'met' if med['mmctl'] < 50 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
