"""`mmctl demo`: the main job end to end on any machine, against the embedded stub worker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmctl.cli._options import JsonOpt

EXAMPLES = """
Examples:

  mmctl demo
  mmctl demo --json | jq '.inline.answer, .shm.answer'
  mmctl demo --clip my-red-blue.mp4

Starts the stub worker on a free 127.0.0.1 port, generates the red/blue
example clip (2 s red, 2 s blue), sends it inline and through /dev/shm,
prints both answers and timings side by side, and stops the worker.
Exit codes: 0 both answers are "red, blue", 6 otherwise.
"""

EXPECTED = "red, blue"


def demo(
    clip: Annotated[
        Path | None,
        typer.Option(
            "--clip", help="Use this clip instead of generating red-blue.mp4.", show_default=False
        ),
    ] = None,
    prompt: Annotated[str, typer.Option("--prompt", "-p")] = "Which colours appear, in order?",
    json_out: JsonOpt = False,
) -> None:
    """Run send inline and via /dev/shm against an embedded stub worker."""
    import io
    import tempfile

    from mmctl.cli._output import Output
    from mmctl.cli.send import render_side_by_side
    from mmctl.client.channel import resolve_target
    from mmctl.client.send import SendOptions, send
    from mmctl.errors import CheckFailed
    from mmctl.media.synth import color_clip
    from mmctl.models.model import load_model
    from mmctl.transport.shm import shm_dir
    from mmctl.worker.server import StubConfig, start

    output = Output(json_mode=json_out)
    log = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="mmctl-demo-") as tmp:
        path = clip or color_clip(Path(tmp) / "red-blue.mp4")
        running = start(StubConfig(model=load_model(), log=log), port=0)
        output.note(f"stub worker on {running.address}; clip {path}")
        try:
            results = {}
            modes = ["inline", "shm"] if shm_dir().is_dir() else ["inline"]
            for mode in modes:
                results[mode] = send(
                    SendOptions(
                        target=resolve_target(running.address),
                        media=[path],
                        prompt=prompt,
                        transport=mode,
                        on_note=output.note,
                    )
                )
        finally:
            running.stop(grace=0.5)
    doc = {name: r.as_dict() for name, r in results.items()}
    doc["worker"] = running.address
    doc["expected"] = EXPECTED
    doc["ok"] = all(r.answer == EXPECTED for r in results.values())
    output.result(doc, human=lambda console: render_side_by_side(console, results, list(results)))
    if clip is None and not doc["ok"]:
        answers = ", ".join(f"{k}: {r.answer!r}" for k, r in results.items())
        raise CheckFailed(f"demo answers differ from {EXPECTED!r}: {answers}")


demo.__doc__ = (demo.__doc__ or "") + "\n" + EXAMPLES
