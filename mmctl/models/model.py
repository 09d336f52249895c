"""One model, ready to use: its files, family, vision parameters, token ids, tokenizer."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctl.errors import InputError
from mmctl.models.base import (
    ModelFiles,
    ModelSpec,
    TokenIds,
    VisionOverrides,
    VisionParams,
)
from mmctl.models.files import load_model_files
from mmctl.models.processor_config import resolve_params, settings
from mmctl.models.registry import resolve as resolve_family
from mmctl.models.source import ModelSource
from mmctl.models.source import resolve as resolve_source

if TYPE_CHECKING:
    from mmctl.prompt.tokenizer import Tokenizer

TOKEN_KEYS = ("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id")


@dataclass
class Model:
    source: ModelSource
    files: ModelFiles
    spec: ModelSpec
    params: VisionParams
    token_ids: TokenIds
    token_ids_from: str
    #: Where each vision setting came from (``processor_config.settings`` keys).
    vision_from: dict[str, str] = field(default_factory=dict)
    _tokenizer: Any = field(default=None, repr=False)

    @cached_property
    def tokenizer(self) -> Tokenizer:
        from mmctl.prompt.tokenizer import Tokenizer

        return self._tokenizer or Tokenizer.load(self.source)

    def with_vision(self, overrides: VisionOverrides) -> Model:
        """The same model (tokenizer included, loaded once) with other vision values."""
        return replace(
            self,
            params=self.params.with_overrides(**overrides.changes()),
            vision_from={**self.vision_from, **overridden(overrides)},
            _tokenizer=self.tokenizer,
        )

    def vision_settings(self) -> dict[str, dict[str, Any]]:
        """Each resolved vision setting with where it came from (``info``, ``preprocess --json``)."""
        return {
            key: {"value": value, "from": self.vision_from.get(key, "")}
            for key, value in settings(self.params).items()
        }

    @property
    def merge_size(self) -> int:
        return self.params.merge_size

    @cached_property
    def eos_token_ids(self) -> list[int]:
        """From config.json / generation_config.json (ints or lists); read once
        (the stub worker asks on every request)."""
        ids: list[int] = []
        generation = _read(self.source.find("generation_config.json"))
        for cfg in (generation, self.files.config):
            value = cfg.get("eos_token_id")
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, int) and v not in ids:
                    ids.append(v)
        return ids


def _read(path: Path | None) -> dict:
    from mmctl.models.files import read_json

    return read_json(path)


def token_ids_from_config(config: dict, defaults: TokenIds) -> tuple[TokenIds, str]:
    """The vision token ids of ``config.json``; the family's own when there is none.

    A config.json that names some of them but not all is an error: guessing
    the rest would silently build a prompt the model cannot read.
    """
    if not config:
        return defaults, "family defaults (no config.json)"
    source = config if any(k in config for k in TOKEN_KEYS) else config.get("text_config") or {}
    missing = [k for k in TOKEN_KEYS if not isinstance(source.get(k), int)]
    if missing:
        raise InputError(
            f"config.json lacks {', '.join(missing)}",
            hint="pass --family to use the family's published ids only if you are sure they match",
        )
    return TokenIds(**{k: int(source[k]) for k in TOKEN_KEYS}), "config.json"


def load_model(
    *,
    model_dir: Path | None = None,
    bundle: Path | None = None,
    source: ModelSource | None = None,
    family: str | None = None,
    overrides: VisionOverrides | None = None,
) -> Model:
    """Model files from ``source`` (or ``--model-dir`` / ``--bundle`` / built-in)."""
    source = source or resolve_source(model_dir, bundle)
    files = load_model_files(source)
    spec = resolve_family(family, files.config)
    if files.config and not spec.matches(files.config):
        # --family forced over another family's files: their vision sizes
        # (P=16 vs 14, mean/std) would be wrong for it; keep the family's own.
        params = spec.params
        vision_from = {
            key: f"{spec.name} published default (--family over other files)"
            for key in settings(params)
        }
    else:
        params, vision_from = resolve_params(spec, files)
    if overrides:
        params = params.with_overrides(**overrides.changes())
        vision_from.update(overridden(overrides))
    token_ids, origin = token_ids_from_config(dict(files.config), spec.token_ids)
    return Model(source, files, spec, params, token_ids, origin, vision_from)


def overridden(overrides: VisionOverrides) -> dict[str, str]:
    """The settings a user's options set, as origins."""
    names = {"min_pixels": "video_min_pixels", "max_pixels": "video_max_pixels"}
    return {names.get(key, key): f"--{key.replace('_', '-')}" for key in overrides.given()}
