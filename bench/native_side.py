"""vLLM's own media path for one video, timed in this process: the native side
of ``bench/preprocess_native.py``, run by the engine environment's Python
(vLLM 0.32, OpenCV, torch, transformers; ``scripts/engine/install_env.sh``).

One JSON request a line on stdin — ``{"path": CLIP, "indices": [...]}`` —
one JSON answer a line on stdout: ``{"seconds": S, "grid": [t, h, w],
"frames": N, "total": N, "fps": F, ...}``; an empty line ends it. With
``"save": FILE`` in the request the processor's pixel tensor is also written
there (``np.save``, from an untimed second run) for the exactness check.
Imports no mmctl (that environment has no PyAV): the frame indices come with
the request, as vLLM's Qwen3-VL loader computes them from OpenCV's count
and rate (the driver checks they agree).

What runs is what vLLM 0.33 does with a video it receives
(``vllm/multimodal/video_decoders/opencv.py``): the bytes through
``cv2.VideoCapture(BytesIO)``; ``get_video_metadata`` on a second capture
(its frame count, fps and end-of-stream seek); ``grab()`` every frame up to
the last sampled one, ``retrieve()`` + BGR→RGB the sampled ones; then the HF
``Qwen3VLVideoProcessor`` with ``do_rescale`` and ``do_normalize`` off — a
default worker normalizes on the device (``mm_device_do_normalize``), so
both sides produce raw uint8 pixels — and torch on one thread, as vLLM runs
its processor. OpenCV decodes with ``min(cpus, 16)`` threads, as in vLLM.
"""

from __future__ import annotations

import json
import sys
import time
from io import BytesIO

import cv2
import numpy as np
import torch
from cv2 import videoio_registry as vr
from transformers import Qwen3VLVideoProcessor
from transformers.video_utils import VideoMetadata

#: The published Qwen3-VL checkpoints' video budget (mmctl's defaults too).
VIDEO_BUDGET = {"shortest_edge": 4096, "longest_edge": 25165824}


def main() -> int:
    torch.set_num_threads(1)
    backend = next(b for b in vr.getStreamBufferedBackends() if vr.hasBackend(b))
    # cap_pixels_per_frame=False: the behaviour of the transformers vLLM 0.33 pins (<5.21).
    processor = Qwen3VLVideoProcessor(size=VIDEO_BUDGET, cap_pixels_per_frame=False)

    def threads(cap: cv2.VideoCapture) -> dict:
        """OpenCV's threads: its own pool (BGR->RGB) and its FFmpeg decoder's."""
        ffmpeg = cap.get(cv2.CAP_PROP_N_THREADS) if hasattr(cv2, "CAP_PROP_N_THREADS") else -1
        return {"cv2": cv2.getNumThreads(), "ffmpeg": int(ffmpeg), "torch": torch.get_num_threads()}

    def capture(data: bytes) -> cv2.VideoCapture:
        cap = cv2.VideoCapture(BytesIO(data), backend, [])
        if not cap.isOpened():
            raise RuntimeError("opencv cannot open the clip")
        return cap

    def run(path: str, indices: list[int], save: str | None = None) -> dict:
        with open(path, "rb") as f:  # vLLM receives bytes (a data URL or a download)
            data = f.read()
        start = time.perf_counter()
        cap = capture(data)
        meta_cap = capture(data)  # get_video_metadata opens its own
        total = int(meta_cap.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = meta_cap.get(cv2.CAP_PROP_FPS)
        if meta_cap.set(cv2.CAP_PROP_POS_AVI_RATIO, 1.0):  # its edit-list cross-check
            meta_cap.grab()
            meta_cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        opened = time.perf_counter()
        wanted = set(indices)
        width = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        frames = np.empty((len(wanted), height, width, 3), dtype=np.uint8)
        i, retrieve_s = 0, 0.0
        for idx in range(max(indices) + 1):
            if not cap.grab():
                continue
            if idx in wanted:
                took = time.perf_counter()
                ok, frame = cap.retrieve()
                if ok:
                    frames[i] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
                    i += 1
                retrieve_s += time.perf_counter() - took
        metadata = VideoMetadata(
            total_num_frames=total, fps=fps, frames_indices=indices, width=width, height=height
        )
        decoded = time.perf_counter()
        out = processor(
            videos=[frames[:i]],
            video_metadata=[metadata],
            do_sample_frames=False,
            do_rescale=False,
            do_normalize=False,
            return_tensors="pt",
        )
        processor_s = time.perf_counter() - decoded
        if save:  # the exactness check compares these with mmctl's (outside the times)
            np.save(save, out["pixel_values_videos"].numpy())
        return {
            # Where the time goes: opening the two captures (metadata, the end-of-stream
            # seek), grab() up to the last sample, retrieve() + BGR->RGB of the sampled
            # frames, the HF processor.
            "open_s": opened - start,
            "grab_s": decoded - opened - retrieve_s,
            "retrieve_s": retrieve_s,
            "processor_s": processor_s,
            "threads": threads(cap),
            "fps": fps,
            "grid": [int(v) for v in out["video_grid_thw"][0]],
            "frames": i,
            "total": total,
            "dtype": str(out["pixel_values_videos"].dtype),
        }

    for line in sys.stdin:
        if not line.strip():
            break
        ask = json.loads(line)
        start = time.perf_counter()
        answer = run(ask["path"], ask["indices"])
        answer["seconds"] = time.perf_counter() - start
        if ask.get("save"):  # once more, untimed, keeping the pixels
            run(ask["path"], ask["indices"], ask["save"])
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
