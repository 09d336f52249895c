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
