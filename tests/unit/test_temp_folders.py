"""The suite's temporary folders are cleaned up as it goes (pyproject's
``tmp_path_retention_policy``): a passed test's ``tmp_path`` is removed when it
ends, a failed one's kept to look at."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
def test_passes(tmp_path):
    (tmp_path / "bundle").write_bytes(b"x" * 2**20)

def test_fails(tmp_path):
    (tmp_path / "kept").write_bytes(b"x")
    assert False
"""


def test_a_passed_tests_tmp_path_is_removed_a_failed_ones_kept(tmp_path):
    (tmp_path / "test_inner.py").write_text(TESTS)
    base = tmp_path / "base"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), f"--basetemp={base}",
         str(tmp_path / "test_inner.py")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout
    left = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
    assert left == ["test_fails0/kept"], left
