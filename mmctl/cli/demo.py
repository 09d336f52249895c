"""`mmctl demo`: the main job end to end on any machine, against the embedded stub worker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import JsonOpt
from mmctl.demo import DEFAULT_PROMPT, DEFAULT_ROUNDS

HELP = """Send a clip inline and through /dev/shm to an embedded stub worker; compare.

Starts the stub worker on a free 127.0.0.1 port (as a default `vllm serve
MODEL --grpc` behaves: raw uint8 pixels), generates the red/blue example
clip (2 s red, 2 s blue; kept in the cache: its path is printed for the
next command), and sends it inline and through /dev/shm
on one set-up (connect, model files and tokenizer paid once, shown once).
After a warm-up round the two run in turns, --rounds times each; each
column shows its median run, whose rows add up to its total. Then the
worker stops.

Examples:

\b
  mmctl demo
  mmctl demo --rounds 9
  mmctl demo --json | jq '.inline.answer, .shm.answer'
  mmctl demo --clip my-clip.mp4 -p "What happens?"

Exit codes: 0 both answers are "red, blue" (any answer with --clip); 2
usage; 3 bad --clip; 6 an answer differs from "red, blue".
"""


def demo(
    clip: Annotated[
        Path | None,
        typer.Option(
            "--clip",
            metavar="FILE",
            help="Send this clip instead of the generated red-blue one.",
            show_default=False,
        ),
    ] = None,
    prompt: Annotated[
        str,
        typer.Option(
            "--prompt",
            "-p",
            metavar="TEXT",
            help="The question sent with the clip (@FILE reads a file, - reads stdin).",
        ),
    ] = DEFAULT_PROMPT,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds", metavar="N", min=1, help="Runs of each transport after the warm-up."
        ),
    ] = DEFAULT_ROUNDS,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.cli._render import render_comparison
    from mmctl.client.options import Hooks
    from mmctl.demo import EXPECTED, run_demo
    from mmctl.errors import CheckFailed

    output = Output(json_mode=json_out, schema="demo")
    output.status("starting the stub worker and loading the model…")
    hooks = Hooks(on_note=output.note, on_warning=output.warn)
    done = run_demo(clip, _inputs.prompt_text(prompt, None), rounds, hooks)
    output.result(
        done.as_dict(),
        human=lambda console: render_comparison(console, done.comparison, "inline vs shm"),
    )
    if clip is None and not done.ok:
        runs = done.comparison.runs
        answers = ", ".join(f"{k}: {r.answer!r}" for k, rs in runs.items() for r in rs)
        raise CheckFailed(f"demo answers differ from {EXPECTED!r}: {answers}")


demo.__doc__ = HELP
