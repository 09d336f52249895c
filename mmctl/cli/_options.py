"""Option aliases shared by several commands (typing.Annotated, typer's public API)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ModelDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-dir",
        help="Model folder: config.json and preprocessor configs override the family defaults.",
        show_default=False,
    ),
]
FamilyOpt = Annotated[
    str | None,
    typer.Option(
        "--family",
        help="Model family (qwen3-vl, qwen2.5-vl, …); default: from config.json, else qwen3-vl.",
        show_default=False,
    ),
]
