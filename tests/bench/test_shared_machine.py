"""The tests and `mmctl bench` count only what their own run made in /dev/shm.

CI runners run jobs side by side: another process's mmctl files and
multiprocessing semaphores come and go in the same /dev/shm meanwhile,
some with names carrying this run's PID (a process in another PID
namespace). The bench's report and the tests' leak guards must not move.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mmctl.transport.shm import shm_dir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: The tests that count /dev/shm files: the bench's report, the fuzz guard,
#: the no_leaks guard of send and the stub (a few of each, to stay quick).
TESTS = [
    "tests/bench/test_bench.py::test_sizes_inline_and_shm_interleaved",
    "tests/bench/test_bench.py::test_a_thousand_requests_leave_nothing_behind",
    "tests/fuzz/test_fuzz_stub_requests.py::test_mutated_field_values",
    "tests/client/test_send.py::test_video_answers_over_each_transport",
    "tests/client/test_send.py::test_replay_a_built_request",
    "tests/client/test_send.py::test_deadline_exits_5_and_cleans_shm",
    "tests/client/test_send.py::test_limits_are_checked_before_shipping",
    "tests/client/test_send.py::test_sigint_while_waiting_exits_130_and_removes_shm_files",
    "tests/client/test_send.py::test_shm_full_auto_falls_back_inline_and_shm_fails",
    "tests/worker/test_stub_worker.py::test_the_stub_reads_only_its_own_uids_shm_files",
    "tests/client/test_send_options.py::test_first_pass_files_are_not_reported_as_the_workers",
    "tests/cli/test_scripts.py::test_a_closed_stdout_leaves_no_shm_files",
]


def test_the_suite_passes_while_another_processs_files_come_and_go(tmp_path):
    env = {**os.environ, "MMCTL_FUZZ_EXAMPLES": "60", "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--basetemp={tmp_path / 'inner'}", *TESTS],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    churn = subprocess.Popen(
        [sys.executable, str(HERE / "_shm_churn.py"), str(shm_dir()), str(inner.pid)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert churn.stdout.readline() == "ready\n"
        out, _ = inner.communicate(timeout=600)
    finally:
        inner.kill()
        churn.terminate()
        made = churn.communicate(timeout=30)[0]
    assert inner.returncode == 0, out[-4000:]
    assert int(made.split()[-1]) > 100, made  # the churn ran all along
