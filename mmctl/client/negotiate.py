"""Decisions made with the worker (ARCHITECTURE §3), each with the reason shown to the user.

* pixel dtype — uint8 raw pixels when the worker normalizes on the device
  (floats would be normalized twice: silent garbage); else the model's dtype
  when the worker accepts half-width floats; float32 for older workers.
* transport — ``auto`` uses shared memory iff the worker's
  ``shm_namespace_id`` equals ours (same ``/dev/shm``), else inline.
* processing — ``client`` for the families mmctl preprocesses; ``worker``
  (``media_refs``) when the worker offers a processor and the URL scheme —
  chosen by itself (``auto``) for a model no mmctl family handles.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmctl.choices import MediaRef, PixelFormat, Processing
from mmctl.client.probe import WorkerFacts
from mmctl.errors import CheckFailed, InputError, UnknownFamily, UsageError
from mmctl.models.family import Family
from mmctl.request.tensors import LEGACY_DTYPES


@dataclass(frozen=True)
class Decision:
    value: str
    reason: str
    #: Said to the user beside the decision: a choice that works but costs something.
    warning: str | None = None

    def as_dict(self) -> dict:
        doc = {"value": self.value, "reason": self.reason}
        if self.warning:
            doc["warning"] = self.warning
        return doc


#: Floating-point pixel types by the bits of mantissa they keep.
_HALF = ("bfloat16", "float16")


@dataclass(frozen=True)
class PixelChoice:
    """A target's pixel type, chosen once (:func:`choose_pixels`) and carried typed,
    as a :class:`~mmctl.client.route.Route` carries the transport: ``send``, the
    batch fleet, the load tester, ``build`` and ``preprocess`` read ``format``."""

    format: PixelFormat
    decision: Decision


def choose_pixels(
    facts: WorkerFacts | None,
    requested: PixelFormat | str | None,
    *,
    skip_checks: bool = False,
    family: Family | None = None,
) -> PixelChoice:
    """The pixel type to send. ``facts``: the worker's, when one was asked;
    without them, ``family``'s default worker's (``build``, ``preprocess``), else
    float32, which every worker accepts. ``requested``: ``--pixel-dtype``."""
    wanted = requested.value if isinstance(requested, PixelFormat) else requested
    decision = _pixel_decision(facts, wanted, skip_checks, family)
    return PixelChoice(PixelFormat(decision.value), decision)


def _pixel_decision(
    facts: WorkerFacts | None,
    requested: str | None,
    skip_checks: bool,
    spec: Family | None,
) -> Decision:
    info = facts.server if facts else None
    normalizes = bool(info and info.mm_device_do_normalize)
    modern = bool(facts and facts.knows_capabilities)
    if requested:
        try:
            fmt = PixelFormat(requested)
        except ValueError:
            choices = ", ".join(f.value for f in PixelFormat)
            raise UsageError(f"--pixel-dtype must be one of {choices}; got {requested!r}") from None
        if spec is not None and fmt is PixelFormat.UINT8 and not spec.processor.device_normalize:
            raise UsageError(
                f"--pixel-dtype uint8: vLLM normalizes {spec.name} pixels in its processor, not "
                "on the device, so its workers take normalized floats",
                hint="--pixel-dtype float32, bfloat16 or float16",
            )
        if not skip_checks:
            if normalizes and fmt is not PixelFormat.UINT8:
                raise CheckFailed(
                    f"--pixel-dtype {requested}: this worker normalizes on the device "
                    "(mm_device_do_normalize) and would normalize these floats twice",
                    hint="drop --pixel-dtype (mmctl sends uint8), or --skip-checks",
                )
            if facts is not None and not normalizes and fmt is PixelFormat.UINT8:
                raise CheckFailed(
                    "--pixel-dtype uint8: this worker does not normalize on the device; raw "
                    "pixels would reach the encoder as if normalized",
                    hint="drop --pixel-dtype, or --skip-checks",
                )
            if facts is not None and not modern and fmt.value not in LEGACY_DTYPES:
                raise CheckFailed(
                    f"--pixel-dtype {requested}: this worker does not advertise the newer dtypes "
                    "(an older worker takes float32 only)",
                    hint="drop --pixel-dtype, or --skip-checks",
                )
        model = _model_dtype(facts) if not normalizes else None
        if model in _HALF and fmt.value in _HALF and fmt.value != model and not skip_checks:
            # Measured on a real engine: fp16 pixels for a bf16 model changed the greedy answer.
            raise CheckFailed(
                f"--pixel-dtype {requested}: the model runs in {model}, so each pixel would be "
                f"rounded twice ({requested}, then {model}) and the answer can change",
                hint=f"--pixel-dtype {model} (or drop it: mmctl sends {model}), or --skip-checks",
            )
        if model == "float32" and fmt.value in _HALF:
            return Decision(
                fmt.value,
                "--pixel-dtype",
                warning=f"--pixel-dtype {requested}: the model runs in float32, so the pixels lose "
                "precision the model would keep (the answer can differ from float32's); "
                "drop --pixel-dtype to send float32",
            )
        return Decision(fmt.value, "--pixel-dtype")
    if facts is None and spec is not None:
        why = (
            f"a default vLLM worker normalizes {spec.name} pixels on the device, so raw uint8"
            if spec.processor.worker_pixels is PixelFormat.UINT8
            else f"{spec.name} pixels are normalized here, as float32, which every worker casts"
        )
        return Decision(
            spec.processor.worker_pixels.value,
            f"no worker asked: {why}; --target asks a worker, --pixel-dtype chooses",
        )
    if facts is None:
        return Decision(
            "float32", "no worker facts (replay or offline); float32 is accepted everywhere"
        )
    if normalizes:
        return Decision(
            "uint8", "worker normalizes on the device (mm_device_do_normalize): raw uint8 pixels"
        )
    if not modern:
        return Decision(
            "float32", "worker does not advertise its capabilities (older worker): float32"
        )
    declared = facts.server.model_dtype
    model = _model_dtype(facts)
    if model in _HALF:
        return Decision(model, f"model dtype {declared}: the worker casts to it anyway")
    return Decision("float32", f"model dtype {declared or 'unknown'}: float32")


def _model_dtype(facts: WorkerFacts | None) -> str | None:
    """The model's float type as the worker reports it ("torch.bfloat16",
    "bfloat16", "float32"…), by name; None when it does not say."""
    declared = (facts.server.model_dtype if facts else "").lower()
    for name in (*_HALF, "float32"):
        if name in declared:
            return name
    return None


def transport(
    mode: str, facts: WorkerFacts | None, local_namespace: str, shm_usable: str | None
) -> Decision:
    """``shm_usable``: None when /dev/shm can be written here, else why not."""
    remote = facts.server.shm_namespace_id if facts else ""
    if mode == "inline":
        return Decision("inline", "--transport inline")
    if mode == "shm":
        return Decision("shm", "--transport shm")
    if shm_usable is not None:
        return Decision("inline", f"auto: {shm_usable}; falling back to inline")
    if not remote:
        return Decision("inline", "auto: the worker does not report shm_namespace_id")
    if remote == local_namespace:
        return Decision(
            "shm", "auto: the worker shares this host's /dev/shm (shm_namespace_id matches)"
        )
    return Decision(
        "inline", f"auto: different /dev/shm (worker {remote}, here {local_namespace or 'unknown'})"
    )


def processing_schemes(facts: WorkerFacts) -> list[str]:
    return [s.strip() for s in (facts.server.mm_media_ref_schemes or "").split(",") if s.strip()]


@dataclass(frozen=True)
class ProcessingChoice:
    """Who preprocesses a target's requests, chosen once (:func:`choose_processing`)."""

    worker: bool
    decision: Decision
    #: The one line said when mmctl chose the worker by itself (``None``: it did not).
    note: str | None = None


def choose_processing(
    facts: WorkerFacts,
    requested: Processing,
    media_ref: MediaRef,
    unknown: UnknownFamily | None,
    family: str,
    sound: bool = False,
    by_worker: str | None = None,
) -> ProcessingChoice:
    """``requested``: ``--processing``; ``unknown``: why no mmctl family reads the
    model (``None``: ``family`` does); ``sound``: the requests carry sound, which
    only the worker processes (:data:`~mmctl.request.refs.SOUND_BY_WORKER`);
    ``by_worker``: why else only the worker can process them
    (:func:`mmctl.request.refs.by_worker`: a kind the family's model cannot take
    preprocessed). ``auto`` takes mmctl's preprocessing for a family it has, else the
    worker's; where neither can, the error names both."""
    from mmctl.request.refs import SOUND_BY_WORKER

    why_whole = SOUND_BY_WORKER if sound else by_worker
    if requested is Processing.CLIENT:
        if why_whole is not None:
            raise UsageError(
                f"--processing client: {why_whole}",
                hint="drop --processing client (sound goes as media_refs)"
                if sound
                else "drop --processing client (the media go as media_refs)",
            )
        if unknown is not None:
            raise unknown
        return ProcessingChoice(False, Decision("client", f"--processing client ({family})"))
    why_not = _worker_cannot(facts, media_ref)
    how = f"media_refs with {media_ref.value}: URLs; its processor: {facts.server.mm_processor}"
    if why_whole is not None and requested is not Processing.WORKER:
        if why_not is not None:
            raise CheckFailed(
                f"this worker cannot take {'sound' if sound else 'these media'}: {why_not}",
                hint=_FILE_HINT
                if facts.server.mm_processor
                else "start the worker with media processing on (smg-grpc-servicer's "
                "SMG_VLLM_MM_PROCESSOR=inprocess)",
            )
        if sound:
            return ProcessingChoice(
                True,
                Decision("worker", f"auto: sound is processed by the worker; {how}"),
                note=f"sound: the worker processes the whole request ({how})",
            )
        return ProcessingChoice(
            True,
            Decision("worker", f"auto: {why_whole}; {how}"),
            note=f"{family}: the worker processes the whole request ({how})",
        )
    if requested is Processing.WORKER:
        if why_not is not None:
            raise CheckFailed(
                f"--processing worker: {why_not}",
                hint=_FILE_HINT if facts.server.mm_processor else "use --processing client",
            )
        return ProcessingChoice(True, Decision("worker", f"--processing worker: {how}"))
    if unknown is None:
        return ProcessingChoice(False, Decision("client", f"auto: mmctl preprocesses {family}"))
    if why_not is not None:
        raise InputError(f"{unknown.message}, and {why_not}", hint=unknown.hint)
    model = f"model_type {unknown.model_type!r}"
    return ProcessingChoice(
        True,
        Decision("worker", f"auto: no mmctl family preprocesses {model}; {how}"),
        note=f"{model}: no mmctl family preprocesses it, so the worker does ({how})",
    )


def takes_media_refs(facts: WorkerFacts, media_ref: MediaRef) -> bool:
    """Whether the worker processes media named by ``media_ref`` URLs itself."""
    return _worker_cannot(facts, media_ref) is None


_FILE_HINT = "file: needs a worker started with --allowed-local-media-path on this host"


def _worker_cannot(facts: WorkerFacts, media_ref: MediaRef) -> str | None:
    """Why the worker cannot preprocess media named by ``media_ref`` URLs (``None``: it can)."""
    if not facts.server.mm_processor:
        return "the worker does not process media itself (mm_processor is empty)"
    schemes = processing_schemes(facts)
    if media_ref.value not in schemes:
        return (
            f"the worker accepts {', '.join(schemes) or 'no'} URL schemes, not {media_ref.value}:"
        )
    return None
