"""A family's processor settings: declared once, resolved as transformers resolves them.

A worker builds its processors with ``from_pretrained`` on the model folder,
so mmctl must arrive at the same numbers from the same files, or its tensors
differ from the worker's. A family declares each setting as a field of its
frozen settings class (:class:`Settings`) with :func:`setting`: the file and
HF key it mirrors, the *published* checkpoint's value (the field's default,
what a folder without that file gets) and its :class:`Kind` (type and
bounds). The processor classes' own defaults — transformers' class
attributes — are :class:`HFClass` tables: a file that leaves a key out
(or sets it null) gets its class's value, as ``from_pretrained`` does.

One resolver (:meth:`Settings.resolve`) reads a folder:

* **which file** (:func:`processor_dict`, the one place this is decided):
  the image processor reads ``processor_config.json``'s nested
  ``"image_processor"`` if there is one, else ``preprocessor_config.json``;
  the video processor the nested ``"video_processor"``, else
  ``video_preprocessor_config.json``, else the image file (the common case
  for checkpoints older than transformers' video processors);
* **which class**: the file's ``image_processor_type`` /
  ``video_processor_type`` (``…Fast`` is the same class since transformers
  5) chooses the class defaults, among the classes the family reproduces —
  another class is refused;
* **every value validated** by its kind before any work: a zero patch size,
  a non-finite or zero std, a pinpoint of a billion pixels, a token id
  outside the vocabulary is one ``Error:`` line (exit 3), not a crash, a
  hang or a tensor of ``inf`` later (the same files may arrive from a
  worker's ``GetTokenizer`` bundle);
* **no key silently ignored**: a key of a processor file that no setting
  mirrors is named in a warning, unless the family says why it cannot change
  the tensors (:attr:`Settings.INERT`). config.json is read only for the keys
  declared (it holds the whole model's configuration).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar, Self

from mmctl.checkpoint.files import (
    CONFIG,
    PREPROCESSOR,
    PROCESSOR,
    TOKENIZER_CONFIG,
    VIDEO_PREPROCESSOR,
    ModelFiles,
)
from mmctl.errors import InputError, UsageError
from mmctl.models.kinds import Kind, TokenId, fail, is_int
from mmctl.preprocessing.tiles import Size


class File(StrEnum):
    """Where a setting lives."""

    IMAGE = "image processor"
    VIDEO = "video processor"
    PROCESSOR = "processor_config.json"
    CONFIG = "config.json"


# ---- declarations ------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """Where one setting lives: ``key`` in ``file`` (dotted for a nested key:
    ``vision_config.image_size``, ``size.shortest_edge``), or ``aliases``
    (config.json's ``attribute_map`` names, ``text_config.…``)."""

    file: File
    key: str
    kind: Kind
    #: The config class's default (config.json and processor_config.json keys;
    #: processor-file keys take their class's, :class:`HFClass`).
    default: Any = None
    aliases: tuple[str, ...] = ()
    #: Qwen's shared settings: the image processor must agree with the video one.
    also_image: bool = False
    #: Processor classes that have it (empty: every class); in another class's
    #: file the key is unknown and the published value stays.
    only_for: tuple[str, ...] = ()


def setting(
    file: File,
    key: str,
    published: Any,
    kind: Kind,
    *,
    default: Any = None,
    aliases: tuple[str, ...] = (),
    also_image: bool = False,
    only_for: tuple[str, ...] = (),
) -> Any:
    """A settings field: ``published`` is the checkpoint's value (the field's
    default, what a folder without ``file`` gets); the rest says where it is read."""
    return field(
        default=published,
        metadata={"setting": Setting(file, key, kind, default, aliases, also_image, only_for)},
    )


@dataclass(frozen=True)
class HFClass:
    """A transformers class (a processor, or a model config) and its defaults
    (its class attributes, or its ``__init__`` defaults), as raw file values
    (so they pass the same kinds). ``replaced_by``: keys that, when a file
    sets them, replace a dotted key (Qwen2-VL's ``min_pixels`` replacing
    ``size.shortest_edge``)."""

    name: str
    defaults: Mapping[str, Any]
    replaced_by: Mapping[str, str] = field(default_factory=dict)


#: Keys of processor files that cannot change the tensors vLLM's processor makes:
#: the classes' names (the class is checked), how HF returns tensors, and the
#: RGB conversion (vLLM's loaders always hand the processor RGB).
INERT_KEYS = frozenset(
    {
        "processor_class",
        "image_processor_type",
        "video_processor_type",
        "feature_extractor_type",
        "auto_map",
        "_processor_class",
        "do_convert_rgb",
        "input_data_format",
        "data_format",
        "return_tensors",
        "device",
        "disable_grouping",
        "image_processor_name",
        "video_processor_name",
    }
)


@dataclass(frozen=True)
class Source:
    """One processor file as the resolver reads it: its values, where they came
    from, and the class whose defaults fill the gaps (``None``: no file)."""

    values: Mapping[str, Any] | None
    where: str
    cls: HFClass | None = None


@dataclass(frozen=True)
class Resolved:
    """A family's settings read from a folder, each one's origin, and what the
    resolver could not take into account (unknown keys)."""

    settings: Any
    origins: dict[str, str]
    warnings: tuple[str, ...] = ()


#: The origin of a setting no model file holds: the worker's own (vLLM's
#: ``--media-io-kwargs``), which mmctl's flags stand in for.
SERVER_DEFAULT = "vLLM server default (no model file holds it)"

_MISSING = object()
#: A config key the family cannot do without (``Setting.default``): absent is an error.
REQUIRED: Any = object()


class Settings:
    """The base of a family's settings class (a frozen dataclass of :func:`setting` fields).

    Class attributes a family sets: ``IMAGE_CLASSES`` / ``VIDEO_CLASSES`` (the
    processor classes it reproduces, the first the default), ``CONFIG_CLASS``
    (its config class's defaults), ``INERT`` (keys of
    its processor files that do not change its tensors, beyond :data:`INERT_KEYS`),
    ``OVERRIDABLE`` (the settings a user's flags may change).
    """

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = ()
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = ()
    #: The config class whose defaults fill config.json's absent keys.
    CONFIG_CLASS: ClassVar[HFClass | None] = None
    INERT: ClassVar[frozenset[str]] = frozenset()
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ()
    #: ``--fps`` and friends name these settings (flag name -> field name).
    FLAG_NAMES: ClassVar[Mapping[str, str]] = {}
    #: A subclass's published values where they differ from its base's: they
    #: become its fields' defaults (:meth:`__init_subclass__`), so ``cls()`` is
    #: always the family's published checkpoint.
    PUBLISHED: ClassVar[Mapping[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Runs before @dataclass reads the class: each published value becomes the
        # inherited field redeclared with that default and the same declaration.
        super().__init_subclass__(**kwargs)
        published = cls.__dict__.get("PUBLISHED")
        if not published:
            return
        inherited = {
            f.name: f for base in cls.__mro__[1:] if is_dataclass(base) for f in fields(base)
        }
        annotations = dict(inspect.get_annotations(cls))
        for name, value in published.items():
            parent = inherited[name]
            setattr(cls, name, field(default=value, metadata=parent.metadata))
            annotations[name] = parent.type
        cls.__annotations__ = annotations

    # ---- reading a folder -------------------------------------------------------

    @classmethod
    def resolve(cls, files: ModelFiles, family: str) -> Resolved:
        """The settings a worker serving ``files`` has; :class:`InputError` naming the file and key of the first bad value."""
        sources = {
            File.IMAGE: _processor_source(files, "image", cls.IMAGE_CLASSES),
            File.VIDEO: _processor_source(files, "video", cls.VIDEO_CLASSES),
            File.PROCESSOR: Source(files.processor_config or None, PROCESSOR),
            File.CONFIG: Source(files.config or None, CONFIG, cls.CONFIG_CLASS),
        }
        published = f"published {family} checkpoint"
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        read: dict[File, set[str]] = {File.IMAGE: set(), File.VIDEO: set()}
        vocab = _vocab_size(files.config)
        for f in fields(cls):  # type: ignore[arg-type]
            decl: Setting | None = f.metadata.get("setting")
            if decl is None:  # a worker's option (the frames its loader keeps), not a file's
                origins[f.name] = SERVER_DEFAULT
                continue
            source = sources[decl.file]
            if source.values is None:
                origins[f.name] = f"{published} (no {decl.file.value} file)"
                continue
            if decl.only_for and (source.cls is None or source.cls.name not in decl.only_for):
                origins[f.name] = f"mmctl's (not a {source.cls.name if source.cls else ''} setting)"
                continue
            value, origin = _read(decl, source, read.get(decl.file))
            if decl.also_image and sources[File.IMAGE].values is not None:
                image = replace(decl, file=File.IMAGE)
                other, other_origin = _read(image, sources[File.IMAGE], read[File.IMAGE])
                if other != value:
                    raise InputError(
                        f"the image processor ({other_origin}) and the video processor "
                        f"({origin}) disagree on {decl.key}: {_shown(other)} vs {_shown(value)}",
                        hint="mmctl keeps one value for both; fix the model's processor configs",
                    )
            if value is None:  # the class has none (Qwen2-VL's video fps): mmctl's
                value = f.default
                origin = (
                    f"mmctl default ({(source.cls.name if source.cls else source.where)} has none)"
                )
            if isinstance(decl.kind, TokenId) and vocab is not None and value >= vocab:
                raise InputError(
                    f"{origin}: {decl.key} is {value}, outside the vocabulary of "
                    f"{vocab:,} tokens (config.json vocab_size)"
                )
            values[f.name], origins[f.name] = value, origin
        image_file, video_file = sources[File.IMAGE], sources[File.VIDEO]
        if video_file.values is not None and video_file.values is image_file.values:
            read[File.IMAGE] |= read[File.VIDEO]  # one file, both processors read it
            video_file = Source(None, video_file.where)
        warnings = (
            *_unknown_keys(image_file, read[File.IMAGE], cls.INERT, family),
            *_unknown_keys(video_file, read[File.VIDEO], cls.INERT, family),
        )
        try:
            settings = cls(**cls.adjust(values))
        except UsageError as err:
            raise InputError(f"model processor config: {err.message}") from None
        settings.check()
        return Resolved(settings, origins, warnings)

    @classmethod
    def adjust(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The resolved values before they are set, for a rule between them that
        transformers applies as it builds the class (a family's own)."""
        return values

    def check(self) -> None:
        """Rules between settings (a family adds its own); :class:`InputError`."""

    # ---- a user's flags ---------------------------------------------------------

    def overridden(self, overrides: VisionOverrides) -> Self:
        """A copy with a user's ``--fps``/``--num-frames``/… applied; a flag the
        family's processor has no use for is a :class:`UsageError`."""
        given = overrides.changes()
        names = {k: self.FLAG_NAMES.get(k, k) for k in given}
        refused = [k for k, name in names.items() if name not in self.OVERRIDABLE]
        if refused:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in refused)
            raise UsageError(
                f"{flags}: this model's processor has no such setting",
                hint="its settings come from the model folder's processor configs",
            )
        if not given:
            return self
        changed = replace(self, **{names[k]: v for k, v in given.items()})  # type: ignore[type-var]
        changed.check_overrides()
        return changed

    def check_overrides(self) -> None:
        """Rules a user's values must keep against the model's (:class:`UsageError`)."""

    def settings(self) -> dict[str, Any]:
        """Every setting by name, as plain JSON values (``info``, ``preprocess --json``)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


def check_vocab(ids: object, tokens: Mapping[str, str], vocab: Callable[[str], int | None]) -> None:
    """For the ids vLLM takes from the tokenizer rather than config.json (its
    prompt targets): each config.json key of ``tokens`` on ``ids`` must be its
    token's id in the tokenizer, or vLLM's own start-up profiling (config ids,
    decoded) finds no placeholder."""
    for key, token in tokens.items():
        found, want = vocab(token), getattr(ids, key)
        if found != want:
            held = f"has {token} at {found}" if found is not None else f"has no {token}"
            raise InputError(
                f"config.json's {key} is {want} but the tokenizer {held}; vLLM reads that "
                "token from the tokenizer and the rest from config.json, so it cannot serve "
                "this folder"
            )


def processor_dict(files: ModelFiles, kind: str) -> tuple[Mapping[str, Any] | None, str]:
    """The dict transformers builds the ``kind`` ("image"/"video") processor from,
    and its file (``None`` when the folder has none)."""
    nested = files.processor_config.get(f"{kind}_processor")
    if isinstance(nested, Mapping):
        return nested, f'{PROCESSOR} "{kind}_processor"'
    if kind == "video" and files.video_preprocessor_config:
        return files.video_preprocessor_config, VIDEO_PREPROCESSOR
    if files.preprocessor_config:
        return files.preprocessor_config, PREPROCESSOR
    return None, ""


def processor_class(files: ModelFiles) -> tuple[Any, str]:
    """The ``processor_class`` transformers' ``AutoProcessor`` builds for ``files``
    and the file naming it: processor_config.json, then preprocessor_config.json
    (video_preprocessor_config.json where there is none), then
    tokenizer_config.json, then config.json; ``(None, "")`` when none does (the
    model type's class). The raw value: the family checks it."""
    image = (
        (files.preprocessor_config, PREPROCESSOR)
        if files.preprocessor_config
        else (files.video_preprocessor_config, VIDEO_PREPROCESSOR)
    )
    for values, where in (
        (files.processor_config, PROCESSOR),
        image,
        (files.tokenizer_config, TOKENIZER_CONFIG),
        (files.config, CONFIG),
    ):
        found = values.get("processor_class")
        if found is not None:
            return found, where
    return None, ""


def _processor_source(files: ModelFiles, kind: str, classes: Sequence[HFClass]) -> Source:
    values, where = processor_dict(files, kind)
    if values is None or not classes:
        return Source(values if classes else None, where)
    key = f"{kind}_processor_type"
    named = values.get(key)
    if named is None:
        return Source(values, where, classes[0])
    if not isinstance(named, str):
        raise fail(f"{where}: {key}", "a class name", named)
    # transformers 5 maps the v4 "…Fast" names onto the one class.
    for cls in classes:
        if named.removesuffix("Fast") == cls.name:
            return Source(values, where, cls)
    expected = ", ".join(c.name for c in classes)
    raise InputError(f"{where}: {key} {named!r} is not one mmctl reproduces here ({expected})")


def _lookup(values: Mapping[str, Any], key: str) -> Any:
    """A dotted key's value; ``_MISSING`` when a parent object is there without
    it (HF replaces a dict whole: the class default does not fill it in)."""
    head, _, rest = key.partition(".")
    if head not in values or values[head] is None:
        return None
    value = values[head]
    if not rest:
        return value
    if not isinstance(value, Mapping):
        raise fail(head, "an object", value)
    found = _lookup(value, rest)
    return _MISSING if found is None else found


def _read(decl: Setting, source: Source, read: set[str] | None) -> tuple[Any, str]:
    """One setting's value from ``source``, and its origin."""
    assert source.values is not None, "the caller handles an absent file"
    cls = source.cls
    keys = (decl.key, *decl.aliases)
    if read is not None:
        read.update(k.partition(".")[0] for k in keys)
    if decl.key.endswith("_processor_type") and cls is not None:  # chosen by _processor_source
        return cls.name, source.where if decl.key in source.values else f"{cls.name} default"
    replacement = cls.replaced_by.get(decl.key) if cls is not None else None
    if replacement is not None:
        if read is not None:
            read.add(replacement)
        found = source.values.get(replacement)
        if found is not None:
            return decl.kind.parse(found, f"{source.where}: {replacement}"), source.where
    for key in keys:
        try:
            found = _lookup(source.values, key)
        except InputError as err:
            raise InputError(f"{source.where}: {err.message}") from None
        if found is _MISSING and decl.file is File.CONFIG:
            found = None  # a sub-config's absent key takes its class's default
        if found is _MISSING:
            parent = key.rpartition(".")[0]
            raise InputError(
                f"{source.where}: {parent} lacks {key.rpartition('.')[2]} (got "
                f"{_shown(_lookup(source.values, parent))}); transformers' "
                f"{cls.name if cls else 'processor'} refuses to process with it too",
                hint=f"give {parent} every key it needs",
            )
        if found is not None:
            return decl.kind.parse(found, f"{source.where}: {key}"), source.where
    if decl.default is REQUIRED:
        raise InputError(f"{source.where} has no {decl.key}")
    default = _class_default(cls, decl.key) if cls is not None else None
    if default is not None:
        origin = f"{cls.name} default" if cls is not None else ""
    else:
        default, origin = decl.default, f"{source.where} default (key absent)"
    if default is None:
        return None, origin
    return decl.kind.parse(default, f"{origin}: {decl.key}"), origin


def _class_default(cls: HFClass, key: str) -> Any:
    found = _lookup(cls.defaults, key)
    return None if found is _MISSING else found


def _unknown_keys(source: Source, read: set[str], inert: frozenset[str], family: str) -> list[str]:
    if source.values is None:
        return []
    known = read | INERT_KEYS | inert
    if source.cls is not None:
        known |= set(source.cls.replaced_by.values())
    return [
        f"{source.where}: {key!r} is not a setting mmctl reproduces for {family}; ignored "
        "(if it changes the worker's processing, mmctl's tensors will differ)"
        for key in source.values
        if key not in known
    ]


def _vocab_size(config: Mapping[str, Any]) -> int | None:
    for where in (config, config.get("text_config")):
        if isinstance(where, Mapping) and is_int(where.get("vocab_size")):
            size = int(where["vocab_size"])
            return size if size > 0 else None
    return None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return str(list(value))
    return repr(value) if isinstance(value, str) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Size):
        return {k: v for k, v in vars(value).items() if v is not None}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class VisionOverrides:
    """What a user changes of a model's sampling and pixel budget (``None`` keeps it).

    Checked on construction, before any file is read or worker contacted;
    whether the result fits the model's own values (``min_frames`` against
    its ``max_frames``) is checked again when they meet
    (:meth:`Settings.overridden`).
    """

    fps: float | None = None
    num_frames: int | None = None
    min_frames: int | None = None
    max_frames: int | None = None
    #: Video: the whole clip's budget (frames × height × width), in pixels.
    min_pixels: int | None = None
    max_pixels: int | None = None

    def __post_init__(self) -> None:
        if self.fps is not None and not self.fps > 0:
            raise UsageError(f"fps must be positive, got {self.fps}")
        for name in ("num_frames", "min_frames", "max_frames", "min_pixels", "max_pixels"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name.replace('_', '-')} must be at least 1, got {value}")
        for low, high in (("min_frames", "max_frames"), ("min_pixels", "max_pixels")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise UsageError(
                    f"{low.replace('_', '-')} ({lo}) is larger than {high.replace('_', '-')} ({hi})"
                )

    def given(self) -> list[str]:
        """The names of the values that are set."""
        return [k for k, v in vars(self).items() if v is not None]

    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}
