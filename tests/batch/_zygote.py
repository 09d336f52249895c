"""A process that imports mmctl once and forks one ``mmctl`` run per request.

For the crash-consistency test: fifty ``mmctl batch`` runs killed at random
points cost fifty interpreter start-ups and imports as separate processes;
forked from here they cost one. This process never opens a gRPC channel (a
forked copy of one that has is unsafe); each child runs ``main(argv)`` as
``python -m mmctl`` would. Protocol, one line each way: ``run ARGV-JSON`` →
the child's pid; ``wait PID`` → its exit status (-9 when killed).

``_zygote.py MODEL_DIR`` also loads that folder's model (tokenizer
included) before forking and hands it to every run that names that folder
(``--model-dir``): loading the tokenizer is most of a run's start-up.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import av  # noqa: F401
    import grpc  # noqa: F401
    import numpy  # noqa: F401

    import mmctl.models.qwen_vl.pipeline
    import mmctl.run_batch.api
    import mmctl.run_batch.local  # noqa: F401
    from mmctl.cli.app import main as mmctl_main

    if len(sys.argv) > 1:
        _preload(sys.argv[1])
    print("ready", flush=True)
    for line in sys.stdin:
        verb, _, arg = line.strip().partition(" ")
        if verb == "run":
            pid = os.fork()
            if pid == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                code = 1
                try:
                    code = mmctl_main(json.loads(arg))
                finally:
                    os._exit(code)
            print(pid, flush=True)
        elif verb == "wait":
            _, status = os.waitpid(int(arg), 0)
            print(os.waitstatus_to_exitcode(status), flush=True)


def _preload(folder: str) -> None:
    import mmctl.client.session
    import mmctl.models.model
    from mmctl.checkpoint.source import from_dir

    load = mmctl.models.model.load_model
    source = from_dir(__import__("pathlib").Path(folder))
    model = load(source=source)
    model.tokenizer  # noqa: B018 (loads it)

    def cached(source=None, **kw):  # type: ignore[no-untyped-def]
        if source is not None and tuple(source.folders) == tuple(model.source.folders):
            return model
        return load(source=source, **kw)

    mmctl.models.model.load_model = cached  # type: ignore[assignment]
    mmctl.client.session.load_model = cached  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
