"""Read a model directory's JSON configs (config.json, preprocessor configs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmctl.errors import InputError
from mmctl.models.base import ModelFiles

CONFIG = "config.json"
PREPROCESSOR = "preprocessor_config.json"
VIDEO_PREPROCESSOR = "video_preprocessor_config.json"


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read {path}: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object")
    return data


def load_model_files(folder: Path) -> ModelFiles:
    """The configs found in ``folder``; missing files are empty, broken ones an error."""
    if not folder.is_dir():
        raise InputError(f"model directory {folder} does not exist or is not a directory")
    files = ModelFiles(
        config=_read_json(folder / CONFIG),
        preprocessor_config=_read_json(folder / PREPROCESSOR),
        video_preprocessor_config=_read_json(folder / VIDEO_PREPROCESSOR),
    )
    if not (files.config or files.preprocessor_config or files.video_preprocessor_config):
        raise InputError(f"{folder} holds none of {CONFIG}, {PREPROCESSOR}, {VIDEO_PREPROCESSOR}")
    return files
