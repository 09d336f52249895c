"""What needs no worker: preprocess a file, lay out and check a prompt.

For scripts and notebooks, and the commands ``mmctl preprocess`` and
``mmctl inspect-tokens``::

    import mmctl

    pre = mmctl.preprocess("clip.mp4", fps=1)
    print(pre.grid_thw, pre.pixel_values.shape)

    report = mmctl.inspect_tokens("clip.mp4", prompt="What happens?", diff="vllm,hf-legacy")
    print(report.check.ok, len(report.layout.ids))

Model files come as everywhere else: ``model_dir``, ``bundle``, ``family``,
else the built-in Qwen3-VL set; vision values (``fps``, ``num_frames``,
``min_frames``, ``max_frames``, ``min_pixels``, ``max_pixels``) as keywords.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.models.model import Model, WorkerModel, load_model
from mmctl.models.registry import refuse_kind
from mmctl.models.settings import VisionOverrides
from mmctl.values.items import Frames, ItemFacts, ItemOptions, Preprocessed
from mmctl.values.layout import Layout, LayoutCheck
from mmctl.values.pruning import VideoPruning


def model_for(
    *,
    model: Model | None = None,
    family: str | None = None,
    model_dir: str | Path | None = None,
    bundle: str | Path | None = None,
    vision: VisionOverrides | None = None,
    pruning: VideoPruning | None = None,
) -> Model:
    """``model`` with ``vision`` applied, else the model those files make; laid
    out for a worker that prunes video as ``pruning`` says."""
    if model is not None:
        chosen = model.with_vision(vision) if vision and vision.given() else model
    else:
        chosen = load_model(
            model_dir=Path(model_dir) if model_dir is not None else None,
            bundle=Path(bundle) if bundle is not None else None,
            family=family,
            overrides=vision,
        )
    return chosen.with_pruning(pruning)


def preprocess(
    media: str | Path,
    *,
    pixel_dtype: PixelFormat | str | None = None,
    family: str | None = None,
    model_dir: str | Path | None = None,
    bundle: str | Path | None = None,
    model: Model | None = None,
    strict: bool = False,
    keep_frames: bool = False,
    on_frame: Callable[[int, int], None] | None = None,
    **vision: Any,
) -> Preprocessed:
    """A video or image preprocessed exactly as the model's processor would.

    ``pixel_dtype`` None: what a default vLLM worker takes for the family
    (``Family.worker_pixels``: raw uint8 for the Qwen families), as
    ``build`` writes and the stub worker expects by default."""
    path = Path(media)
    overrides = VisionOverrides(**vision)
    check_readable(path)
    chosen = model_for(
        model=model, family=family, model_dir=model_dir, bundle=bundle, vision=overrides
    )
    kind = media_kind(path)
    refuse_kind(chosen.spec, kind)
    from mmctl.client.negotiate import choose_pixels

    pre = chosen.spec.processor.preprocess(
        path,
        kind,
        chosen.params,
        choose_pixels(None, pixel_dtype, family=chosen.spec).format,
        ItemOptions(keep_frames=keep_frames, on_frame=on_frame, strict=strict),
    )
    return replace(
        pre,
        settings={"model": chosen.source.label, **chosen.vision_settings()},
        notes=chosen.warnings,
    )


@dataclass
class TokenReport:
    """A prompt's token layout, the mrope walk over it, and optionally a diff."""

    model: Model
    layout: Layout
    check: LayoutCheck
    prompt_format: str
    items: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    source: str | None = None  # the request file, when one was checked
    diff: dict[str, Any] | None = None
    #: What the layout knows of each item (its frames, for the rows).
    facts: list[ItemFacts] = field(default_factory=list)

    def rows(self) -> list[Any]:
        from mmctl.prompt import view

        return view.rows(
            self.layout, self.model.token_ids, self.model.tokenizer, _frames(self.model, self.facts)
        )

    def as_dict(self, ids: bool = False) -> dict[str, Any]:
        """The ``inspect-tokens --json`` document (``ids``: every token id too)."""
        from mmctl.prompt import view

        model = self.model
        doc: dict[str, Any] = {
            "model": {
                "source": model.source.label,
                "family": model.spec.name,
                "token_ids": model.token_ids.as_dict(),
                "token_ids_from": model.token_ids_from,
            },
            "prompt_format": self.prompt_format,
            "warnings": self.warnings,
        }
        if self.source is not None:
            doc["source"] = self.source
        items = [dict(item) for item in self.items]
        for entry, span in zip(items, self.layout.spans, strict=True):
            entry["span"] = {"offset": span.offset, "length": span.length}
        doc.update(
            layout=self.layout.kind.value if self.source is None else "request",
            num_tokens=len(self.layout.ids),
            items=items,
            check={"name": model.spec.prompt.check_name, **self.check.as_dict()},
            totals=view.totals(self.layout, model.token_ids),
            rows=[r.as_dict() for r in self.rows()],
        )
        if model.pruning.enabled:
            doc["video_pruning"] = {**model.pruning.as_dict(), **self.pruned_tokens()}
        if ids:
            doc["input_ids"] = self.layout.id_list()
        if self.diff is not None:
            doc["diff"] = self.diff
        return doc

    def pruned_tokens(self) -> dict[str, int]:
        """The videos' embedding tokens before pruning, and the ones the worker keeps."""
        from mmctl.media.probe import MediaKind
        from mmctl.values.pruning import video_tokens

        pad = self.model.token_ids.embed(MediaKind.VIDEO)
        whole, kept = video_tokens(self.layout, self.facts, pad)
        return {"video_tokens": whole, "kept_tokens": kept}


def inspect_tokens(
    media: str | Path | Sequence[str | Path] | None = None,
    prompt: str | None = None,
    *,
    request: str | Path | None = None,
    layout: LayoutKind | str = LayoutKind.VLLM,
    diff: str | Sequence[LayoutKind | str] | None = None,
    system: str | None = None,
    chat: bool | None = None,
    allow_special_tokens: bool = False,
    strict: bool = False,
    family: str | None = None,
    model_dir: str | Path | None = None,
    bundle: str | Path | None = None,
    model: Model | None = None,
    video_pruning: VideoPruning | None = None,
    **vision: Any,
) -> TokenReport | SoundReport:
    """The token layout of ``media`` + ``prompt`` (what ``send`` would send,
    default prompt included), or of a recorded ``request``, with vLLM's mrope
    walk run on it; ``diff`` ("vllm,hf-legacy") compares two layouts;
    ``video_pruning``: the worker's (there is none to ask), which shortens each
    video's span to the tokens it keeps. Media with sound: a :class:`SoundReport`
    (the worker lays such a request out)."""
    overrides = VisionOverrides(**vision)
    kind = LayoutKind(layout)
    pair = _diff_pair(diff) if diff is not None else None
    paths = _paths(media)
    if bool(paths) == (request is not None):
        raise UsageError("give MEDIA files or --request FILE (one of the two)")
    for path in paths:
        check_readable(path)
    if any(media_kind(p) is MediaKind.AUDIO for p in paths):
        if pair is not None or kind is not LayoutKind.VLLM or overrides.given() or strict:
            raise UsageError(
                "--layout, --diff, --strict and the vision values shape mmctl's own layout; a "
                "request with sound is laid out by the worker"
            )
        return inspect_sound(
            paths, prompt, system=system, chat=chat, allow_special_tokens=allow_special_tokens,
            family=family, model_dir=model_dir, bundle=bundle,
        )  # fmt: skip
    if request is not None:
        _refuse_for_request(
            prompt, system, chat, allow_special_tokens, kind, pair, strict, overrides
        )
    chosen = model_for(
        model=model,
        family=family,
        model_dir=model_dir,
        bundle=bundle,
        vision=overrides,
        pruning=video_pruning,
    )
    if request is not None:
        return _recorded(chosen, Path(request))
    from mmctl.request.refs import by_worker

    why = by_worker((media_kind(p) for p in paths), chosen.spec)
    if why is not None:  # a kind the family's model cannot take preprocessed
        if pair is not None or kind is not LayoutKind.VLLM or overrides.given() or strict:
            raise UsageError(
                "--layout, --diff, --strict and the vision values shape mmctl's own layout; "
                f"this request is laid out by the worker: {why}"
            )
        return inspect_sound(
            paths, prompt, system=system, chat=chat, allow_special_tokens=allow_special_tokens,
            family=family, model_dir=model_dir, bundle=bundle, reason=why,
        )  # fmt: skip
    return _composed(chosen, paths, prompt, kind, pair, system, chat, allow_special_tokens, strict)


@dataclass
class SoundReport:
    """A request with sound (worker-processed): its prompt as the model's own
    template writes it, unexpanded, and each item as the worker will lay it out
    (:func:`mmctl.models.sound.sound_tokens`; ``None``: the worker decides)."""

    model: Model | WorkerModel
    prompt_format: str
    input_ids: list[int]
    items: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    #: Why the worker processes it (:func:`mmctl.request.refs.by_worker`).
    reason: str = ""

    @property
    def num_tokens(self) -> int | None:
        """The prompt's length once the worker expands it; ``None`` where it decides."""
        runs = [it.get("tokens", {}).get("placeholder_run") for it in self.items]
        if any(run is None for run in runs):
            return None
        return len(self.input_ids) - len(runs) + sum(runs)

    def as_dict(self, ids: bool = False) -> dict[str, Any]:
        from mmctl.request.refs import SOUND_BY_WORKER

        model = self.model
        reason = self.reason or SOUND_BY_WORKER
        doc: dict[str, Any] = {
            "model": {
                "source": model.source.label,
                "family": model.spec.name if isinstance(model, Model) else None,
                "model_type": str(model.files.config.get("model_type") or ""),
            },
            "processing": {"value": "worker", "reason": reason},
            "prompt_format": self.prompt_format,
            "warnings": self.warnings,
            "layout": "worker",
            "num_tokens_unexpanded": len(self.input_ids),
            "num_tokens": self.num_tokens,
            "items": self.items,
        }
        if ids:
            doc["input_ids"] = self.input_ids
        return doc


def inspect_sound(
    paths: Sequence[Path],
    prompt: str | None,
    *,
    system: str | None = None,
    chat: bool | None = None,
    allow_special_tokens: bool = False,
    family: str | None = None,
    model_dir: str | Path | None = None,
    bundle: str | Path | None = None,
    reason: str = "",
) -> SoundReport:
    """What ``send`` would send for media with sound (or another kind the worker
    processes: ``reason``), and how the worker lays each sound out."""
    from mmctl.checkpoint.files import read_json
    from mmctl.checkpoint.source import resolve
    from mmctl.client.options import media_inputs
    from mmctl.media.audio import check_audio
    from mmctl.models.model import load_any
    from mmctl.models.sound import sound_tokens
    from mmctl.request.refs import refs_plan

    inputs = media_inputs(paths)
    source = resolve(
        model_dir=Path(model_dir) if model_dir is not None else None,
        bundle=Path(bundle) if bundle is not None else None,
    )
    model = load_any(source=source, family=family)
    plan = refs_plan(
        [(k, "") for k in inputs.kinds],  # the prompt only: no URL is read
        prompt,
        model,
        system=system,
        chat=chat is not False,
        allow_special_tokens=allow_special_tokens,
    )
    model_type = str(model.files.config.get("model_type") or "")
    processor = read_json(source.find("processor_config.json")) or {}
    items: list[dict[str, Any]] = []
    for n, (path, kind) in enumerate(zip(inputs.media, inputs.kinds, strict=True)):
        item: dict[str, Any] = {"item": n + 1, "path": str(path), "kind": kind.value}
        if kind is MediaKind.AUDIO:
            info = check_audio(path)
            item.update(info.as_dict())
            laid = sound_tokens(model_type, info.samples, info.sample_rate, processor)
            if laid is not None:
                item["tokens"] = laid.as_dict()
        items.append(item)
    ids = [int(t) for t in plan.input_ids]
    return SoundReport(model, "chat template (the worker expands it)", ids, items, reason=reason)


def _paths(media: str | Path | Sequence[str | Path] | None) -> list[Path]:
    if media is None:
        return []
    if isinstance(media, str | Path):
        return [Path(media)]
    return [Path(m) for m in media]


def _diff_pair(value: str | Sequence[LayoutKind | str]) -> tuple[LayoutKind, LayoutKind]:
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    try:
        pair = [LayoutKind(n) for n in names]
    except ValueError:
        pair = []
    if len(pair) != 2 or pair[0] == pair[1]:
        raise UsageError(
            f"--diff wants two different layouts out of {', '.join(k.value for k in LayoutKind)}, "
            f"like vllm,hf-legacy; got {value!r}"
        )
    return pair[0], pair[1]


def _refuse_for_request(
    prompt: str | None,
    system: str | None,
    chat: bool | None,
    allow_special_tokens: bool,
    layout: LayoutKind,
    pair: tuple[LayoutKind, LayoutKind] | None,
    strict: bool,
    vision: VisionOverrides,
) -> None:
    from mmctl.client.options import refuse

    given = [
        ("--prompt", prompt is not None),
        ("--system", system is not None),
        ("--chat/--no-chat", chat is not None),
        ("--allow-special-tokens", allow_special_tokens),
        ("--layout", layout is not LayoutKind.VLLM),
        ("--diff", pair is not None),
        ("--strict", strict),
    ]
    names = [name for name, set_ in given if set_]
    names += [f"--{n.replace('_', '-')}" for n in vision.given()]
    refuse("--request checks a recorded layout", names)


def _recorded(model: Model, request: Path) -> TokenReport:
    from mmctl.request.view import layout_of, read_request

    built, facts = layout_of(read_request(request), model)
    items = [{"item": s.item + 1, **f.as_dict()} for s, f in zip(built.spans, facts, strict=True)]
    check = model.spec.prompt.check(built, facts, model)
    return TokenReport(
        model, built, check, "from the request file", items, source=str(request), facts=facts
    )


def _composed(
    model: Model,
    paths: list[Path],
    prompt: str | None,
    layout: LayoutKind,
    pair: tuple[LayoutKind, LayoutKind] | None,
    system: str | None,
    chat: bool | None,
    allow_special_tokens: bool,
    strict: bool,
) -> TokenReport:
    from mmctl.request.compose import compose

    composed = compose(
        paths,
        prompt,
        model,
        pixel_format=model.spec.processor.worker_pixels,  # only the layout matters here
        layout_kind=layout,
        system=system,
        chat=chat is not False,
        allow_special_tokens=allow_special_tokens,
        strict=strict,
    )
    items = [
        {
            "item": n + 1,
            "path": it.path,
            **it.pre.facts.as_dict(),
            "patch_times_s": [round(t, 6) for t in it.pre.patch_times],
            "frame_indices": it.pre.frame_indices.tolist(),
            "content_hash": it.content_hash,
        }
        for n, it in enumerate(composed.items)
    ]
    report = TokenReport(
        model,
        composed.layout,
        composed.check,
        composed.rendered.how,
        items,
        warnings=composed.warnings,
        facts=[it.pre.facts for it in composed.items],
    )
    if pair is not None:
        report.diff = _diff(model, composed, pair)
    return report


def _diff(model: Model, composed: Any, pair: tuple[LayoutKind, LayoutKind]) -> dict[str, Any]:
    from mmctl.prompt import view
    from mmctl.request.compose import lay_out

    sides = {}
    facts = [it.pre.facts for it in composed.items]
    for name in pair:
        other, check = lay_out(model, composed.prompt_ids, facts, name)
        rows = view.rows(other, model.token_ids, model.tokenizer, _frames(model, facts))
        sides[name] = (other, check, rows)
    (a, a_check, a_rows), (b, b_check, b_rows) = sides[pair[0]], sides[pair[1]]
    return {
        "a": pair[0].value,
        "b": pair[1].value,
        "a_tokens": len(a.ids),
        "b_tokens": len(b.ids),
        "a_spans": [{"offset": s.offset, "length": s.length} for s in a.spans],
        "b_spans": [{"offset": s.offset, "length": s.length} for s in b.spans],
        "a_check": a_check.as_dict(),
        "b_check": b_check.as_dict(),
        "differences": [
            {"op": d.op, "a": [r.as_dict() for r in d.a], "b": [r.as_dict() for r in d.b]}
            for d in view.diff(a_rows, b_rows)
        ],
    }


def _frames(model: Model, facts: Sequence[ItemFacts]) -> list[Frames | None]:
    return [model.spec.prompt.frames(item, model) for item in facts]
