"""Result files: written to exactly the path asked for, atomically.

A command that prints "saved x.txt" has written ``x.txt`` — not ``x.txt.npz``
(numpy's habit) — and a reader never sees half a file: the bytes go to a
sibling ``.part`` file that replaces the target once complete.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from mmctl.errors import InputError


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Run ``write(file)`` into ``path``'s sibling ``.part`` file, then rename it over ``path``."""
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    part = path.with_name(path.name + ".part")
    try:
        with part.open("wb") as f:
            write(f)
        os.replace(part, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            part.unlink()
        raise InputError(f"cannot write {path}: {err.strerror or err}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    return path
