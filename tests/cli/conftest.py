"""What the CLI tests that run real processes share."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment of a ``python -m mmctl`` process: none of this shell's
    ``MMCTL_*``/``GRPC_*`` settings, a cache folder of the test's own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MMCTL_", "GRPC_"))}
    environ["MMCTL_CACHE_DIR"] = str(tmp_path / "cache")
    return environ
