"""The main job end to end on any machine (``mmctl demo``): the red/blue clip
sent inline and through /dev/shm to an embedded stub worker, compared.

The embedded worker behaves as a default ``vllm serve MODEL --grpc`` does
(raw uint8 pixels for Qwen); the clip is kept in mmctl's cache so that the
path the demo prints still names a file for the next command.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI reads this module's defaults at start-up: keep it light
    from mmctl.client.compare import Comparison
    from mmctl.client.options import Hooks

#: What the stub answers for the red/blue clip.
EXPECTED = "red, blue"
DEFAULT_PROMPT = "Which colours appear, in order?"
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class DemoResult:
    comparison: Comparison
    worker: str
    clip: Path
    rounds: int

    @property
    def ok(self) -> bool:
        """Every answer is the red/blue clip's."""
        return all(r.answer == EXPECTED for runs in self.comparison.runs.values() for r in runs)

    def as_dict(self) -> dict[str, Any]:
        done = self.comparison
        doc: dict[str, Any] = {name: r.as_dict() for name, r in done.median.items()}
        doc["setup_s"] = {k: round(v, 6) for k, v in done.setup.items()}
        doc["rounds"] = self.rounds
        doc["totals_s"] = {name: [round(t, 6) for t in done.totals(name)] for name in done.median}
        doc["worker"] = self.worker
        doc["expected"] = EXPECTED
        doc["ok"] = self.ok
        return doc


def run_demo(
    clip: Path | None = None,
    prompt: str | None = DEFAULT_PROMPT,
    rounds: int = DEFAULT_ROUNDS,
    hooks: Hooks | None = None,
) -> DemoResult:
    """Start the stub on a free 127.0.0.1 port, send ``clip`` (the red/blue one
    by default) inline and through /dev/shm ``rounds`` times each after a
    warm-up, and stop it. ``hooks.on_note`` hears where the worker runs."""
    from mmctl.choices import Transport
    from mmctl.client.client import Client
    from mmctl.client.compare import compare
    from mmctl.client.options import Hooks, SendOptions
    from mmctl.media.probe import check_readable
    from mmctl.media.synth import color_clip
    from mmctl.models.model import load_model
    from mmctl.transport.shm import shm_dir
    from mmctl.worker.checks import Policy, normalizes_by_default
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    hooks = hooks or Hooks()
    if clip is not None:
        check_readable(clip)
    path = clip or demo_clip(color_clip)
    model = load_model()
    policy = Policy(device_normalize=normalizes_by_default(model.spec))
    running = start(StubConfig(model=model, policy=policy, log=io.StringIO()), port=0)
    hooks.note(f"stub worker on {running.address}; clip {path}")
    try:
        modes = [Transport.INLINE, Transport.SHM] if shm_dir().is_dir() else [Transport.INLINE]
        # Every round pays the whole request, decoding included: the cache off.
        with Client(running.address, pixel_cache_mb=0) as client:
            done = compare(
                client,
                [path],
                SendOptions(prompt=prompt),
                {m.value: {"transport": m} for m in modes},
                rounds=rounds,
                hooks=hooks,
            )
    finally:
        running.stop(grace=0.5)
    return DemoResult(done, running.address, path, rounds)


def demo_clip(make: Callable[[Path], Path]) -> Path:
    """The red-blue clip, kept in the cache so that the path the demo prints
    still names a file for the next command (`mmctl send THAT-PATH`)."""
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
