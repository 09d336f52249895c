"""Importing transformers without its torch-less warnings on stderr."""

from __future__ import annotations

import os


def quiet_transformers() -> None:
    """Call before the first transformers import: mmctl never needs torch, so
    "PyTorch was not found" is noise on a user's stderr."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
