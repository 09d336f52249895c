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
from mmctl.dataset import Item
from mmctl.errors import MmctlError
from mmctl.media.probe import MediaKind
from mmctl.models.model import Model, WorkerModel
from mmctl.models.registry import refuse_kind
from mmctl.request.build import MediaItem, RequestPlan, Sampling
from mmctl.values.items import DEFAULT_OPTIONS

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
    media: list[MediaItem]
    preprocess_s: float
    #: The Ray node that preprocessed it (``None``: this process's pool).
    node: str | None = None
    #: Worker processing: each medium as a (kind, URL) ``media_ref`` (``media`` empty).
    refs: list[tuple[MediaKind, str]] = field(default_factory=list)


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
            else load_model(source=settings.source, family=settings.family)
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

    def preprocess(self, item: Item, number: int) -> Preprocessed | Failure:
        return _guarded(item, number, lambda: self._preprocess(item, number))

    def compose(self, done: Preprocessed) -> Prepared | Failure:
        return _guarded(done.item, done.number, lambda: self._compose(done))

    def _preprocess(self, item: Item, number: int) -> Preprocessed:
        from mmctl.media.probe import check_media
        from mmctl.request.hashing import item_hash
        from mmctl.request.limits import check_item_limits

        start = time.perf_counter()
        s = self.settings
        if not item.media:
            raise _NoMedia("the line names no media (mmctl batch sends video and images)")
        # The worker's item limit, before anything is decoded.
        check_item_limits([_kind_of(p) for p in item.media], s.item_limits, "the worker")
        kinds = [check_media(p) for p in item.media]
        if s.media_ref is not None:  # the worker preprocesses: its refs only
            from mmctl.request.refs import media_refs

            refs = media_refs(item.media, kinds, s.media_ref)
            return Preprocessed(item, number, [], time.perf_counter() - start, refs=refs)
        model = self.family
        media = []
        for path, kind in zip(item.media, kinds, strict=True):
            refuse_kind(model.spec, kind)
            pre = model.spec.processor.preprocess(
                path, kind, model.params, s.pixel_format, DEFAULT_OPTIONS
            )
            media.append(MediaItem(str(path), pre, item_hash(pre, path)))
        return Preprocessed(item, number, media, time.perf_counter() - start)

    def _compose(self, done: Preprocessed) -> Prepared:
        from mmctl.request.compose import compose_items
        from mmctl.request.limits import check_context, check_encoder_budget

        start = time.perf_counter()
        s, item = self.settings, done.item
        if s.media_ref is not None:
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


def _kind_of(path: Path) -> str:
    from mmctl.media.probe import media_kind

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


def preprocess_in_process(settings: Settings, item: Item, number: int) -> Any:
    global _PREPARER
    if _PREPARER is None or _PREPARER.settings != settings:
        _PREPARER = Preparer(settings)
    return _PREPARER.preprocess(item, number)
