"""What a bench run leaves behind: vLLM-style result files, per-request lines, a plot.

``mmctl bench`` names its outputs as ``vllm bench serve`` does
(``--save-result [FILE.json]``, ``--result-dir``, ``--result-filename``), so
a script that reads vLLM's results reads mmctl's; :class:`SaveTarget` is
that naming, checked once. Every file is written whole or not at all
(:func:`~mmctl.fileio.write_atomic`): a reader never sees half a result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctl.errors import InputError, UsageError

if TYPE_CHECKING:
    from mmctl.bench.runner import BenchResult


@dataclass(frozen=True)
class SaveTarget:
    """Where ``--save-result`` writes: a file name (``None``: vLLM's own
    pattern, one file per concurrency level) in a folder (``None``: here)."""

    filename: str | None
    folder: Path | None

    @classmethod
    def of(
        cls, flag: bool, after: str | None, folder: Path | None, filename: str | None
    ) -> SaveTarget | None:
        """``--save-result [FILE.json]``, ``--result-dir``, ``--result-filename``;
        ``None`` when nothing is to be saved."""
        if after is not None and not flag:
            raise UsageError(
                f"unexpected argument {after!r}",
                hint="a FILE.json names where --save-result writes: --save-result FILE.json",
            )
        if after is not None and filename is not None:
            raise UsageError("give the file once: --save-result FILE.json or --result-filename")
        if not (flag or folder is not None or filename is not None):
            return None
        return cls(after if after is not None else filename, folder)


def write_files(
    result: BenchResult,
    save: SaveTarget | None,
    per_request: Path | None = None,
    plot: Path | None = None,
) -> list[Path]:
    """Write the files asked for; their paths, in order."""
    from mmctl.bench.report import result_paths, vllm_doc

    written = []
    if save is not None:
        if save.folder is not None:  # vLLM creates --result-dir too
            _make_dir(save.folder)
        paths = result_paths(
            [level.concurrency for level in result.levels],
            filename=save.filename,
            folder=save.folder,
            request_rate=result.config.request_rate,
        )
        for level in result.levels:
            path = paths[level.concurrency]
            _write(path, json.dumps(vllm_doc(result, level), indent=1).encode())
            written.append(path)
    if per_request is not None:
        lines = [
            json.dumps(r.as_dict(), separators=(",", ":"))
            for level in result.levels
            for r in level.records
        ]
        _write(per_request, "".join(line + "\n" for line in lines).encode())
        written.append(per_request)
    if plot is not None:
        from mmctl.bench.plot import write

        write(result, plot)
        written.append(plot)
    return written


def _make_dir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create --result-dir {folder}: {err.strerror or err}") from None


def _write(path: Path, data: bytes) -> None:
    from mmctl.fileio import write_atomic

    def write(f: Any) -> None:
        f.write(data)

    write_atomic(path, write)
