"""What the gateway tests share: the smg executable, or why it cannot run here."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import sys
from pathlib import Path

import pytest

GATEWAY_VERSION = "1.13.0"


def _missing() -> str | None:
    smg = Path(sys.executable).with_name("smg")
    if not smg.is_file():
        return f"the smg gateway is not installed (pip install smg=={GATEWAY_VERSION})"
    for tool in ("ffmpeg", "ffprobe"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (apt-get install ffmpeg libturbojpeg0)"
    # Loaded at run time for Pillow-exact JPEG decoding; without it the
    # gateway falls back to another decoder and the pixels may differ.
    if ctypes.util.find_library("turbojpeg") is None:
        return "libturbojpeg is not installed (apt-get install libturbojpeg0)"
    return None


@pytest.fixture(scope="session")
def smg_exe() -> Path:
    why = _missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the gateway test: {why}")
        pytest.skip(f"{why}; CI installs it (.ci/run)")
    return Path(sys.executable).with_name("smg")
