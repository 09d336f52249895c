"""Every shell and Python example of the documentation site and the README runs.

Each fenced ``sh``/``bash``/``python`` block of ``docs/`` (the root documents
the site includes too) and of README.md runs as a reader would run it: in a fresh folder that
holds the files the examples name, against a stub worker on 127.0.0.1 (a
``mmctl stub-worker`` as a reader starts it, or the one the example starts),
bounded in time. A block that
cannot run here — a GPU worker, a Ray cluster, minutes of load — says why on
the line above it, ``<!-- not run: … -->``, and is not run.

What the folder holds: ``clip.mp4`` and ``clip2.mp4`` (the red/blue clip),
``photo.jpg`` / ``photo.png`` (a generated picture), ``question.txt``,
``eval.jsonl`` (two short-form batch lines), and model folders named as their
published checkpoints, made of that family's published files in
``tests/fixtures/families/`` (mmctl reads no weights). ``localhost:50051`` and
``--port 50051`` become the port of this run's worker; ``$MMCTL_TARGET`` names
it too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mmctl.media import synth

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FAMILIES = ROOT / "tests" / "fixtures" / "families"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"^<!-- not run: (\S.*?) -->$")
LANGS = ("sh", "bash", "python")
#: The folder names the examples use -> the family fixtures they stand for.
MODEL_DIRS = {
    "llava-1.5-7b-hf": "llava",
    "llava-v1.6-mistral-7b-hf": "llava_next",
    "llava-onevision-qwen2-7b-ov-hf": "llava_onevision",
    "Llama-4-Scout-17B-16E-Instruct": "llama4",
}
TIMEOUT_S = 240


def _hooks():
    spec = importlib.util.spec_from_file_location("mmctl_docs", DOCS / "hooks" / "mmctl_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Example:
    page: str
    number: int  # the page's n-th example
    lang: str
    code: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}#{self.number}"


def examples() -> list[Example]:
    hooks = _hooks()
    found = []
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        page = path.relative_to(DOCS if path.is_relative_to(DOCS) else ROOT).as_posix()
        folder = page.rpartition("/")[0]

        def included(m: re.Match[str], folder: str = folder) -> str:
            return hooks.include(m.group(1), folder, optional="if present" in m.group(0))

        text = hooks._INCLUDE.sub(included, path.read_text())
        number = 0
        for m in FENCE.finditer(text):
            if m.group(1) not in LANGS:
                continue
            number += 1
            above = text[: m.start()].rstrip("\n").rpartition("\n")[2]
            reason = NOT_RUN.match(above)
            found.append(Example(page, number, m.group(1), m.group(2), reason and reason.group(1)))
    return found


EXAMPLES = examples()
RUN = [e for e in EXAMPLES if e.not_run is None]


def test_the_docs_have_examples_and_each_one_not_run_says_why():
    assert len(RUN) >= 20, [e.name for e in RUN]
    pages = {e.page for e in RUN}
    assert {"README.md", "getting-started.md", "python-api.md", "commands/send.md"} <= pages
    # A marker that is not right above a block would leave it unmarked: none stray.
    for path in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = path.read_text()
        for m in re.finditer(r"^<!-- not run:.*$", text, re.M):
            after = text[m.end() :].lstrip("\n")
            assert after.startswith(tuple(f"```{lang}" for lang in LANGS)), (path, m.group(0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def folder(tmp_path, red_blue) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("clip.mp4", "clip2.mp4"):
        shutil.copy(red_blue, work / name)
    picture = synth.pattern_frame(2, 120, 160)
    synth.write_image(work / "photo.png", picture)
    synth.write_image(work / "photo.jpg", picture, quality=95)
    (work / "question.txt").write_text("Which colours appear, in order?\n")
    lines = [
        {"id": "q1", "prompt": "Which colours appear, in order?", "media": ["clip.mp4"]},
        {"id": "q2", "prompt": "Which colours are in it?", "media": ["photo.png"]},
    ]
    (work / "eval.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for name, family in MODEL_DIRS.items():
        (work / name).symlink_to(FAMILIES / family, target_is_directory=True)
    return work


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> Iterator[int]:
    """`mmctl stub-worker` as a reader starts it (a default vLLM worker's
    behaviour: uint8 pixels), on a free port; its port."""
    log = tmp_path_factory.mktemp("worker") / "stderr"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json"],
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        ready = json.loads(proc.stdout.readline() or "{}")
        assert ready.get("event") == "ready", log.read_text()
        yield ready["port"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


@pytest.mark.parametrize("example", RUN, ids=lambda e: e.name)
def test_example_runs(example, folder, worker, tmp_path):
    own_worker = "mmctl stub-worker" in example.code and "--port 50051" in example.code
    port = _free_port() if own_worker else worker
    code = example.code.replace("localhost:50051", f"127.0.0.1:{port}")
    code = code.replace("--port 50051", f"--port {port}")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MMCTL_TARGET": f"127.0.0.1:{port}",
        "MMCTL_CACHE_DIR": str(tmp_path / "cache"),
        "NO_COLOR": "1",
    }
    if example.lang == "python":
        (folder / "example.py").write_text(code)
        argv = [sys.executable, "example.py"]
    else:
        argv = ["bash", "-e", "-x", "-o", "pipefail", "-c", code]  # -x: the report names the line
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as o, err.open("wb") as e:
        # A session of its own: what the example leaves running (a worker
        # started with `&`) is stopped with it, and nothing else is.
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=o, stderr=e,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            code_ = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code_ = None
        finally:
            with contextlib.suppress(ProcessLookupError):  # nothing of it left running
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    report = f"{example.name}\n--- stdout\n{out.read_text()}\n--- stderr\n{err.read_text()}"
    assert code_ == 0, report
