"""mmctl preprocess vs its references, on one generated clip, in one run.

    python bench/preprocess.py [--runs 3] [--clip PATH]
    python bench/preprocess.py --native [--rounds 3]

``--native`` runs the other comparison instead: mmctl against vLLM's own
media path (its OpenCV backend + the HF processor) and the decoding floor,
warm and in-process, on the encodings people send (``bench/clips.py``;
``bench/preprocess_native.py``, whose options follow).

Without it, the script generates (once, cached in the temp dir) a 30 s 1280x720 30 fps H.264 clip
with motion, then times each contender in its own fresh subprocess,
interleaved, and reports median wall time and peak RSS:

* mmctl   — ``mmctl.models.qwen_vl.pipeline.preprocess`` (Qwen3-VL, checkpoint budget)
* floor   — PyAV decoding the whole stream, converting only the sampled frames
* hf-best — transformers ``load_video`` with the processor's sampler + ``Qwen3VLVideoProcessor``
* hf-default — ``load_video`` of every frame + ``Qwen3VLVideoProcessor``

The HF contenders need torch/torchvision/transformers in the interpreter that
runs this script (skipped otherwise). Goals: mmctl ≤ 1.2x the floor, faster
than hf-best, ≥ 4x faster and ≥ 5x less peak memory than hf-default.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VIDEO_BUDGET = {"shortest_edge": 4096, "longest_edge": 25165824}


def make_clip(path: Path) -> Path:
    if path.exists():
        return path
    from mmctl.media import synth

    tmp = path.with_suffix(".part.mp4")
    synth.pattern_clip(tmp, 900, 30, 720, 1280)
    tmp.rename(path)
    return path


def run_one(name: str, clip: Path) -> dict:
    start = time.perf_counter()
    if name == "mmctl":
        from mmctl.models.qwen_vl import qwen3_vl
        from mmctl.models.qwen_vl.pipeline import preprocess

        pre = preprocess(clip, qwen3_vl.VARIANT, qwen3_vl.FAMILY.settings())
        shape = list(pre.pixel_values.shape)
    elif name == "floor":
        from _floor import floor_frames

        shape = [len(floor_frames(clip))]
    else:
        from transformers import Qwen3VLVideoProcessor
        from transformers.video_utils import load_video

        proc = Qwen3VLVideoProcessor(size=VIDEO_BUDGET, cap_pixels_per_frame=False)
        if name == "hf-best":
            video, meta = load_video(
                str(clip),
                backend="pyav",
                sample_indices_fn=lambda metadata, **kw: proc.sample_frames(metadata),
            )
            out = proc(videos=[video], do_sample_frames=False, return_tensors="np")
        else:
            video, meta = load_video(str(clip), backend="pyav")
            out = proc(videos=[video], video_metadata=[meta], return_tensors="np")
        shape = list(out["pixel_values_videos"].shape)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mib": _peak_kib() / 1024, "shape": shape}


def _peak_kib() -> int:
    """This process's own peak RSS.

    Not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux carries that high-water
    mark across fork+exec, so every child reported the parent's peak (the
    identical 706 MiB of the first measurement). ``VmHWM`` belongs to the
    address space and starts afresh at exec.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _have_hf() -> bool:
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--clip", type=Path, default=Path(tempfile.gettempdir()) / "mmctl-bench-720p30.mp4"
    )
    parser.add_argument(
        "--only", help="Comma-separated contenders (default: all available), e.g. mmctl,floor"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--native",
        action="store_true",
        help="mmctl vs vLLM's own media path, in-process (bench/preprocess_native.py; "
        "its options follow)",
    )
    args, rest = parser.parse_known_args()
    if args.native:
        import preprocess_native

        return preprocess_native.main(rest + (["--json"] if args.json else []))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.one:
        print(json.dumps(run_one(args.one, args.clip)))
        return 0

    clip = make_clip(args.clip)
    names = ["mmctl", "floor"] + (["hf-best", "hf-default"] if _have_hf() else [])
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    results: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(args.runs):
        for name in names:
            done = subprocess.run(
                [sys.executable, __file__, "--one", name, "--clip", str(clip)],
                capture_output=True,
                text=True,
                check=True,
            )
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    med = {n: statistics.median(r["seconds"] for r in rs) for n, rs in results.items()}
    peak = {n: max(r["peak_mib"] for r in rs) for n, rs in results.items()}
    report = {
        "clip": str(clip),
        "runs": args.runs,
        "median_s": {n: round(v, 3) for n, v in med.items()},
        "peak_mib": {n: round(v, 1) for n, v in peak.items()},
        "mmctl_over_floor": round(med["mmctl"] / med["floor"], 3),
        # Runs are interleaved, so run i of each ran under the same load:
        # the median of the per-run ratios is steadier than the ratio of medians.
        "mmctl_over_floor_paired": [
            round(m["seconds"] / f["seconds"], 3)
            for m, f in zip(results["mmctl"], results["floor"], strict=True)
        ],
    }
    if "hf-best" in med:
        report["hf_best_over_mmctl"] = round(med["hf-best"] / med["mmctl"], 3)
        report["hf_default_over_mmctl"] = round(med["hf-default"] / med["mmctl"], 3)
        report["hf_default_peak_over_mmctl"] = round(peak["hf-default"] / peak["mmctl"], 2)
    if args.json:
        print(json.dumps(report))
        return 0
    for n in names:
        print(f"{n:11s} {med[n]:7.3f} s   peak {peak[n]:8.1f} MiB   {results[n][0]['shape']}")
    paired = report["mmctl_over_floor_paired"]
    print(
        f"mmctl / floor = {report['mmctl_over_floor']} (ratio of medians); per run "
        f"{paired}, median {statistics.median(paired):.3f}  (goal <= 1.2)"
    )
    if "hf-best" in med:
        print(f"hf-best / mmctl = {report['hf_best_over_mmctl']}  (goal > 1)")
        print(f"hf-default / mmctl = {report['hf_default_over_mmctl']}  (goal >= 4)")
        print(f"hf-default peak / mmctl peak = {report['hf_default_peak_over_mmctl']}  (goal >= 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
