"""The layering ARCHITECTURE.md §1 claims: preprocessing and prompt use the
families' vocabulary (``models.family``, ``models.base``, …) but never load a
family module, which composes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mmctl"
LOWER = sorted(
    f"mmctl.{p.parent.name}.{p.stem}"
    for folder in ("preprocessing", "prompt", "media")
    for p in (PACKAGE / folder).glob("*.py")
    if p.stem != "__init__"
)
FAMILIES = {
    "mmctl.models.registry",
    "mmctl.models.model",
    "mmctl.models.qwen",
    "mmctl.models.qwen3_vl",
    "mmctl.models.qwen2_vl",
    "mmctl.models.tiled",
    "mmctl.models.llava",
    "mmctl.models.llava_next",
    "mmctl.models.llava_onevision",
    "mmctl.models.llama4",
}


@pytest.mark.parametrize("module", LOWER)
def test_lower_layers_load_no_family_module(module):
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(FAMILIES & set(json.loads(done.stdout))) == []
