"""`mmctl shm`: list and remove mmctl's leftover /dev/shm files."""

from __future__ import annotations

from typing import Annotated

import typer

from mmctl.cli._options import JsonOpt

shm_app = typer.Typer(
    name="shm",
    help="Shared-memory housekeeping: mmctl's files in /dev/shm.",
    no_args_is_help=True,
    add_completion=False,
)


@shm_app.command("gc")
def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be removed.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """List mmctl files in /dev/shm and remove those whose process is gone.

    Files of running mmctl processes are in use and kept. Exit 0.
    """
    from mmctl.cli._output import Output
    from mmctl.transport.shm import leftovers, shm_dir, sweep_dead

    output = Output(json_mode=json_out)
    found = list(leftovers())
    removed = [] if dry_run else sweep_dead()
    doc = {
        "dir": str(shm_dir()),
        "files": [
            {"name": f.name, "pid": f.pid, "alive": f.alive, "bytes": f.nbytes} for f in found
        ],
        "removed": removed,
        "dry_run": dry_run,
    }

    def human(console) -> None:
        if not found:
            console.print(f"no mmctl files in {doc['dir']}")
        for f in found:
            state = "in use" if f.alive else ("would remove" if dry_run else "removed")
            console.print(f"{f.name}  pid {f.pid}  {f.nbytes:,} B  {state}", markup=False)

    output.result(doc, human=human)
