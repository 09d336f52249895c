"""`mmctl inspect-tokens`: the prompt's token layout, and the family's check of it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.choices import DEFAULT_PRUNING_METHOD, DEFAULT_PRUNING_RATE, LayoutKind
from mmctl.cli._options import (
    AllowSpecialOpt,
    BundleOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    JsonOpt,
    LayoutOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MinFramesOpt,
    MinPixelsOpt,
    ModelDirOpt,
    NumFramesOpt,
    PromptFileOpt,
    PromptOpt,
    StrictOpt,
    SystemOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
)

if TYPE_CHECKING:
    from rich.console import Console

    from mmctl.prompt.view import Row

HELP = """Show the prompt's token layout and check it as vLLM's model reads it.

MEDIA: video and image files, in the order the prompt shows them (the same
prompt `mmctl send` would send: its default prompt too). Or --request FILE
checks the layout of a request file. The check is the family's: the mrope
walk (vLLM's frame by frame walk of each video span) for the Qwen families,
the placeholder spans (each holds its item's embedding tokens) for the others.

Examples:

\b
  mmctl inspect-tokens clip.mp4 --prompt "Which colours appear?"
  mmctl inspect-tokens clip.mp4 --diff vllm,hf-legacy
  mmctl inspect-tokens clip.mp4 --layout hf-legacy --json | jq .check
  mmctl inspect-tokens --request request.pb   # check a built request

Exit codes: 0 the layout passes the check; 2 usage; 3 bad input; 6 it fails
the check (the reason is printed).
"""


def inspect_tokens(
    media: Annotated[
        list[Path] | None, typer.Argument(metavar="MEDIA", hidden=True, show_default=False)
    ] = None,
    prompt: PromptOpt = None,
    prompt_file: PromptFileOpt = None,
    allow_special_tokens: AllowSpecialOpt = False,
    layout: LayoutOpt = LayoutKind.VLLM,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="A,B",
            help="Show where two layouts differ (e.g. vllm,hf-legacy).",
            show_default=False,
        ),
    ] = None,
    request: Annotated[
        Path | None,
        typer.Option(
            "--request",
            metavar="FILE",
            help="Check the layout of a GenerateRequest file instead of MEDIA.",
            show_default=False,
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Show every frame (default: the first and last three).")
    ] = False,
    ids: Annotated[bool, typer.Option("--ids", help="Include every token id in --json.")] = False,
    system: SystemOpt = None,
    chat: ChatOpt = None,
    strict: StrictOpt = False,
    model_dir: ModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.errors import CheckFailed
    from mmctl.offline import SoundReport
    from mmctl.offline import inspect_tokens as inspect
    from mmctl.values.pruning import VideoPruning

    output = Output(json_mode=json_out, schema="inspect-tokens")
    output.status("loading the model files and the tokenizer…")
    report = inspect(
        media or None,
        _inputs.prompt_text(prompt, prompt_file),
        request=request,
        layout=layout,
        diff=diff,
        system=system,
        chat=chat,
        allow_special_tokens=allow_special_tokens,
        strict=strict,
        family=family,
        model_dir=model_dir,
        bundle=bundle,
        fps=fps,
        num_frames=num_frames,
        min_frames=min_frames,
        max_frames=max_frames,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        video_pruning=VideoPruning(video_pruning_rate, video_pruning_method),
    )
    for warning in report.warnings:
        output.warn(warning)
    if isinstance(report, SoundReport):
        sound = report.as_dict(ids=ids)
        output.result(
            sound,
            human=lambda console: _render_sound(console, sound),
            schema="inspect-tokens-sound",
        )
        return
    doc = report.as_dict(ids=ids)
    rows = report.rows()
    output.result(doc, human=lambda console: _render(console, doc, rows, show_all))
    if not report.check.ok:
        raise CheckFailed(report.model.spec.check_failed(report.check.reason))


inspect_tokens.__doc__ = HELP


MARKERS = {"vision_start": "<|vision_start|>", "vision_end": "<|vision_end|>"}


def _cell(row: Row) -> str:
    if row.kind in MARKERS or row.kind == "marker":
        return f"[magenta]{_esc(row.token or MARKERS.get(row.kind, row.text))}[/]"
    if row.kind == "pads":
        return f"[cyan]{_esc(row.token or f'<|{row.text}_pad|>')}×{row.count}[/]"
    if row.kind == "timestamp":  # a frame's text: a line break shown, not made (InternVL's)
        # The white space around it joins it to the frame before (Gemma 4's
        # " 00:01 ", InternVL's "\nFrame2: "); its row already says that, and
        # shown it pushed every frame but the first one column right. --json
        # keeps the exact text.
        text = row.text.strip() if row.frame is not None else row.text
        return f"[yellow]{_esc(text.replace(chr(10), chr(92) + 'n'))}[/]"
    return f"[dim]{_esc(repr(row.text))}[/] ({row.count})"


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _render(console: Console, doc: dict[str, Any], rows: list[Row], show_all: bool) -> None:
    model = doc["model"]
    console.print(
        f"[bold]model[/]    {model['source']} · {model['family']} · token ids from {model['token_ids_from']}"
    )
    console.print(f"[bold]prompt[/]   {doc['prompt_format']}")
    console.print(
        f"[bold]layout[/]   {doc['layout']} · {doc['num_tokens']} tokens · {len(doc['items'])} item(s)"
    )
    pruning = doc.get("video_pruning")
    if pruning:
        from mmctl.cli._render import pruning_line

        console.print(f"[bold]video[/]    {pruning_line(pruning)}")
    console.print()
    for line in _lines(rows, doc, show_all):
        console.print(line)
    console.print()
    check = doc["check"]
    if check["ok"]:
        name = check.get("name", "mrope_walk").replace("_", " ")
        frames = f" over {check['frames_checked']} frame(s)" if check.get("frames_checked") else ""
        console.print(
            f"[bold]check[/]    [green]pass[/] — {name}{frames}; every span holds its item's "
            "embedding tokens, as vLLM's model reads them"
        )
    else:
        console.print(f"[bold]check[/]    [red]FAIL[/] — {_esc(check['reason'])}")
    t = doc["totals"]
    console.print(
        f"[bold]totals[/]   {t['tokens']} tokens: {t['video_pads']} video pads, {t['image_pads']} image pads, "
        f"{t['vision_markers']} markers, {t['other']} other; {t['in_spans']} inside spans"
    )
    if "diff" in doc:
        _render_diff(console, doc["diff"], check.get("name", "mrope_walk").replace("_", " "))


def _render_sound(console: Console, doc: dict[str, Any]) -> None:
    model = doc["model"]
    console.print(
        f"[bold]model[/]    {_esc(model['source'])} · {model['family'] or model['model_type']}",
        highlight=False,
    )
    console.print(
        f"[bold]prompt[/]   {doc['prompt_format']} · {doc['num_tokens_unexpanded']} tokens "
        "before the worker expands it",
        highlight=False,
    )
    console.print("[bold]layout[/]   by the worker: a request with sound is worker-processed")
    console.print()
    for item in doc["items"]:
        head = f"  item {item['item']}  {item['kind']:<5}  {_esc(item['path'])}"
        if item["kind"] != "audio":
            console.print(f"{head}  → expanded by the worker", highlight=False)
            continue
        facts = (
            f"{item['duration_s']:.3f} s · {item['sample_rate']} Hz · {item['channels']} ch "
            f"· {item['codec']}"
        )
        tokens = item.get("tokens")
        if tokens is None:
            laid = "tokens decided by the worker (mmctl does not know this model's sound rule)"
        else:
            extra = tokens["placeholder_run"] - tokens["audio_tokens"]
            laid = f"{tokens['audio_tokens']} audio tokens" + (
                f" (+{extra} markers)" if extra else ""
            )
            if tokens["model_rate"] != item["sample_rate"]:
                laid += f" at {tokens['model_rate']} Hz"
        console.print(f"{head}  {facts}  → {laid}", highlight=False)
    console.print()
    total = doc["num_tokens"]
    console.print(
        f"[bold]totals[/]   {total} tokens once expanded"
        if total is not None
        else "[bold]totals[/]   decided by the worker",
        highlight=False,
    )


def _lines(rows: list[Row], doc: dict[str, Any], show_all: bool) -> list[str]:
    """One line per text run / marker outside spans, one per frame inside video spans."""
    items = {i["item"]: i for i in doc["items"]}
    out: list[str] = []
    frames: list[tuple[int, list]] = []  # (frame, rows) of the open video span
    framed = False  # the open span has shown frames

    def flush_frames() -> None:
        keep = frames if show_all or len(frames) <= 6 else [*frames[:3], None, *frames[-3:]]
        for entry in keep:
            if entry is None:
                out.append(
                    f"{'':>7}  │   … {len(frames) - 6} more frame(s) like these (--all shows them)"
                )
                continue
            number, parts = entry
            out.append(
                f"{parts[0].at:>7}  │ frame {number:<4} " + " ".join(_cell(r) for r in parts)
            )
        frames.clear()

    for row in rows:
        if row.item is None or row.frame is None:
            framed = framed or bool(frames)
            flush_frames()  # rows in prompt order: the frames before what follows them
        if row.kind == "span_start":
            framed = False
            item = items.get(row.item, {})
            span = item.get("span", {})
            out.append(
                f"{row.at:>7}  ┌ {row.text} {row.item}  span [{span.get('offset')}, "
                f"{span.get('offset', 0) + span.get('length', 0)}) {span.get('length')} tokens"
                + "".join(
                    f"  {part}" for part in (_shape(item), _esc(item.get("path", ""))) if part
                )
            )
        elif row.kind == "span_end":
            out.append(f"{row.at:>7}  └ {row.text} {row.item}")
        elif row.frame is not None and row.item is not None:
            if frames and frames[-1][0] == row.frame:
                frames[-1][1].append(row)
            else:
                frames.append((row.frame, [row]))
        elif row.item is not None:
            after = "  after the last frame" if framed and row.kind == "pads" else ""
            out.append(f"{row.at:>7}  │ " + _cell(row) + after)
        else:
            out.append(f"{row.at:>7}  " + _cell(row))
    flush_frames()
    return out


def _shape(item: dict[str, Any]) -> str:
    """What a span's heading shows of its item, by the families' item keys."""
    from mmctl.media.probe import dimensions

    if (grid := item.get("grid_thw")) is not None:  # the patch grid, in its own t, h, w order
        return "grid " + "x".join(str(n) for n in grid)
    if (size := item.get("image_size")) is not None:  # (height, width), as vLLM's image_sizes
        return f"size {dimensions(size[1], size[0])}"
    if (ratio := item.get("aspect_ratio")) is not None:  # (rows, columns) of tiles
        return f"tiles {dimensions(ratio[1], ratio[0])}"
    if (frames := item.get("frames")) is not None:
        return f"frames {frames}"
    return ""


def _render_diff(console: Console, d: dict[str, Any], check: str) -> None:
    console.print()
    console.print(
        f"[bold]diff[/]     {d['a']} ({d['a_tokens']} tokens, spans {_spans(d['a_spans'])}, "
        f"{check} {'pass' if d['a_check']['ok'] else 'FAIL'}) vs {d['b']} ({d['b_tokens']} "
        f"tokens, spans {_spans(d['b_spans'])}, {check} {'pass' if d['b_check']['ok'] else 'FAIL'})"
    )
    if not d["differences"]:
        console.print("         identical")
    for diff in d["differences"]:
        a = " ".join(_describe(r) for r in diff["a"]) or "—"
        b = " ".join(_describe(r) for r in diff["b"]) or "—"
        console.print(f"  {diff['op']:<8} {d['a']}: {a}")
        console.print(f"  {'':<8} {d['b']}: {b}")


def _spans(spans: list[dict[str, int]]) -> str:
    return ", ".join(f"[{s['offset']}, {s['offset'] + s['length']})" for s in spans)


def _describe(r: dict) -> str:
    where = f"@{r['at']}"
    if r.get("frame"):
        where += f" frame {r['frame']}"
    elif r.get("item") and r["kind"] not in ("span_start", "span_end"):
        where += " in span"
    if r["kind"] in MARKERS or r["kind"] == "marker":
        return f"{_esc(r.get('token') or MARKERS.get(r['kind'], r.get('text', '')))}{where}"
    if r["kind"] == "pads":
        return f"pads×{r['count']}{where}"
    if r["kind"] in ("span_start", "span_end"):
        return f"{r['kind'].replace('_', ' ')}{where}"
    return f"{_esc(repr(r.get('text', '')))}{where}"
