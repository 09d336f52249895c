"""The model files on every Ray node, shipped once per node.

The driver puts the files into Ray's object store once (one object, its
content digest beside it). A process on a node whose own copy of the model
folder exists uses it; elsewhere the first process of the node fetches the
object (Ray moves it to that node's object store once; the node's other
processes map the same copy) and writes it to
``$TMPDIR/mmctl-model-<digest>/``, renamed into place whole, so the node's
other processes find it there and fetch nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from mmctl.checkpoint.source import ModelSource
from mmctl.run_batch.work import Settings


def model_files(settings: Settings) -> tuple[dict[str, bytes], str]:
    """The model files' bytes by name, and their digest."""
    files = {name: path.read_bytes() for name, path in settings.source.files().items()}
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return files, digest.hexdigest()


def node_folder(digest: str) -> Path:
    return Path(tempfile.gettempdir()) / f"mmctl-model-{digest[:16]}"


def node_settings(settings: Settings, files: Any, digest: str) -> Settings:
    """``settings`` usable on this node (see the module docstring); ``files``
    is the object ref (or, in tests, the bytes by name)."""
    if all(folder.is_dir() for folder in settings.source.folders):
        return settings
    folder = node_folder(digest)
    if not folder.is_dir():
        data = _fetch(files)
        part = Path(tempfile.mkdtemp(prefix=folder.name + ".part-", dir=folder.parent))
        for name, blob in data.items():
            (part / name).write_bytes(blob)
        try:
            os.rename(part, folder)  # atomic; another process of this node may have won
        except OSError:
            shutil.rmtree(part, ignore_errors=True)
    return replace(settings, source=ModelSource(settings.source.label, (folder,)))


def _fetch(files: Any) -> dict[str, bytes]:
    if isinstance(files, dict):
        return files
    import ray

    data: dict[str, bytes] = ray.get(files)
    return data
