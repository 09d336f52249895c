"""How one request is made and sent: typed options, checked once, before any network call.

:class:`SendOptions` holds everything about a request except the worker and
its model files (those belong to the :class:`~mmctl.Client`). Values are the
library's types — enums from :mod:`mmctl.choices`, :class:`Sampling`,
:class:`VisionOverrides` — and plain strings for the enums are accepted and
converted, so ``transport="shm"`` and ``Transport.SHM`` are the same request.
Every check that needs no worker runs here (and in those classes), so the CLI,
the Python API and the tests share one validation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from mmctl.choices import (
    SHM_MIN_BYTES,
    MediaRef,
    PixelFormat,
    Processing,
    Transport,
    checked_prompt,
)
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.settings import VisionOverrides
from mmctl.request.build import Sampling

#: Tensors smaller than this stay inline even when the transport is shm
#: (the smg router's rule: below it a file costs more than it saves).


@dataclass(frozen=True)
class SendOptions:
    """Everything about one request but the worker and its model files.

    ``None`` means "not given": a new request gets the default (the prompt
    :data:`~mmctl.choices.DEFAULT_PROMPT`, streaming, the chat format, the
    pixel dtype the worker expects), a replayed one keeps what it recorded.
    """

    prompt: str | None = None
    transport: Transport = Transport.AUTO
    shm_min_bytes: int = SHM_MIN_BYTES
    pixel_dtype: PixelFormat | None = None
    processing: Processing = Processing.AUTO
    media_ref: MediaRef = MediaRef.DATA
    sampling: Sampling = field(default_factory=Sampling)
    stream: bool | None = None
    timeout: float | None = None  # seconds, for Generate; None: the client's
    request_id: str | None = None
    system: str | None = None
    chat: bool | None = None
    allow_special_tokens: bool = False
    strict: bool = False
    skip_checks: bool = False
    #: Over the client's own vision values, for this request only.
    vision: VisionOverrides = field(default_factory=VisionOverrides)
    #: Each video's own sound as an audio item after it (:func:`media_inputs`).
    soundtrack: bool = False

    def __post_init__(self) -> None:
        if self.prompt is not None:
            checked_prompt(self.prompt)
        for name, kind in (
            ("transport", Transport),
            ("pixel_dtype", PixelFormat),
            ("processing", Processing),
            ("media_ref", MediaRef),
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                object.__setattr__(self, name, _choice(kind, value, name))
        if self.timeout is not None and not self.timeout > 0:
            raise UsageError(f"--timeout must be positive, got {self.timeout}")
        if self.shm_min_bytes < 0:
            raise UsageError(f"--shm-min-bytes must not be negative, got {self.shm_min_bytes}")
        if self.processing is Processing.CLIENT and self.media_ref is not MediaRef.DATA:
            raise UsageError("--media-ref applies only with --processing worker (or auto)")
        if self.processing is Processing.CLIENT and self.soundtrack:
            from mmctl.request.refs import SOUND_BY_WORKER

            raise UsageError(
                f"--soundtrack with --processing client: {SOUND_BY_WORKER}",
                hint="drop --processing client (sound goes as media_refs)",
            )
        if self.processing is Processing.WORKER:
            self.refuse_client_side("--processing worker leaves preprocessing to the worker")

    @classmethod
    def of(cls, **options: Any) -> SendOptions:
        """Options from keywords, flat: ``SendOptions`` fields, the sampling
        values (``max_tokens=8``) and the vision values (``fps=1``) alike."""
        own = {f.name for f in fields(cls)}
        sampling = {f.name for f in fields(Sampling)}
        vision = {f.name for f in fields(VisionOverrides)}
        unknown = set(options) - own - sampling - vision
        if unknown:
            raise TypeError(f"unknown send option(s): {', '.join(sorted(unknown))}")
        mine = {k: v for k, v in options.items() if k in own}
        if "stop" in options and isinstance(options["stop"], str):
            options["stop"] = (options["stop"],)
        picked = {k: v for k, v in options.items() if k in sampling}
        if picked:
            mine["sampling"] = Sampling(**{**vars(mine.get("sampling", Sampling())), **picked})
        picked = {k: v for k, v in options.items() if k in vision}
        if picked:
            base = vars(mine.get("vision", VisionOverrides()))
            mine["vision"] = VisionOverrides(**{**base, **picked})
        return cls(**mine)

    def refuse_client_side(self, why: str) -> None:
        """Refuse the options only mmctl's own preprocessing reads (``why``: who preprocesses)."""
        shaping = _flags(self.vision.given())
        shaping += ["--pixel-dtype"] if self.pixel_dtype is not None else []
        shaping += ["--strict"] if self.strict else []
        refuse(why, shaping)

    def shaping_a_request(self) -> list[str]:
        """The options given that shape a new request (a recorded one is fixed)."""
        given = [
            ("--prompt", self.prompt is not None),
            ("--system", self.system is not None),
            ("--chat/--no-chat", self.chat is not None),
            ("--allow-special-tokens", self.allow_special_tokens),
            ("--pixel-dtype", self.pixel_dtype is not None),
            ("--processing worker", self.processing is Processing.WORKER),
            ("--strict", self.strict),
            ("--soundtrack", self.soundtrack),
        ]
        return [name for name, set_ in given if set_] + _flags(self.vision.given())

    def but(self, **changes: Any) -> SendOptions:
        return replace(self, **changes)

    def refs_plan(self, refs: Sequence[tuple[MediaKind, str]], model: Any) -> Any:
        """The worker-processed request of ``refs`` with these options' prompt, chat
        and sampling (:func:`mmctl.request.refs.refs_plan`)."""
        from mmctl.request.refs import refs_plan

        return refs_plan(
            refs,
            self.prompt,
            model,
            system=self.system,
            chat=self.chat is not False,
            allow_special_tokens=self.allow_special_tokens,
            sampling=self.sampling,
            stream=self.stream is not False,
            request_id=self.request_id,
        )


def _choice(kind: type[Enum], value: object, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        values = ", ".join(str(v.value) for v in kind)
        raise UsageError(
            f"--{name.replace('_', '-')} must be one of {values}; got {value!r}"
        ) from None


def _flags(names: list[str]) -> list[str]:
    return [f"--{n.replace('_', '-')}" for n in names]


def refuse(why: str, names: list[str]) -> None:
    """A usage error naming the options that cannot apply (none: nothing to refuse)."""
    if names:
        raise UsageError(f"{why}; it cannot apply {', '.join(names)}", hint="drop those options")


@dataclass(frozen=True)
class Hooks:
    """What a caller wants to hear while a request runs (all optional)."""

    on_text: Callable[[str], None] | None = None  # streamed answer text, as it arrives
    on_frame: Callable[[int, int], None] | None = None  # (frames done, total)
    on_note: Callable[[str], None] | None = None  # what mmctl did and why
    on_warning: Callable[[str], None] | None = None  # what a person should know

    def note(self, message: str) -> None:
        if self.on_note is not None:
            self.on_note(message)

    def warn(self, message: str) -> None:
        if self.on_warning is not None:
            self.on_warning(message)


@dataclass(frozen=True)
class Inputs:
    """The local inputs of one request, checked before any network call."""

    media: tuple[Path, ...] = ()
    kinds: tuple[MediaKind, ...] = ()
    request: Any = None  # a recorded GenerateRequest (replays)
    request_label: str = ""


def media_inputs(media: str | Path | Sequence[str | Path], soundtrack: bool = False) -> Inputs:
    """Media files, each readable and with a header its decoder accepts.

    ``soundtrack``: each video's own sound becomes an audio item right after it,
    the video file itself named as AUDIO — vLLM's audio loader reads a file's
    first audio stream, so the worker decodes the soundtrack as it decodes any
    sound. (Qwen-Omni's ``use_audio_in_video``, the soundtrack interleaved in
    the video's tokens, is a processor setting no GenerateRequest can carry:
    ARCHITECTURE §3.)"""
    from mmctl.media.probe import check_media

    paths = (Path(media),) if isinstance(media, str | Path) else tuple(Path(m) for m in media)
    if not paths:
        raise UsageError("give MEDIA files (or a request to replay)")
    items: list[tuple[Path, MediaKind]] = []
    for path in paths:
        kind = check_media(path)
        items.append((path, kind))
        if soundtrack and kind is MediaKind.VIDEO:
            from mmctl.media.audio import check_soundtrack

            try:
                check_soundtrack(path)
            except InputError as err:
                raise InputError(f"--soundtrack: {err.message}", hint=err.hint) from None
            items.append((path, MediaKind.AUDIO))
    if soundtrack and len(items) == len(paths):
        raise UsageError("--soundtrack: no video among the media, so no soundtrack to send")
    return Inputs(tuple(p for p, _ in items), tuple(k for _, k in items))


def send_inputs(
    media: Sequence[str | Path], request: str | Path | None, opts: SendOptions
) -> Inputs:
    """``send``'s MEDIA files or its ``--request FILE`` (one of the two); a replay
    refuses the options that would shape a new request."""
    if bool(media) == (request is not None):
        raise UsageError("give MEDIA files or --request FILE (one of the two)")
    if request is None:
        return media_inputs(media, opts.soundtrack)
    refuse("--request replays a recorded request", opts.shaping_a_request())
    return request_inputs(request)


def request_inputs(request: Any) -> Inputs:
    """A recorded request: a ``GenerateRequest``, its bytes, or a file holding them."""
    from mmctl.request.view import batch_kind, batches, parse_request, read_request

    if isinstance(request, str | Path):
        message, label = read_request(Path(request)), f"request file {request}"
    elif isinstance(request, bytes | bytearray | memoryview):
        message, label = parse_request(bytes(request), "the request bytes"), "request bytes"
    else:
        message, label = _copy(request), "a GenerateRequest"
    kinds = tuple(batch_kind(b) for b in batches(message) for _ in b.mm_placeholders)
    return Inputs((), kinds, message, label)


def _copy(message: Any) -> Any:
    # A replay changes the request id, sampling and tensor placement: on a
    # copy, so the caller's message can be sent again.
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


def headers_of(headers: Mapping[str, str] | Sequence[str] | None) -> list[str] | None:
    """``{"key": "value"}`` or ``["key:value", …]`` as the ``key:value`` list the target takes."""
    if headers is None or isinstance(headers, str):
        return [headers] if isinstance(headers, str) else None
    if isinstance(headers, Mapping):
        return [f"{k}:{v}" for k, v in headers.items()]
    return list(headers)
