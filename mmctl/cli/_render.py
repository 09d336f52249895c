"""How a person sees a send: decisions, checks, and timing tables whose rows add up.

Shared by ``send``, ``send --compare-processing`` and ``demo``. Every timing
row is a lap of one timeline (:mod:`mmctl.timing`), so the rows of a column
sum to its ``total``; work overlapped inside a row (preprocessing during
decoding) is a note on that row, never a row of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mmctl.cli._output import Output, ms, size

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from mmctl.client.compare import Comparison
    from mmctl.client.run import SendResult

#: (key in SendResult.timings, label), in the order the phases run.
ROWS = (
    ("inputs_s", "local inputs"),
    ("probe_s", "connect + probe"),
    ("model_files_s", "model files"),
    ("tokenizer_s", "tokenizer load"),
    ("hash_s", "content hash"),
    ("decode_s", "decode + preprocess"),
    ("pixel_cache_s", "pixel cache"),
    ("tokenize_s", "tokenize + layout + checks"),
    ("handoff_s", "tensor hand-off"),
    ("ttft_s", "time to first token"),
    ("generation_s", "generation"),
)
SETUP_KEYS = ("probe_s", "model_files_s", "tokenizer_s")

#: A terminal's status line while the next phase runs, by the phase that just
#: ended: set-up takes seconds (the tokenizer alone 1-5 s) with nothing else to show.
NEXT_STATUS = {
    "inputs_s": "connecting to the worker…",
    "probe_s": "getting the model files…",
    "model_files_s": "loading the tokenizer…",
    "tokenizer_s": "hashing the media…",
    "hash_s": "decoding and preprocessing…",
    "tokenize_s": "handing the tensors over…",
    "handoff_s": "waiting for the first token…",
}


def follow(output: Output) -> Callable[[str], None]:
    """A :class:`~mmctl.timing.Timeline` listener that keeps ``output``'s
    status line on the phase now running."""

    def on_lap(name: str) -> None:
        if (text := NEXT_STATUS.get(name)) is not None:
            output.status(text)

    return on_lap


def kv_table() -> Table:
    """A two-column table, bold keys (``add_row(key, value)``), for summaries."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    return table


def _label(key: str) -> str:
    return dict(ROWS).get(key, key.removesuffix("_s").replace("_", " "))


def model_note(model: dict) -> str:
    """Where the model files came from: the worker's bundle (fetched or cached) or a flag."""
    bundle = model.get("bundle")
    if bundle is None:
        return model.get("from", "")
    if bundle.get("cached"):
        return "worker bundle, cached"
    return f"worker bundle, fetched {size(bundle.get('bytes') or 0)}"


def _notes(result: SendResult) -> dict[str, str]:
    notes = {"model_files_s": model_note(result.model)}
    if result.timings.get("decode_s") and result.preprocess_busy_s:
        notes["decode_s"] = f"incl. preprocess {ms(result.preprocess_busy_s)}"
    cached = result.pixel_cache
    if cached.get("hits"):
        n = cached["hits"]
        notes["pixel_cache_s"] = f"{n} {'hit' if n == 1 else 'hits'}, {size(cached['bytes'])}"
    return notes


def timing_table(columns: dict[str, SendResult], keys: list[str] | None = None) -> Table:
    """A rich table: one row per phase any column has, then ``total``.

    ``columns`` maps a heading to a SendResult (one column: no heading row).
    """
    from rich.table import Table

    results = list(columns.values())
    wanted = keys or [k for k, _ in ROWS if any(k in r.timings for r in results)]
    single = len(results) == 1
    table = Table(box=None, pad_edge=False, show_header=not single, header_style="bold")
    table.add_column("")
    for name in columns:
        table.add_column("" if single else name, justify="right")
    if single:
        table.add_column("", style="dim")
    notes = _notes(results[0]) if single else {}
    for key in wanted:
        cells = [ms(r.timings.get(key)) for r in results]
        table.add_row(_label(key), *cells, *([notes.get(key, "")] if single else []))
    table.add_row("total", *[ms(r.timings.get("total_s")) for r in results], *([""] * single))
    return table


def render_report(console: Console, result: SendResult) -> None:
    """What a person reads beside the answer: decisions, checks, timings, counts."""
    console.print()
    render_decisions(console, result)
    console.print(timing_table({"": result}))
    console.print(summary_line(result), markup=False)


def render_decisions(console: Console, result: SendResult) -> None:
    d = result.decisions
    for key in ("transport", "pixel_dtype", "processing", "replay"):
        if key in d:
            console.print(
                f"[bold]{key.replace('_', ' ')}[/] {d[key].value} — {d[key].reason}",
                markup=True,
                highlight=False,
            )
    ran = [c.name for c in result.checks if c.ran]
    skipped = [f"{c.name} ({c.reason})" for c in result.checks if not c.ran]
    console.print(
        f"[bold]checks[/] ran: {', '.join(ran) or 'none'}"
        + (f"; not run: {', '.join(skipped)}" if skipped else ""),
        highlight=False,
    )


def summary_line(result: SendResult) -> str:
    rate = result.tokens_per_s
    b = result.transport_bytes
    return (
        f"{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens"
        + (f", {rate:,.1f} tokens/s" if rate else "")
        + f"; finish {result.finish_reason}; moved {size(b.get('shm', 0))} via shm, "
        f"{size(b.get('inline', 0))} inline (request {size(b.get('request', 0))})"
    )


def render_comparison(console: Console, comparison: Comparison, what: str) -> None:
    """Set-up once, then each variant's median run side by side (rows add up)."""
    setup = comparison.setup
    parts = [f"{_label(k)} {ms(setup[k])}" for k in SETUP_KEYS if k in setup]
    console.print(
        f"[bold]set-up, once[/] {ms(setup['total_s'])}: " + ", ".join(parts), highlight=False
    )
    median = comparison.median
    runs = len(next(iter(comparison.runs.values())))
    how = "one run each" if runs == 1 else f"each column the median of {runs} runs, taken in turns"
    console.print(f"[bold]{what}[/], {how}, after a warm-up round:", highlight=False)
    table = timing_table(median)
    table.add_row()
    table.add_row("answer", *[r.answer for r in median.values()])
    table.add_row("finish", *[r.finish_reason for r in median.values()])
    table.add_row("transport", *[r.decisions["transport"].value for r in median.values()])
    table.add_row("via shm", *[size(r.transport_bytes.get("shm", 0)) for r in median.values()])
    table.add_row("inline", *[size(r.transport_bytes.get("inline", 0)) for r in median.values()])
    console.print(table)
    totals = "; ".join(
        f"{name} " + ", ".join(f"{t * 1000:,.1f}" for t in comparison.totals(name)) + " ms"
        for name in median
    )
    console.print(f"every run's total: {totals}", highlight=False)


def vision_rows(table: Table, settings: dict[str, dict[str, object]]) -> None:
    """The resolved vision settings, then where they came from, grouped by origin."""
    if not settings:
        return

    def v(key: str) -> object:
        return settings[key]["value"]

    if {"video_min_pixels", "min_frames"} <= settings.keys():  # Qwen's budget and sampling
        table.add_row(
            "vision",
            f"video {v('video_min_pixels')}..{v('video_max_pixels')} px, "
            f"image {v('image_min_pixels')}..{v('image_max_pixels')} px, "
            f"fps {v('fps')}, frames {v('min_frames')}..{v('max_frames')}, "
            f"patch {v('patch_size')} x {v('temporal_patch_size')}, merge {v('merge_size')}",
        )
    else:  # the others' processor settings, the short ones
        shown = [
            f"{key} {entry['value']}"
            for key, entry in settings.items()
            if isinstance(entry["value"], int | float | str)
            and not isinstance(entry["value"], bool)
        ]
        table.add_row("vision", ", ".join(shown))
    groups: dict[str, list[str]] = {}
    for key, entry in settings.items():
        if entry["value"] is not None:
            groups.setdefault(str(entry["from"]), []).append(key)
    for n, (origin, keys) in enumerate(groups.items()):
        table.add_row("from" if n == 0 else "", f"{origin}: {', '.join(keys)}")


def pruning_line(pruning: dict[str, Any]) -> str:
    """``2,880 → 720 tokens at rate 0.75 (evs)``: what the worker's pruning keeps."""
    return (
        f"{pruning['video_tokens']:,} → {pruning['kept_tokens']:,} tokens at rate "
        f"{pruning['rate']:g} ({pruning['method']})"
    )
