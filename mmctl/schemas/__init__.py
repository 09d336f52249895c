"""The documents mmctl's commands print with ``--json``: a public interface.

Each document names its schema and version in its first key, ``"schema":
"mmctl.<name>/<version>"``; the JSON Schema of each is the file
``<name>.json`` beside this module (shipped with the package). The rule
(CHANGELOG.md): a key may be added in a version; removing or renaming one,
or changing what its value means, is a new version, and the changelog says
what changed. Standard library only: the CLI imports this at start-up.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: Each document's schema version. preprocess is 2: 1 had
#: ``params.video_budget``, which became ``video_min_pixels`` /
#: ``video_max_pixels`` (CHANGELOG.md, 0.x).
VERSIONS: dict[str, int] = {
    "preprocess": 2,
    "inspect-tokens": 1,
    "inspect-tokens-sound": 1,
    "build": 1,
    "build-refs": 1,
    "send": 1,
    "send-comparison": 1,
    "demo": 1,
    "bench": 1,
    "batch": 1,
    "health": 1,
    "info": 1,
    "shm-gc": 1,
    "stub-worker": 1,
    "error": 1,
}


def schema_id(name: str) -> str:
    """``mmctl.<name>/<version>``: the value of a document's ``schema`` key."""
    return f"mmctl.{name}/{VERSIONS[name]}"


def named(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its ``schema`` key first."""
    return {"schema": schema_id(name), **{k: v for k, v in doc.items() if k != "schema"}}


def load(name: str) -> dict[str, Any]:
    """The JSON Schema of document ``name``."""
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
