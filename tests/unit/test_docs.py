"""The comments that cite ARCHITECTURE.md point at sections that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_architecture_references_resolve():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", text, re.M))
    cited = set()
    for path in [*ROOT.joinpath("mmctl").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]:
        for major, _minor in re.findall(r"ARCHITECTURE §(\d+)(?:\.(\d+))?", path.read_text()):
            cited.add(major)
    assert cited and cited <= sections, f"cited {sorted(cited)}, present {sorted(sections)}"


def test_reliability_and_security_cite_tests_that_exist():
    """Each `test_…` name in RELIABILITY.md and SECURITY.md is a test function
    (a renamed test must not leave a table pointing at nothing)."""
    defined = set()
    for path in ROOT.joinpath("tests").rglob("test_*.py"):
        defined |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M))
    for doc in ("RELIABILITY.md", "SECURITY.md"):
        cited = set(re.findall(r"`(test_\w+)(?:\[[^\]]*\])?`", (ROOT / doc).read_text()))
        assert cited, doc
        assert cited <= defined, f"{doc} cites missing tests: {sorted(cited - defined)}"


def test_sizes_are_written_by_one_helper():
    """A picture's size reads width x height everywhere, as PIL and ffprobe
    write it, because one function writes it (``media.probe.dimensions``):
    an f-string that joins two values with an ``x`` anywhere else is a second
    way, and the first to drift (issue 35: ``61x97`` for a 97x61 image). A
    patch grid (t x h x w, vLLM's order) is not a picture's size."""
    joined = re.compile(r"\{[^{}]*\}x\{")
    found = []
    for folder in ("mmctl", "scripts", "bench"):
        for path in ROOT.joinpath(folder).rglob("*.py"):
            for line in path.read_text().splitlines():
                if joined.search(line) and "{t}x{h}x{w}" not in line:
                    found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert found == ['mmctl/media/probe.py: return f"{width}x{height}"'], found
