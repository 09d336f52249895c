"""The ``MMCTL_*`` environment variables: one place that names and reads them.

Read on each call (not at import), so a test or a long-lived process sees
the environment as it is now.

======================  ==================================================
``MMCTL_TARGET``        the worker's ``host:port`` when ``--target`` is not given
``MMCTL_CACHE_DIR``     bundle cache (default ``$XDG_CACHE_HOME/mmctl``, else ``~/.cache/mmctl``)
``MMCTL_SHM_DIR``       the shared-memory folder (default ``/dev/shm``; for tests)
``MMCTL_DEBUG``         tracebacks for errors (any value but empty or ``0``)
======================  ==================================================
"""

from __future__ import annotations

import os
from pathlib import Path

TARGET = "MMCTL_TARGET"
CACHE_DIR = "MMCTL_CACHE_DIR"
SHM_DIR = "MMCTL_SHM_DIR"
DEBUG = "MMCTL_DEBUG"

DEFAULT_TARGET = "localhost:50051"


def target() -> str:
    return os.environ.get(TARGET) or DEFAULT_TARGET


def cache_dir() -> Path:
    if os.environ.get(CACHE_DIR):
        return Path(os.environ[CACHE_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mmctl"


def shm_dir() -> Path:
    return Path(os.environ.get(SHM_DIR, "/dev/shm"))


def debug() -> bool:
    return os.environ.get(DEBUG, "") not in ("", "0")
