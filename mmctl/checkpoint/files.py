"""Read a model's JSON configs (config.json, preprocessor configs) from its source."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctl.checkpoint.source import ModelSource, from_dir
from mmctl.errors import InputError

CONFIG = "config.json"
PREPROCESSOR = "preprocessor_config.json"
VIDEO_PREPROCESSOR = "video_preprocessor_config.json"
PROCESSOR = "processor_config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"


@dataclass(frozen=True)
class ModelFiles:
    """The JSON configs a family's settings are read from (all optional)."""

    config: Mapping[str, Any] = field(default_factory=dict)
    preprocessor_config: Mapping[str, Any] = field(default_factory=dict)
    video_preprocessor_config: Mapping[str, Any] = field(default_factory=dict)
    #: transformers v5's combined file; its nested "image_processor" /
    #: "video_processor" win over the two files above.
    processor_config: Mapping[str, Any] = field(default_factory=dict)
    #: Read for its ``processor_class`` only (where transformers' AutoProcessor
    #: looks after the processor files).
    tokenizer_config: Mapping[str, Any] = field(default_factory=dict)


def read_json(path: Path | None) -> dict[str, Any]:
    """A JSON object file; ``{}`` when absent, :class:`InputError` when broken."""
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read {path}: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object")
    return data


def load_model_files(source: ModelSource | Path) -> ModelFiles:
    """The configs ``source`` holds; missing files are empty, broken ones an error."""
    if isinstance(source, Path):
        source = from_dir(source)
    files = ModelFiles(
        config=read_json(source.find(CONFIG)),
        preprocessor_config=read_json(source.find(PREPROCESSOR)),
        video_preprocessor_config=read_json(source.find(VIDEO_PREPROCESSOR)),
        processor_config=read_json(source.find(PROCESSOR)),
        tokenizer_config=read_json(source.find(TOKENIZER_CONFIG)),
    )
    if not (files.config or files.preprocessor_config or files.video_preprocessor_config):
        raise InputError(
            f"{source.label} holds none of {CONFIG}, {PREPROCESSOR}, {VIDEO_PREPROCESSOR}"
        )
    return files
