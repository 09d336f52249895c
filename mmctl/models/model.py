"""One model, ready to use: its files, family, settings, token ids, tokenizer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from mmctl.checkpoint.files import ModelFiles, load_model_files, read_json
from mmctl.checkpoint.source import ModelSource
from mmctl.checkpoint.source import resolve as resolve_source
from mmctl.errors import InputError, UnknownFamily, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.family import Family
from mmctl.models.registry import forced_mismatch, pruning_model_types
from mmctl.models.registry import resolve as resolve_family
from mmctl.models.settings import Settings, VisionOverrides
from mmctl.prompt.chat import ChatFormat
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.values.pruning import NO_PRUNING, VideoPruning
from mmctl.values.tokens import Tokens


@dataclass
class Model:
    source: ModelSource
    files: ModelFiles
    spec: Family
    #: The family's resolved settings (its own :class:`Settings` class).
    params: Any
    #: The family's special ids (its own class: ``TokenIds`` for Qwen).
    token_ids: Tokens
    token_ids_from: str
    #: Where each setting came from (``Settings.settings`` keys).
    vision_from: dict[str, str] = field(default_factory=dict)
    #: What the settings resolver could not take into account (keys it does not
    #: know), for the commands to show once.
    warnings: tuple[str, ...] = ()
    #: The worker's video pruning, which decides how many tokens a video's
    #: prompt holds (:meth:`with_pruning`).
    pruning: VideoPruning = NO_PRUNING
    _tokenizer: Any = field(default=None, repr=False)
    #: Seconds :func:`load_model` spent loading the tokenizer for token ids the
    #: config does not carry (Gemma 4, Llama 4, InternVL, GLM): the set-up's
    #: "tokenizer load", not its "model files".
    tokenizer_load_s: float = 0.0

    @cached_property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer or Tokenizer.load(self.source)

    @property
    def name(self) -> str:
        """The family's name (a :class:`WorkerModel`'s: its ``model_type``)."""
        return self.spec.name

    @property
    def chat(self) -> ChatFormat:
        """The family's chat format, for :func:`mmctl.prompt.chat.render`."""
        return _Chat(self)

    def as_worker(self, why: str) -> WorkerModel:
        """The model as a worker-processed request reads it: its files, tokenizer
        (loaded once) and own chat template — for a request the family's pixels
        cannot carry (sound; ``why`` says so where client processing is asked)."""
        model_type = str(self.files.config.get("model_type") or self.spec.name)
        unknown = UnknownFamily(why, model_type=model_type)
        return WorkerModel(self.source, self.files, unknown, _tokenizer=self.tokenizer)

    def with_vision(self, overrides: VisionOverrides) -> Model:
        """The same model (tokenizer included, loaded once) with other vision values."""
        return replace(
            self,
            params=self.params.overridden(overrides),
            vision_from={**self.vision_from, **overridden(overrides, self.params)},
            _tokenizer=self.tokenizer,
        )

    @property
    def model_type(self) -> str:
        return str(self.files.config.get("model_type") or "")

    def with_pruning(self, pruning: VideoPruning | None) -> Model:
        """The same model laid out for a worker that prunes video as ``pruning`` says;
        refused where vLLM's model for it cannot (its engine would not start)."""
        pruning = pruning or NO_PRUNING
        if pruning == self.pruning:
            return self
        if pruning.enabled:
            methods = self.spec.pruning_methods(self.model_type)
            if not methods:
                pruners = ", ".join(pruning_model_types())
                raise UsageError(
                    f"vLLM's {self.model_type or self.spec.name} model does not prune video "
                    f"(--video-pruning-rate {pruning.rate:g}); it serves the whole video",
                    hint=f"vLLM prunes video for {pruners}; leave the rate out (or 0)",
                )
            if pruning.method not in methods:
                raise UsageError(
                    f"vLLM's {self.model_type} model does not implement "
                    f"--video-pruning-method {pruning.method.value} (it has "
                    f"{', '.join(m.value for m in methods)}); its engine refuses to start with it"
                )
        # A tokenizer already loaded comes along; none is loaded for this (pool
        # processes that only preprocess never load one).
        return replace(
            self, pruning=pruning, _tokenizer=self.__dict__.get("tokenizer", self._tokenizer)
        )

    def vision_settings(self) -> dict[str, dict[str, Any]]:
        """Each resolved setting with where it came from (``info``, ``preprocess --json``)."""
        return {
            key: {"value": value, "from": self.vision_from.get(key, "")}
            for key, value in self.params.settings().items()
        }

    @cached_property
    def eos_token_ids(self) -> list[int]:
        """Read once (the stub worker asks on every request)."""
        return eos_ids(self.source, self.files)


def with_pruning(model: Model | WorkerModel, pruning: VideoPruning | None) -> Model | WorkerModel:
    """A family's model laid out for ``pruning``; a worker-processed one as it is
    (the worker lays its own prompt out, pruning included)."""
    return model.with_pruning(pruning) if isinstance(model, Model) else model


def eos_ids(source: ModelSource, files: ModelFiles) -> list[int]:
    """From config.json / generation_config.json (ints or lists)."""
    ids: list[int] = []
    generation = read_json(source.find("generation_config.json"))
    for cfg in (generation, files.config):
        value = cfg.get("eos_token_id")
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and v not in ids:
                ids.append(v)
    return ids


@dataclass
class WorkerModel:
    """A model no mmctl family handles, as far as a worker-processed request
    needs it: its files, tokenizer and own chat template (which alone knows
    where its media placeholders go); the worker expands and preprocesses."""

    source: ModelSource
    files: ModelFiles
    #: Why no family handles it (raised where mmctl's own preprocessing is asked for).
    unknown: UnknownFamily
    _tokenizer: Any = field(default=None, repr=False)

    @property
    def model_type(self) -> str:
        return self.unknown.model_type

    @property
    def name(self) -> str:
        return self.model_type

    @property
    def warnings(self) -> tuple[str, ...]:
        return ()  # no family settings were resolved

    @cached_property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer or Tokenizer.load(self.source)

    @property
    def chat(self) -> ChatFormat:
        return _OwnTemplate(self)

    @cached_property
    def eos_token_ids(self) -> list[int]:
        return eos_ids(self.source, self.files)


@dataclass(frozen=True)
class _OwnTemplate:
    """The model's own chat template, or nothing: mmctl knows no placeholder
    text or chat format of a family it does not have."""

    model: WorkerModel

    @property
    def name(self) -> str:
        return self.model.model_type

    @property
    def default_system(self) -> str | None:
        return None

    def knows_media(self, template: str) -> bool:
        return True  # the model's own template writes its own placeholders

    def placeholder_text(self, kind: MediaKind) -> str:
        return ""  # read only without a chat format, which is refused

    def chat_format(self, body: str, system: str | None) -> str:
        raise InputError(
            f"{self.model.source.label} has no chat template, and mmctl does not know where a "
            f"{self.model.model_type} prompt puts its media",
            hint="pass the model's folder with its chat template (--model-dir DIR)",
        )


#: What a worker-processed request reads of a model, family or not.
PromptModel = Model | WorkerModel


@dataclass(frozen=True)
class _Chat:
    """A model's family prompt part, bound to the model (:class:`ChatFormat`)."""

    model: Model

    @property
    def name(self) -> str:
        return self.model.spec.name

    @property
    def default_system(self) -> str | None:
        return self.model.spec.prompt.default_system

    def knows_media(self, template: str) -> bool:
        return self.model.spec.prompt.knows_media(template)

    def placeholder_text(self, kind: MediaKind) -> str:
        return self.model.spec.prompt.placeholder_text(kind, self.model)

    def chat_format(self, body: str, system: str | None) -> str:
        return self.model.spec.prompt.chat_format(body, system)


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
    # The ids come from config.json, and where a family's config does not carry
    # them all (Llama 4's tile tokens) from the tokenizer, loaded only then.
    loaded: list[Tokenizer] = []
    load_s = 0.0

    def vocab(token: str) -> int | None:
        nonlocal load_s
        if not loaded:
            begin = time.perf_counter()
            loaded.append(Tokenizer.load(source))
            load_s = time.perf_counter() - begin
        return loaded[0].token_to_id(token)

    try:
        params, vision_from, warnings = _settings(spec, files)
        token_ids = spec.tokens(files.config, vocab)
    except InputError as err:
        if not family or spec.matches(files.config):
            raise  # the files are this family's: the error is about them
        message, hint = forced_mismatch(spec, files.config, source.label, err.message)
        raise InputError(message, hint=hint) from None
    if overrides:
        params = params.overridden(overrides)
        vision_from.update(overridden(overrides, params))
    origin = "config.json" if files.config else "family defaults (no config.json)"
    if loaded:  # the family's reader asked the tokenizer for some of them
        origin += " and the tokenizer"
    return Model(
        source,
        files,
        spec,
        params,
        token_ids,
        origin,
        vision_from,
        warnings,
        _tokenizer=loaded[0] if loaded else None,
        tokenizer_load_s=load_s,
    )


def load_any(
    *, source: ModelSource, family: str | None = None, overrides: VisionOverrides | None = None
) -> Model | WorkerModel:
    """``source``'s model with its family (:func:`load_model`), or, where no
    family handles it, what its worker-processed requests need."""
    try:
        return load_model(source=source, family=family, overrides=overrides)
    except UnknownFamily as err:
        return WorkerModel(source, load_model_files(source), err)


def _settings(spec: Family, files: ModelFiles) -> tuple[Settings, dict[str, str], tuple[str, ...]]:
    """The family's settings from ``files``. A family forced (``--family``) over
    another family's files keeps its published values: the other's processor
    files describe another processor."""
    if files.config and not spec.matches(files.config):
        published = spec.settings()
        origin = f"{spec.name} published default (--family over other files)"
        return published, dict.fromkeys(published.settings(), origin), ()
    resolved = spec.settings.resolve(files, spec.name)
    return resolved.settings, resolved.origins, resolved.warnings


def overridden(overrides: VisionOverrides, settings: Settings) -> dict[str, str]:
    """The settings a user's options set, as origins (by setting name)."""
    return {
        settings.FLAG_NAMES.get(key, key): f"--{key.replace('_', '-')}" for key in overrides.given()
    }
