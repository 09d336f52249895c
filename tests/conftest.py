"""Shared fixtures: the CLI runner, generated media, the built-in model."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mmctl.cli.app import main
from mmctl.media import synth
from mmctl.transport.shm import own_files
from mmctl.wire import proto


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> dict:
        return json.loads(self.out)


def check_documents(out: str) -> list[dict]:
    """Every line of a ``--json`` run's stdout: a document that names its schema
    and validates against it (``mmctl/schemas/``). Run on every ``cli(…,
    "--json")`` of the suite, so each document a test reads is checked."""
    docs = []
    for line in out.splitlines():
        doc = json.loads(line)
        assert isinstance(doc, dict) and "schema" in doc, line[:200]
        validator(doc["schema"]).validate(doc)
        docs.append(doc)
    return docs


def validator(schema_id: str):
    """The validator of ``mmctl.<name>/<version>``'s JSON Schema (the version
    this mmctl prints: an older one has no file)."""
    import jsonschema

    from mmctl import schemas

    name = schema_id.removeprefix("mmctl.").partition("/")[0]
    assert schemas.schema_id(name) == schema_id, f"{schema_id}: not what this mmctl prints"
    schema = schemas.load(name)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def cli(capsys):
    """Run ``mmctl ARGS`` in-process; returns code, stdout, stderr."""

    def run(*argv) -> CliResult:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        if "--json" in (args := [str(a) for a in argv]) and "--help" not in args:
            check_documents(out)
        return CliResult(code, out, err)

    return run


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory) -> Iterator[None]:
    """mmctl's cache in the session's temp folder: the suite never reads nor grows
    the user's ~/.cache/mmctl (tests that need an empty one set their own)."""
    from mmctl.settings import CACHE_DIR

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_DIR, str(tmp_path_factory.mktemp("mmctl-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _ray_patience() -> Iterator[None]:
    """Ray waits 30 s for a new head's GCS to bind its port, then gives up; on a
    loaded 2-core machine (CI runs the engine check beside the suite) it once took
    longer. Ray's own setting, for every cluster the tests start (and their
    subprocesses)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_gcs_server_port_wait_time_s", "120")
        yield


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """tests/fixtures: committed media (never encoded at test time) and goldens."""
    return Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def red_blue(media_dir) -> Path:
    """2 s red then 2 s blue, 8 fps, 128x96 (4 temporal patches at 2 fps)."""
    return synth.color_clip(media_dir / "red-blue.mp4")


@pytest.fixture(scope="session")
def picture(media_dir) -> Path:
    return synth.write_image(media_dir / "picture.png", synth.pattern_frame(3, 100, 140))


@pytest.fixture(scope="session")
def builtin_model():
    from mmctl.models.model import load_model

    return load_model()


# ---- stub workers on 127.0.0.1, free ports ----


class Stub:
    def __init__(self, running, log: io.StringIO) -> None:
        from mmctl.wire.proto import UNLIMITED

        self.running, self.log = running, log
        self.channel = grpc.insecure_channel(running.address, options=UNLIMITED)
        self.engine = proto.engine_grpc.VllmEngineStub(self.channel)

    def generate(self, req, timeout: float = 30) -> tuple[list[int], object]:
        """(all output token ids, the Complete message)."""
        tokens: list[int] = []
        complete = None
        for resp in self.engine.Generate(req, timeout=timeout):
            if resp.HasField("chunk"):
                tokens.extend(resp.chunk.token_ids)
            else:
                complete = resp.complete
                if not req.stream:
                    tokens.extend(complete.output_ids)
        return tokens, complete

    def close(self) -> None:
        self.channel.close()
        self.running.stop(grace=0.5)


def _stub(model, **policy_and_cfg) -> Stub:
    from mmctl.worker import checks
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    cfg_keys = {"answer", "delay_ms", "allowed_local_media_path", "max_message_mb",
                "max_concurrent_requests", "record_dir"}  # fmt: skip
    cfg_kw = {k: v for k, v in policy_and_cfg.items() if k in cfg_keys}
    policy = checks.Policy(**{k: v for k, v in policy_and_cfg.items() if k not in cfg_keys})
    log = io.StringIO()
    running = start(StubConfig(model=model, policy=policy, log=log, **cfg_kw), port=0)
    return Stub(running, log)


@pytest.fixture(scope="module")
def stub(builtin_model) -> Iterator[Stub]:
    s = _stub(builtin_model)
    yield s
    s.close()


@pytest.fixture
def make_stub(builtin_model):
    made: list[Stub] = []

    def make(model=None, **kw) -> Stub:
        s = _stub(model or builtin_model, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves files this process made in /dev/shm (other
    processes' files come and go meanwhile and never count)."""
    before = set(own_files())
    yield
    after = set(own_files())
    assert after <= before, f"leaked in /dev/shm: {sorted(after - before)}"


@pytest.fixture
def http_files(tmp_path) -> Iterator[tuple[Path, str]]:
    """A loopback HTTP server for a fresh folder: (the folder, its base URL)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    www = tmp_path / "www"
    www.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(www))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield www, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---- what a person sees in a terminal ----


class Screen:
    """A command's run in a pseudo-terminal, rendered by a terminal emulator."""

    def __init__(self, code: int, raw: bytes, lines: list[str]) -> None:
        self.code, self.raw, self.lines = code, raw, lines

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines).strip("\n")


@pytest.fixture
def terminal(tmp_path):
    """Run ``mmctl ARGS`` with stdout and stderr on one pseudo-terminal (as in
    an interactive shell) and render the bytes with pyte, so a test sees what
    stays on the screen after progress bars redraw and clear their lines."""
    import fcntl
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time

    import pyte

    def run(*argv, env: dict | None = None, cols: int = 120, rows: int = 60, timeout=60):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
        environ.update(TERM="xterm-256color", MMCTL_CACHE_DIR=str(tmp_path / "cache"))
        environ.update(env or {})
        proc = subprocess.Popen(
            [sys.executable, "-m", "mmctl", *map(str, argv)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=environ,
            close_fds=True,
        )
        os.close(slave)
        raw = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.1)
                if ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: the last writer closed the terminal
                        break
                    if not chunk:
                        break
                    raw += chunk
                elif proc.poll() is not None:
                    break
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            proc.kill()
            os.close(master)
        screen = pyte.Screen(cols, rows)
        pyte.ByteStream(screen).feed(raw)
        return Screen(code, raw, screen.display)

    return run
