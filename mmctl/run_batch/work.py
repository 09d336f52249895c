"""One dataset item → a prepared request, wherever it runs (a pool process, a Ray task).

:class:`Settings` is everything a preparing process needs, picklable: the
model files (a source folder; the Ray engine writes a copy on a node that
lacks it), the pixel dtype the workers
expect, their item limits and encoder budget, and the request defaults. A
:class:`Preparer` loads the model once per process and turns
:class:`~mmctl.dataset.Item` s into :class:`Prepared` requests, or
:class:`Failure` s that name why — never an exception, so one bad item never
stops a batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from mmctl.checkpoint.source import ModelSource
from mmctl.choices import DEFAULT_MAX_TOKENS, MediaRef, PixelFormat
from mmctl.dataset import Item, Medium, label, local_paths
from mmctl.errors import InputError, MmctlError
from mmctl.media.probe import MediaKind
from mmctl.models.model import Model, WorkerModel
from mmctl.models.registry import refuse_kind
from mmctl.request.build import MediaItem, RequestPlan, Sampling
from mmctl.values.items import DEFAULT_OPTIONS
from mmctl.values.pruning import NO_PRUNING, VideoPruning

_T = TypeVar("_T")


@dataclass(frozen=True)
class Settings:
    source: ModelSource
    family: str | None
    pixel_format: PixelFormat
    item_limits: dict[str, int] = field(default_factory=dict)
    encoder_budget: int = 0
    #: The workers' ``max_context_length`` (0: unknown): prompt plus answer must fit.
    context_length: int = 0
    prompt: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    #: How the workers are sent the media they preprocess themselves (``media_refs``);
    #: ``None``: mmctl preprocesses (the family's tensors).
    media_ref: MediaRef | None = None
    #: Where mmctl preprocesses: how a line with sound is sent, as a worker-processed
    #: request of its own (``None``: the workers cannot take one; such lines fail).
    sound_ref: MediaRef | None = None
    #: The workers' video pruning (each video laid out with the tokens they keep).
    pruning: VideoPruning = NO_PRUNING


@dataclass
class Prepared:
    """A request ready to send (picklable: numpy arrays in a plan)."""

    id: str
    number: int
    plan: RequestPlan
    kinds: list[str]
    payload_bytes: int
    preprocess_s: float
    warnings: list[str] = field(default_factory=list)
    #: The Ray node that preprocessed it (``None``: this process's pool).
    node: str | None = None
    #: Per medium, how the pixel cache answered (``hit``, ``shared``, ``miss``, ``off``).
    cached: list[str] = field(default_factory=list)


@dataclass
class Failure:
    """An item that cannot be sent, and why (an OpenAI batch error)."""

    id: str
    number: int
    code: str
    message: str
    status: int = 400


@dataclass
class Preprocessed:
    """An item's media preprocessed and hashed (what a pool process returns)."""

    item: Item
    number: int
    #: The media in the item's order; only those of ``made`` when some were skipped.
    media: list[MediaItem]
    preprocess_s: float
    #: The Ray node that preprocessed it (``None``: this process's pool).
    node: str | None = None
    #: Worker processing: each medium as a (kind, URL) ``media_ref`` (``media`` empty).
    refs: list[tuple[MediaKind, str]] = field(default_factory=list)
    #: Per medium, how the pixel cache answered (empty: no cache asked).
    cached: list[str] = field(default_factory=list)


class Preparer:
    """Prepares items in two steps: :meth:`preprocess` (decode, resize,
    patchify, hash — CPU work that needs only the model's vision settings) and
    :meth:`compose` (the prompt: chat text, tokens, layout, checks — needs the
    tokenizer, milliseconds). A pool process runs the first, the batch's own
    process the second, so pool processes never load a tokenizer.
    ``__call__`` runs both (a Ray actor). Failures come back as
    :class:`Failure`, never as exceptions."""

    def __init__(self, settings: Settings, model: Model | WorkerModel | None = None) -> None:
        from mmctl.models.model import load_any, load_model

        self.settings = settings
        self.model: Model | WorkerModel = model or (
            load_any(source=settings.source)
            if settings.media_ref is not None
            else load_model(source=settings.source, family=settings.family).with_pruning(
                settings.pruning
            )
        )

    @property
    def family(self) -> Model:
        """The model with its family, for mmctl's own preprocessing."""
        if isinstance(self.model, WorkerModel):
            raise self.model.unknown
        return self.model

    def __call__(self, item: Item, number: int) -> Prepared | Failure:
        refused = self.check_prompt(item, number)
        if refused is not None:
            return refused
        done = self.preprocess(item, number)
        return done if isinstance(done, Failure) else self.compose(done)

    def check_prompt(self, item: Item, number: int) -> Failure | None:
        """An item whose prompt text alone cannot fit the workers' context,
        refused from its length — before its media are decoded, and before the
        text is tokenized (a 50 MB prompt line took minutes and gigabytes)."""
        return _guarded(item, number, lambda: self._check_prompt(item))

    def _check_prompt(self, item: Item) -> None:
        from mmctl.request.limits import check_prompt_length

        limit = self.settings.context_length
        if limit:
            prompt = item.prompt if item.prompt is not None else self.settings.prompt
            text = (prompt or "") + (item.system or "")
            least = self.model.tokenizer.least_tokens(text, limit)
            check_prompt_length(least, self._max_tokens(item), limit)

    def _sampling(self, item: Item) -> Sampling:
        s = self.settings.sampling
        return replace(s, **item.sampling) if item.sampling else s

    def _max_tokens(self, item: Item) -> int:
        return self._sampling(item).max_tokens or DEFAULT_MAX_TOKENS

    def preprocess(
        self, item: Item, number: int, skip: frozenset[int] = frozenset()
    ) -> Preprocessed | Failure:
        """The item's media preprocessed and hashed, but those at ``skip``
        (the caller has them: :meth:`known`); ``media`` then holds the others."""
        return _guarded(item, number, lambda: self._preprocess(item, number, skip))

    def known(self, item: Item, number: int, media: list[MediaItem]) -> Preprocessed | Failure:
        """An item whose media are all at hand (the pixel cache's): its checks only."""

        def checked() -> Preprocessed:
            start = time.perf_counter()
            self._check(item, [it.kind.value for it in media])
            for it in media:
                refuse_kind(self.family.spec, it.kind)
            return Preprocessed(item, number, media, time.perf_counter() - start)

        return _guarded(item, number, checked)

    def compose(self, done: Preprocessed) -> Prepared | Failure:
        return _guarded(done.item, done.number, lambda: self._compose(done))

    def _check(self, item: Item, kinds: list[str]) -> None:
        from mmctl.request.limits import check_item_limits

        if not item.media:
            raise _NoMedia("the line names no media (mmctl batch sends video and images)")
        # The worker's item limit, before anything is decoded.
        check_item_limits(kinds, self.settings.item_limits, "the worker")

    def _preprocess(self, item: Item, number: int, skip: frozenset[int]) -> Preprocessed:
        from mmctl.media.probe import check_media
        from mmctl.request.hashing import file_digest, item_hash

        start = time.perf_counter()
        s = self.settings
        self._check(item, [_kind_of(m) for m in item.media])
        if s.media_ref is not None:  # the worker preprocesses: its refs only
            return self._refs(item, number, start, s.media_ref)
        why = by_worker_line(item, self.model)
        if why is not None:  # sound, or a kind the family's model cannot take preprocessed
            if s.sound_ref is None:
                what = "has sound" if has_sound(item) else f"is the worker's ({why})"
                raise InputError(
                    f"this line {what}, which only a worker that processes media itself "
                    "takes, and these workers do not (mm_processor is empty)"
                )
            return self._refs(item, number, start, s.sound_ref)
        model = self.family
        with local_paths(item.media) as paths:
            kinds = [check_media(p) for p in paths]
            media = []
            for n, (path, medium, kind) in enumerate(zip(paths, item.media, kinds, strict=True)):
                refuse_kind(model.spec, kind)
                if n in skip:
                    continue
                pre = model.spec.processor.preprocess(
                    path, kind, model.params, s.pixel_format, DEFAULT_OPTIONS
                )
                media.append(MediaItem(label(medium), pre, item_hash(pre, file_digest(path))))
        return Preprocessed(item, number, media, time.perf_counter() - start)

    def _refs(self, item: Item, number: int, start: float, how: MediaRef) -> Preprocessed:
        """The item's media as ``media_refs`` (send's), read where it is preprocessed."""
        from mmctl.media.probe import check_media
        from mmctl.request.refs import media_refs

        if how is MediaRef.FILE and not all(isinstance(m, Path) for m in item.media):
            raise InputError(
                "--media-ref file: the worker reads media by path, and this line names a "
                "data: or http(s) URL",
                hint="--media-ref data carries such media inside the request",
            )
        with local_paths(item.media) as paths:
            kinds = [check_media(p) for p in paths]
            refs = media_refs(paths, kinds, how)
        return Preprocessed(item, number, [], time.perf_counter() - start, refs=refs)

    def _compose(self, done: Preprocessed) -> Prepared:
        from mmctl.request.compose import compose_items
        from mmctl.request.limits import check_context, check_encoder_budget

        start = time.perf_counter()
        s, item = self.settings, done.item
        if s.media_ref is not None or done.refs:
            return self._compose_refs(done, start)
        check_encoder_budget(
            [(f"{it.kind.value} {n + 1}", it.pre.num_tokens) for n, it in enumerate(done.media)],
            s.encoder_budget,
            "the worker",
        )
        sampling = self._sampling(item)
        composed = compose_items(
            done.media,
            item.prompt if item.prompt is not None else s.prompt,
            self.family,
            system=item.system,
            sampling=sampling,
        )
        if not composed.check.ok:
            raise _LayoutFailed(self.family.spec.check_failed(composed.check.reason))
        check_context(len(composed.plan.input_ids), self._max_tokens(item), s.context_length)
        return Prepared(
            id=item.id,
            number=done.number,
            plan=composed.plan,
            kinds=[it.kind.value for it in done.media],
            payload_bytes=sum(b.pixel_values.nbytes for b in composed.plan.batches),
            preprocess_s=done.preprocess_s + time.perf_counter() - start,
            warnings=composed.warnings,
            node=done.node,
            cached=done.cached,
        )

    def _compose_refs(self, done: Preprocessed, start: float) -> Prepared:
        """A request of ``media_refs`` (send's builder); the workers expand and
        preprocess, so no tensor is made and the pixel cache does not apply."""
        from mmctl.request.limits import check_context
        from mmctl.request.refs import refs_plan

        s, item = self.settings, done.item
        sampling = self._sampling(item)
        plan = refs_plan(
            done.refs,
            item.prompt if item.prompt is not None else s.prompt,
            self.model,
            system=item.system,
            sampling=sampling,
        )
        check_context(len(plan.input_ids), self._max_tokens(item), s.context_length)
        return Prepared(
            id=item.id,
            number=done.number,
            plan=plan,
            kinds=[kind.value for kind, _ in done.refs],
            payload_bytes=0,
            preprocess_s=done.preprocess_s + time.perf_counter() - start,
            node=done.node,
        )


def has_sound(item: Item) -> bool:
    """Whether a line names sound (its requests are worker-processed: no pixels to keep)."""
    return any(_kind_of(m) == MediaKind.AUDIO.value for m in item.media)


def by_worker_line(item: Item, model: Model | WorkerModel | None) -> str | None:
    """Why a line is processed by the worker as a whole (:func:`mmctl.request.refs.by_worker`:
    sound, or a kind its family's model cannot take preprocessed); ``None``: it is not."""
    from mmctl.request.refs import by_worker

    names = {k.value: k for k in MediaKind}
    kinds = [names[k] for k in (_kind_of(m) for m in item.media) if k in names]
    return by_worker(kinds, getattr(model, "spec", None))


def media_keys(media: list[Medium], model: Model, fmt: PixelFormat) -> list[str | None]:
    """Each medium's pixel-cache key (:func:`mmctl.request.pixel_cache.key_of`):
    by content for files and ``data:`` media, by URL for remote ones (fetched
    once a run); ``None`` for one that cannot be read here (its item's
    preprocessing says why)."""
    from mmctl.dataset import Embedded
    from mmctl.errors import InputError
    from mmctl.media.probe import MediaKind
    from mmctl.request.hashing import file_digest
    from mmctl.request.pixel_cache import key_of

    keys: list[str | None] = []
    for medium in media:
        kind = _kind_of(medium)
        try:
            if kind == "unknown":
                raise OSError
            if isinstance(medium, Path):
                digest = file_digest(medium)
            elif isinstance(medium, Embedded):
                digest = file_digest(medium.data)
            else:
                digest = "url:" + medium.url
        except (OSError, InputError):  # not a regular file: its check says so
            keys.append(None)
            continue
        keys.append(key_of(digest, MediaKind(kind), model, fmt))
    return keys


def _guarded(item: Item, number: int, step: Callable[[], _T]) -> _T | Failure:
    try:
        return step()
    except MmctlError as err:
        return Failure(item.id, number, _code(err), err.message)
    except Exception as err:  # one broken item must not stop the batch
        return Failure(item.id, number, "internal_error", f"{type(err).__name__}: {err}", 500)


class _NoMedia(MmctlError):
    pass


class _LayoutFailed(MmctlError):
    pass


def _kind_of(medium: Medium) -> str:
    """The kind a medium's name says (a file's, or the suffix it will have)."""
    from urllib.parse import urlparse

    from mmctl.dataset import Embedded
    from mmctl.media.probe import check_readable, media_kind

    if isinstance(medium, Embedded):
        path = Path("embedded" + medium.suffix)
    elif isinstance(medium, Path):
        path = medium
        try:
            check_readable(path)  # a FIFO with no suffix would be opened to be sniffed
        except MmctlError:
            return "unknown"
    else:
        path = Path(urlparse(medium.url).path or "remote")
    try:
        return media_kind(path).value
    except (MmctlError, OSError):
        return "unknown"  # check_media says why, next


def _code(err: MmctlError) -> str:
    from mmctl.errors import InputError, UsageError

    if isinstance(err, _NoMedia):
        return "no_media"
    if isinstance(err, InputError | UsageError):
        return "invalid_input"
    return "check_failed"


# ---- a pool process's preparer ------------------------------------------------

#: This process's preparer, for the settings it was made with (a per-process
#: cache that says so: a pool process loads the model files once).
_PREPARER: Preparer | None = None


def warm() -> int:
    """A pool process's first task: import what preprocessing needs, now."""
    import av  # noqa: F401

    import mmctl.models.qwen_vl.pipeline  # noqa: F401

    return 0


def preprocess_in_process(
    settings: Settings, item: Item, number: int, skip: frozenset[int] = frozenset()
) -> Any:
    global _PREPARER
    if _PREPARER is None or _PREPARER.settings != settings:
        _PREPARER = Preparer(settings)
    return _PREPARER.preprocess(item, number, skip)
