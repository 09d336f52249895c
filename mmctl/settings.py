"""The ``MMCTL_*`` environment variables: one place that names and reads them.

Read on each call (not at import), so a test or a long-lived process sees
the environment as it is now.

======================  ==================================================
``MMCTL_TARGET``        the worker's ``host:port`` when ``--target`` is not given
``MMCTL_CACHE_DIR``     bundle cache (default ``$XDG_CACHE_HOME/mmctl``, else ``~/.cache/mmctl``)
``MMCTL_SHM_DIR``       the shared-memory folder (default ``/dev/shm``; for tests)
``MMCTL_DEBUG``         tracebacks for errors (any value but empty or ``0``)
``MMCTL_KEEPALIVE_S``   seconds of silence before a keepalive ping (default 330; see
                        ``client.channel.channel_options``)
``MMCTL_STOP_GRACE_S``  seconds a stopped command may spend cleaning up before it is
                        ended, exit 130 (default 10; ``mmctl.signals``)
======================  ==================================================
"""

from __future__ import annotations

import os
from pathlib import Path

TARGET = "MMCTL_TARGET"
CACHE_DIR = "MMCTL_CACHE_DIR"
SHM_DIR = "MMCTL_SHM_DIR"
DEBUG = "MMCTL_DEBUG"
KEEPALIVE_S = "MMCTL_KEEPALIVE_S"
STOP_GRACE_S = "MMCTL_STOP_GRACE_S"

DEFAULT_TARGET = "localhost:50051"
DEFAULT_KEEPALIVE_S = 330.0
DEFAULT_STOP_GRACE_S = 10.0


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


def keepalive_s() -> float:
    """``MMCTL_KEEPALIVE_S``: at least 1 s; a bad value is a usage error."""
    raw = os.environ.get(KEEPALIVE_S, "")
    if not raw:
        return DEFAULT_KEEPALIVE_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value >= 1:
        from mmctl.errors import UsageError

        raise UsageError(f"{KEEPALIVE_S} must be a number of seconds, at least 1; got {raw!r}")
    return value


def stop_grace_s() -> float:
    """``MMCTL_STOP_GRACE_S``; a value that is not a positive number means the default."""
    try:
        value = float(os.environ.get(STOP_GRACE_S, ""))
    except ValueError:
        return DEFAULT_STOP_GRACE_S
    return value if value > 0 else DEFAULT_STOP_GRACE_S
