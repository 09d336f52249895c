"""One model, ready to use: its files, family, vision settings, token ids, tokenizer."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctl.errors import InputError
from mmctl.models.base import ModelFiles, VisionOverrides
from mmctl.models.family import Family, Tokens, Vision
from mmctl.models.files import load_model_files
from mmctl.models.registry import forced_hint
from mmctl.models.registry import resolve as resolve_family
from mmctl.models.source import ModelSource
from mmctl.models.source import resolve as resolve_source

if TYPE_CHECKING:
    from mmctl.prompt.tokenizer import Tokenizer


@dataclass
class Model:
    source: ModelSource
    files: ModelFiles
    spec: Family
    #: The family's resolved processor settings (its own class: ``VisionParams`` for Qwen).
    params: Vision
    #: The family's special ids (its own class: ``TokenIds`` for Qwen).
    token_ids: Tokens
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
            params=self.params.overridden(overrides),
            vision_from={**self.vision_from, **overridden(overrides)},
            _tokenizer=self.tokenizer,
        )

    def vision_settings(self) -> dict[str, dict[str, Any]]:
        """Each resolved vision setting with where it came from (``info``, ``preprocess --json``)."""
        return {
            key: {"value": value, "from": self.vision_from.get(key, "")}
            for key, value in self.params.settings().items()
        }

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
    try:
        params, vision_from = spec.vision(files)
    except InputError as err:
        if not family or err.hint:
            raise
        raise InputError(err.message, hint=forced_hint(spec, files.config, source.label)) from None
    if overrides:
        params = params.overridden(overrides)
        vision_from.update(overridden(overrides))
    # The ids come from config.json, and where a family's config does not carry
    # them all (Llama 4's tile tokens) from the tokenizer, loaded only then.
    loaded: list[Tokenizer] = []

    def vocab(token: str) -> int | None:
        if not loaded:
            from mmctl.prompt.tokenizer import Tokenizer

            loaded.append(Tokenizer.load(source))
        return loaded[0].token_to_id(token)

    token_ids = spec.tokens(files.config, vocab)
    origin = "config.json" if files.config else "family defaults (no config.json)"
    return Model(
        source,
        files,
        spec,
        params,
        token_ids,
        origin,
        vision_from,
        _tokenizer=loaded[0] if loaded else None,
    )


def overridden(overrides: VisionOverrides) -> dict[str, str]:
    """The settings a user's options set, as origins."""
    names = {"min_pixels": "video_min_pixels", "max_pixels": "video_max_pixels"}
    return {names.get(key, key): f"--{key.replace('_', '-')}" for key in overrides.given()}
