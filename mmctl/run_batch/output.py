"""The output file: one OpenAI batch output line per input line, appended as each finishes.

The shape ``vllm run-batch`` writes and the OpenAI Batch API returns:
``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
"error"}`` — the body a ``chat.completion`` — plus an ``mmctl`` key with the
timings, transport, bytes and worker. Each line is written whole with one
``write`` and flushed, so a killed run leaves complete lines (and at most one
torn last line, which :meth:`OutputFile.open` cuts off). ``resume`` reads the
ids already there; those items are not sent again.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import IO, Any

from mmctl.errors import InputError, UsageError


def success_line(
    custom_id: str,
    request_id: str,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    mmctl: dict[str, Any],
) -> dict[str, Any]:
    body = {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": request_id, "body": body},
        "error": None,
        "mmctl": mmctl,
    }


def error_line(
    custom_id: str, code: str, message: str, status: int = 400, mmctl: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": None, "body": None},
        "error": {"code": code, "message": message},
        "mmctl": mmctl or {},
    }


def _line_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


class OutputFile:
    """Lines appended and flushed one by one; the ids already written (``done``)."""

    def __init__(self, path: Path, *, resume: bool, overwrite: bool) -> None:
        self.path = path
        self.done: set[str] = set()
        if path.is_dir():
            raise UsageError(f"-o {path} is a directory")
        exists = path.exists() and path.stat().st_size > 0
        if exists and not (resume or overwrite):
            raise UsageError(
                f"{path} already holds results",
                hint="--resume continues it (skipping the ids in it), --overwrite starts over",
            )
        if resume and exists:
            self.done = self._read_done()
        mode = "a" if resume else "w"
        try:
            self._file: IO[str] = path.open(mode, encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write {path}: {err.strerror}") from None

    def _read_done(self) -> set[str]:
        raw = self.path.read_bytes()
        cut = raw.rfind(b"\n") + 1
        if cut < len(raw):  # a torn last line from a killed run: drop it
            with self.path.open("r+b") as f:
                f.truncate(cut)
        done = set()
        for n, line in enumerate(raw[:cut].splitlines(), 1):
            try:
                doc = json.loads(line)
                done.add(str(doc["custom_id"]))
            except (ValueError, KeyError, TypeError):
                raise InputError(f"--resume: {self.path}:{n} is not a batch output line") from None
        return done

    def write(self, doc: dict[str, Any]) -> None:
        self._file.write(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n")
        self._file.flush()
        self.done.add(str(doc["custom_id"]))

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
