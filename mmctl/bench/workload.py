"""What a bench run sends: work items, prepared once per pixel dtype.

A work item is one request's content — clips (``--video``), a dataset
line (``--dataset``) or a synthetic video of a pixel-tensor size
(``--sizes``). Each is decoded, preprocessed, tokenized and laid out once
per pixel dtype before the run (that time is reported as ``preprocess``);
every request then pays only for what a transport costs: placing the tensor
(``handoff``), assembling the message (``build``), ``Generate``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mmctl.choices import MediaRef, PixelFormat
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind, check_media
from mmctl.models.model import Model, WorkerModel
from mmctl.request.build import RequestPlan, Sampling
from mmctl.request.compose import compose, compose_items
from mmctl.request.limits import WorkerLimits
from mmctl.request.pixel_cache import PixelCache, Pixels
from mmctl.values.pruning import video_tokens


@dataclass(frozen=True)
class WorkItem:
    label: str
    media: tuple[Path, ...] = ()
    nbytes: int | None = None  # synthetic: the pixel tensor's size
    prompt: str | None = None
    system: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)


def choose(
    videos: Sequence[Path] | None,
    dataset: Path | None,
    sizes: Sequence[str] | None,
    sounds: Sequence[Path] | None = None,
) -> list[WorkItem]:
    """The run's items from exactly one workload: ``--video`` and ``--audio``
    files, a ``--dataset`` JSONL, or ``--sizes`` (``"1MB"``, …: synthetic videos)."""
    from mmctl.bench.synthetic import parse_size

    files = [*(videos or ()), *(sounds or ())]
    if sum(1 for source in (files, dataset, sizes) if source) != 1:
        raise UsageError(
            "give one workload: --video/--audio FILE…, --dataset FILE.jsonl or --sizes SIZE,…"
        )
    if files:
        return from_videos(files)
    if dataset is not None:
        return from_dataset(dataset)
    assert sizes
    return from_sizes([parse_size(s) for s in sizes], labels=sizes)


def from_videos(paths: Sequence[Path]) -> list[WorkItem]:
    """One item per file (a clip, a picture or a sound)."""
    return [WorkItem(p.name, media=(p,)) for p in paths]


def media_kinds(items: Sequence[WorkItem]) -> set[MediaKind]:
    """The kinds of media the items name (a family may leave some to the worker)."""
    from mmctl.media.probe import media_kind

    return {media_kind(p) for it in items for p in it.media if p.is_file()}


def has_sound(items: Sequence[WorkItem]) -> bool:
    """Whether any item names sound (the run is then worker-processed)."""
    from mmctl.media.probe import MediaKind, media_kind

    return any(media_kind(p) is MediaKind.AUDIO for it in items for p in it.media if p.is_file())


def from_sizes(sizes: Sequence[int], labels: Sequence[str] | None = None) -> list[WorkItem]:
    """Synthetic items of these pixel-tensor sizes, named as asked (``labels``:
    ``"1MB"`` stays ``1MB`` though the nearest tensor holds 0.995 MB)."""
    names = [s.replace(" ", "") for s in labels] if labels else [_size_label(n) for n in sizes]
    return [WorkItem(name, nbytes=n) for name, n in zip(names, sizes, strict=True)]


def from_dataset(path: Path) -> list[WorkItem]:
    from mmctl.dataset import Items

    items = []
    with Items(path, data_urls=False) as lines:
        for line in lines:
            # Files only: the dataset refuses data: and remote media here.
            media = tuple(m for m in line.media if isinstance(m, Path))
            items.append(WorkItem(line.id, media, None, line.prompt, line.system, line.sampling))
    if not items:
        raise UsageError(f"--dataset {path}: no items")
    return items


def _size_label(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n}B"


@dataclass
class Prepared:
    """A work item ready to send in one pixel dtype (``None``: as ``media_refs``,
    the worker preprocesses; ``payload_bytes`` is then the request's size)."""

    item: WorkItem
    fmt: PixelFormat | None
    plan: RequestPlan
    payload_bytes: int
    prepare_s: float
    #: Per medium, how the pixel cache answered (``hit``: another item had it).
    cached: tuple[str, ...] = ()
    #: The videos' embedding tokens, and those the worker's pruning keeps (equal
    #: when it does not prune).
    video_tokens: tuple[int, int] = (0, 0)


def prepare(
    item: WorkItem,
    model: Model,
    fmt: PixelFormat,
    prompt: str | None,
    sampling: Sampling,
    limits: WorkerLimits | None = None,
    cache: PixelCache[Pixels] | None = None,
) -> Prepared:
    """Decode, preprocess, tokenize and lay out ``item`` for ``fmt``, checked like
    ``send`` (the workers' ``limits`` included); a synthetic size becomes as
    many videos as the limits need."""
    from mmctl.request.limits import check_encoder_budget, check_item_limits

    limits = limits or WorkerLimits()
    start = time.perf_counter()
    text = item.prompt if item.prompt is not None else prompt
    if item.sampling:
        sampling = replace(sampling, **item.sampling)
    if item.nbytes is not None:
        from mmctl.bench.synthetic import synthetic_items

        videos = synthetic_items(
            item.nbytes, model.spec, model.params, fmt,
            encoder_budget=limits.encoder_budget,
            max_videos=limits.item_limits.get("video"), label=item.label,
        )  # fmt: skip
        composed = compose_items(videos, text, model, sampling=sampling, system=item.system)
    else:
        kinds = [check_media(p) for p in item.media]
        check_item_limits([k.value for k in kinds], limits.item_limits, "the worker")
        composed = compose(
            list(item.media), text, model, pixel_format=fmt, sampling=sampling,
            system=item.system, kinds=kinds, cache=cache,
        )  # fmt: skip
    check_encoder_budget(
        [(f"{item.label}: {it.kind.value} {n + 1}", it.pre.num_tokens)
         for n, it in enumerate(composed.items)],
        limits.encoder_budget,
        "the worker",
    )  # fmt: skip
    if not composed.check.ok:
        from mmctl.errors import CheckFailed

        raise CheckFailed(f"{item.label}: {model.spec.check_failed(composed.check.reason)}")
    payload = sum(b.pixel_values.nbytes for b in composed.plan.batches)
    took = time.perf_counter() - start
    tokens = (0, 0)
    if MediaKind.VIDEO in model.spec.modalities:  # an image family has no video token to ask
        pad = model.token_ids.embed(MediaKind.VIDEO)
        tokens = video_tokens(composed.layout, [it.pre.facts for it in composed.items], pad)
    return Prepared(item, fmt, composed.plan, payload, took, tuple(composed.cached), tokens)


def prepare_refs(
    item: WorkItem,
    model: Model | WorkerModel,
    media_ref: MediaRef,
    prompt: str | None,
    sampling: Sampling,
    limits: WorkerLimits | None = None,
) -> Prepared:
    """``item`` as the ``media_refs`` request ``send`` makes (the worker
    preprocesses): no pixels here, so the payload is the whole request."""
    from mmctl.request.limits import check_item_limits
    from mmctl.request.refs import media_refs, refs_plan

    limits = limits or WorkerLimits()
    if item.nbytes is not None:
        raise UsageError(
            f"--sizes {item.label}: synthetic sizes are mmctl's own pixel tensors; with worker "
            "processing (media_refs) the worker makes the tensors",
            hint="give --video FILE or --dataset FILE.jsonl",
        )
    start = time.perf_counter()
    if item.sampling:
        sampling = replace(sampling, **item.sampling)
    kinds = [check_media(p) for p in item.media]
    check_item_limits([k.value for k in kinds], limits.item_limits, "the worker")
    plan = refs_plan(
        media_refs(item.media, kinds, media_ref),
        item.prompt if item.prompt is not None else prompt,
        model,
        system=item.system,
        sampling=sampling,
    )
    size = len(plan.to_proto().SerializeToString())
    return Prepared(item, None, plan, size, time.perf_counter() - start)
