"""`mmctl shm`: list and remove mmctl's leftover /dev/shm files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from mmctl.cli._options import JsonOpt

if TYPE_CHECKING:
    from rich.console import Console

SHM_HELP = """Shared-memory housekeeping: mmctl's files in /dev/shm.

`mmctl send --shm` writes one file per tensor (mmctl-<pid>-<seq>-<random>);
the worker removes each file it reads and mmctl removes the rest on every
way out. A killed process can still leave files behind: `mmctl shm gc`
removes those (send also sweeps them before it writes new ones). A file is
"in use" while its process holds its lock, whatever PID namespace it runs in.
It also removes Python multiprocessing's semaphores (sem.mp-*) of a killed
process pool: this user's, once no process maps them.

Examples:

\b
  mmctl shm gc --dry-run
  mmctl shm gc --json | jq '.removed | length'

Exit codes: 0 done; 2 usage.
"""

GC_HELP = """List mmctl's files in /dev/shm and remove those whose process is gone.

Files of running mmctl processes are in use and kept; so are sem.mp-*
semaphores that a process still maps.

Examples:

\b
  mmctl shm gc              # remove leftovers of dead mmctl processes
  mmctl shm gc --dry-run    # only list them
  mmctl shm gc --json

Exit codes: 0 done (also when there was nothing to remove); 2 usage.
"""

shm_app = typer.Typer(
    name="shm",
    help=SHM_HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@shm_app.command("gc", help=GC_HELP)
def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be removed.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli._output import Output
    from mmctl.run_batch.children import remove_unused_semaphores, semaphores
    from mmctl.transport.shm import leftovers, shm_dir, sweep_dead

    output = Output(json_mode=json_out, schema="shm-gc")
    found = list(leftovers())
    sems = semaphores(shm_dir())
    removed = [] if dry_run else sweep_dead()
    sems_removed = [] if dry_run else remove_unused_semaphores(shm_dir())
    doc = {
        "dir": str(shm_dir()),
        "files": [
            {"name": f.name, "pid": f.pid, "alive": f.alive, "bytes": f.nbytes} for f in found
        ],
        "removed": removed,
        "semaphores": [{"name": s.name, "in_use": s.in_use} for s in sems],
        "semaphores_removed": sems_removed,
        "dry_run": dry_run,
    }

    def human(console: Console) -> None:
        if not found:
            console.print(f"no mmctl files in {doc['dir']}")
        for f in found:
            state = "in use" if f.alive else ("would remove" if dry_run else "removed")
            console.print(f"{f.name}  pid {f.pid}  {f.nbytes:,} B  {state}", markup=False)
        for s in sems:
            state = "in use" if s.in_use else ("would remove" if dry_run else "removed")
            console.print(f"{s.name}  (a process pool's semaphore)  {state}", markup=False)

    output.result(doc, human=human)
