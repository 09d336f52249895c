"""`mmctl demo`: the main job end to end on any machine, against the embedded stub worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import JsonOpt

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

EXPECTED = "red, blue"


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
    ] = "Which colours appear, in order?",
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds", metavar="N", min=1, help="Runs of each transport after the warm-up."
        ),
    ] = 3,
    json_out: JsonOpt = False,
) -> None:
    import io

    from mmctl.choices import Transport
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.cli._render import render_comparison
    from mmctl.client.client import Client
    from mmctl.client.compare import compare
    from mmctl.client.options import Hooks, SendOptions
    from mmctl.errors import CheckFailed
    from mmctl.media.probe import check_readable
    from mmctl.media.synth import color_clip
    from mmctl.models.model import load_model
    from mmctl.transport.shm import shm_dir
    from mmctl.worker.checks import Policy, normalizes_by_default
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    output = Output(json_mode=json_out)
    output.status("starting the stub worker and loading the model…")
    text = _inputs.prompt_text(prompt, None)
    if clip is not None:
        check_readable(clip)
    log = io.StringIO()
    path = clip or _demo_clip(color_clip)
    model = load_model()
    # The embedded worker behaves as a default `vllm serve MODEL --grpc` does.
    policy = Policy(device_normalize=normalizes_by_default(model.spec))
    running = start(StubConfig(model=model, policy=policy, log=log), port=0)
    output.note(f"stub worker on {running.address}; clip {path}")
    try:
        modes = [Transport.INLINE, Transport.SHM] if shm_dir().is_dir() else [Transport.INLINE]
        with Client(running.address) as client:
            done = compare(
                client,
                [path],
                SendOptions(prompt=text),
                {m.value: {"transport": m} for m in modes},
                rounds=rounds,
                hooks=Hooks(on_note=output.note, on_warning=output.warn),
            )
    finally:
        running.stop(grace=0.5)
    median = done.median
    doc: dict = {name: r.as_dict() for name, r in median.items()}
    doc["setup_s"] = {k: round(v, 6) for k, v in done.setup.items()}
    doc["rounds"] = rounds
    doc["totals_s"] = {name: [round(t, 6) for t in done.totals(name)] for name in median}
    doc["worker"] = running.address
    doc["expected"] = EXPECTED
    doc["ok"] = all(r.answer == EXPECTED for runs in done.runs.values() for r in runs)
    output.result(doc, human=lambda console: render_comparison(console, done, "inline vs shm"))
    if clip is None and not doc["ok"]:
        answers = ", ".join(f"{k}: {r.answer!r}" for k, runs in done.runs.items() for r in runs)
        raise CheckFailed(f"demo answers differ from {EXPECTED!r}: {answers}")


def _demo_clip(make: Callable[[Path], Path]) -> Path:
    """The red-blue clip, kept in the cache so that the path the demo prints
    still names a file for the next command (`mmctl send THAT-PATH`)."""
    import os

    from mmctl import settings

    path = settings.cache_dir() / "demo" / "red-blue.mp4"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".red-blue-{os.getpid()}.mp4")  # no torn file for a reader
        try:
            os.replace(make(partial), path)
        finally:
            partial.unlink(missing_ok=True)
    return path


demo.__doc__ = HELP
