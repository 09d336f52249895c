"""Start-up cost of `mmctl --help` next to bare Python, in the same run.

    python bench/startup.py [--runs 21]

Runs the commands interleaved (the machine is shared and noisy), prints the
median wall time of each, the difference and the ratio. Goal: `mmctl --help`
at most 0.25 s above `python -c pass`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

GOAL_S = 0.25

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "mmctl --help": [sys.executable, "-m", "mmctl", "--help"],
    "mmctl --version": [sys.executable, "-m", "mmctl", "--version"],
    "import mmctl.cli.app": [sys.executable, "-c", "import mmctl.cli.app"],
}


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()

    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for cmd in COMMANDS.values():  # warm the page cache once
        _time(cmd)
    for _ in range(args.runs):
        for name, cmd in COMMANDS.items():
            samples[name].append(_time(cmd))

    medians = {name: statistics.median(s) for name, s in samples.items()}
    base = medians["python -c pass"]
    report = {
        "runs": args.runs,
        "median_s": {k: round(v, 4) for k, v in medians.items()},
        "help_over_python_s": round(medians["mmctl --help"] - base, 4),
        "help_ratio_to_python": round(medians["mmctl --help"] / base, 2),
        "goal_over_python_s": GOAL_S,
    }
    report["goal_met"] = report["help_over_python_s"] <= GOAL_S
    if args.json:
        print(json.dumps(report))
        return 0
    for name, value in medians.items():
        print(f"{name:24s} {value * 1000:8.1f} ms  (+{(value - base) * 1000:6.1f} ms)")
    print(
        f"mmctl --help is {report['help_over_python_s'] * 1000:.0f} ms above bare Python "
        f"(x{report['help_ratio_to_python']}); goal <= {GOAL_S * 1000:.0f} ms: "
        f"{'met' if report['goal_met'] else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
