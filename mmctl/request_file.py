"""A request written to a file for replay (``mmctl build``; ``send --request``).

Two ways to decide what the request carries: **offline**, as a default
``vllm serve MODEL --grpc`` for the model's family wants it (no worker asked:
the family's pixel type, ``--layout`` and ``--mm-item-limits`` of the user's
choosing), or **for a worker** (``target``), negotiated with it exactly as
``send`` would, its tensors inline. Either way the file is written atomically
and the document says what was decided, checked and written.

A request with sound is written worker-processed (``media_refs``, the prompt
by the model's own chat template), as ``send`` sends it: no tensor of it can
travel preprocessed (:data:`mmctl.request.refs.SOUND_BY_WORKER`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mmctl.choices import LayoutKind, Processing
from mmctl.client.connection import Connection
from mmctl.client.options import SendOptions
from mmctl.errors import CheckFailed, UsageError
from mmctl.values.pruning import VideoPruning


def write_offline(
    media: Sequence[Path],
    out: Path,
    options: SendOptions,
    *,
    model_dir: Path | None = None,
    bundle: Path | None = None,
    family: str | None = None,
    layout: LayoutKind = LayoutKind.VLLM,
    item_limits: dict[str, int] | None = None,
    force: bool = False,
    on_warning: Callable[[str], None] | None = None,
    video_pruning: VideoPruning | None = None,
) -> dict[str, Any]:
    """The request for a default worker of the model's family, written to ``out``.
    A failed layout check refuses (``CheckFailed``) unless ``force``; what a
    person should know is said to ``on_warning`` first."""
    from mmctl.client.negotiate import choose_pixels
    from mmctl.client.options import media_inputs
    from mmctl.media.probe import MediaKind
    from mmctl.offline import model_for
    from mmctl.request.compose import compose
    from mmctl.request.view import summary, write_request

    inputs = media_inputs(media, options.soundtrack)
    if MediaKind.AUDIO in inputs.kinds:
        return _write_refs_offline(
            inputs, out, options, model_dir=model_dir, bundle=bundle, family=family,
            layout=layout, item_limits=item_limits, force=force,
        )  # fmt: skip
    model = model_for(
        model_dir=model_dir,
        bundle=bundle,
        family=family,
        vision=options.vision,
        pruning=video_pruning,
    )
    from mmctl.request.refs import by_worker

    why = by_worker(inputs.kinds, model.spec)
    if why is not None:  # a kind the family's model cannot take preprocessed
        return _write_refs_offline(
            inputs, out, options, model_dir=model_dir, bundle=bundle, family=family,
            layout=layout, item_limits=item_limits, force=force, reason=why,
        )  # fmt: skip
    pixels = choose_pixels(None, options.pixel_dtype, family=model.spec)
    composed = compose(
        list(media),
        options.prompt,
        model,
        pixel_format=pixels.format,
        layout_kind=layout,
        system=options.system,
        chat=options.chat is not False,
        allow_special_tokens=options.allow_special_tokens,
        sampling=options.sampling,
        stream=options.stream is not False,
        request_id=options.request_id,
        item_limits=item_limits,
        strict=options.strict,
    )
    for warning in composed.warnings:
        if on_warning is not None:
            on_warning(warning)
    if not composed.check.ok and not force:
        raise CheckFailed(
            model.spec.check_failed(composed.check.reason), hint="--force writes it anyway"
        )
    req = composed.plan.to_proto()
    return {
        "out": str(out),
        "bytes": write_request(req, out),
        "model": {"source": model.source.label, "family": model.spec.name},
        "target": None,
        "decisions": {"pixel_dtype": pixels.decision.as_dict()},
        "prompt_format": composed.rendered.how,
        "layout": composed.layout.kind.value,
        "video_pruning": model.pruning.as_dict(),
        "check": {"name": model.spec.prompt.check_name, **composed.check.as_dict()},
        "items": [
            {"path": it.path, **it.pre.facts.as_dict(), "content_hash": it.content_hash}
            for it in composed.items
        ],
        "timings_s": {k: round(v, 6) for k, v in composed.timings.items()},
        "warnings": composed.warnings,
        "request": summary(req),
    }


def _write_refs_offline(
    inputs: Any,
    out: Path,
    options: SendOptions,
    *,
    model_dir: Path | None,
    bundle: Path | None,
    family: str | None,
    layout: LayoutKind,
    item_limits: dict[str, int] | None,
    force: bool,
    reason: str | None = None,
) -> dict[str, Any]:
    """A worker-processed request (sound, or ``reason``): its refs and the unexpanded
    prompt ids."""
    from mmctl.checkpoint.source import resolve
    from mmctl.models.model import load_any
    from mmctl.request.limits import check_item_limits
    from mmctl.request.refs import SOUND_BY_WORKER, media_refs
    from mmctl.request.view import summary, write_request

    why = reason or SOUND_BY_WORKER
    if force or layout is not LayoutKind.VLLM:
        raise UsageError(
            "--force and --layout shape mmctl's own layout; this request is laid out by the "
            f"worker: {why}"
        )
    options.refuse_client_side(why.split(":")[0].split(" (")[0])
    if item_limits:
        check_item_limits([k.value for k in inputs.kinds], item_limits, "--mm-item-limits")
    source = resolve(
        model_dir=Path(model_dir) if model_dir is not None else None,
        bundle=Path(bundle) if bundle is not None else None,
    )
    model = load_any(source=source, family=family)
    refs = media_refs(inputs.media, inputs.kinds, options.media_ref)
    plan = options.refs_plan(refs, model)
    req = plan.to_proto()
    return {
        "out": str(out),
        "bytes": write_request(req, out),
        "model": {"source": model.source.label, "family": model.name},
        "target": None,
        "decisions": {
            "processing": {"value": "worker", "reason": why},
            "media_ref": {"value": options.media_ref.value, "reason": "--media-ref"},
        },
        "prompt_format": "chat template (the worker expands it)",
        "layout": "worker",
        "check": {"name": "placeholders", "ran": False, "reason": "the worker expands the prompt"},
        "items": [
            {"path": str(p), "kind": k.value, "url_bytes": len(url)}
            for p, (k, url) in zip(inputs.media, refs, strict=True)
        ],
        "timings_s": {},
        "warnings": [],
        "request": summary(req),
    }


def write_for_worker(
    target: str,
    media: Sequence[Path],
    out: Path,
    options: SendOptions,
    *,
    connection: Connection,
    layout: LayoutKind = LayoutKind.VLLM,
    item_limits: dict[str, int] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """The request ``send`` would send to ``target``, written to ``out``
    (``connection``: how the worker is reached and whose files describe it)."""
    from mmctl.client.client import Client
    from mmctl.client.negotiate import Decision
    from mmctl.request.view import summary

    if force:
        raise UsageError("--force writes a request the checks refuse; not with --target")
    if layout is not LayoutKind.VLLM or item_limits:
        raise UsageError(
            "--layout and --mm-item-limits describe an offline build; not with --target"
        )
    # A request file carries mmctl's tensors: a model no family handles is refused.
    # Sound alone is worker-processed (its refs carry the files).
    from mmctl.client.options import media_inputs
    from mmctl.media.probe import MediaKind

    sound = MediaKind.AUDIO in media_inputs(media, options.soundtrack).kinds
    asked = options.processing
    options = options.but(processing=Processing.AUTO if sound else Processing.CLIENT)
    with Client(target, connection) as client:
        built = client.build(list(media), **vars(options))
        family = client.session().model.name
    run = built.run
    if not sound and asked is not Processing.CLIENT and "processing" in run.decisions:
        # Not "--processing client", which was not given.
        run.decisions["processing"] = Decision(
            "client", f"a request file carries mmctl's tensors ({family})"
        )
    return {
        "out": str(out),
        "bytes": built.write(out),
        "target": target,
        "decisions": {k: d.as_dict() for k, d in run.decisions.items()},
        "checks": [c.as_dict() for c in run.checks],
        "items": run.items,
        "warnings": run.warnings,
        "request": summary(built.request),
    }
