"""`mmctl send`, `health`, `info`, `demo`, `shm gc` against stub workers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from mmctl.transport.shm import ShmArena, shm_dir

PROMPT = "Which colours appear, in order?"


@pytest.mark.parametrize("transport", ["inline", "shm", "auto"])
@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_video_answers_over_each_transport(
    send_json, cli, stub, red_blue, transport, stream, no_leaks
):
    r = send_json(stub, red_blue, "-p", PROMPT, "--transport", transport, stream)
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["answer"] == "red, blue" and doc["finish_reason"] == "stop"
    chosen = doc["decisions"]["transport"]
    assert chosen["value"] == ("shm" if transport in ("shm", "auto") else "inline")
    if transport == "auto":
        assert "shm_namespace_id matches" in chosen["reason"]
    if chosen["value"] == "shm":
        assert doc["bytes"]["shm"] == 192 * 1536 * 2 and doc["shm_files"]
        assert not any((shm_dir() / n).exists() for n in doc["shm_files"])
    assert {c["name"] for c in doc["checks"] if c["ran"]} >= {"mrope_walk", "modality_field"}
    for key in ("decode_s", "tokenize_s", "handoff_s", "ttft_s", "generation_s", "total_s"):
        assert key in doc["timings_s"]


def test_image_and_video_in_one_request(send_json, cli, stub, red_blue, picture):
    r = send_json(stub, picture, red_blue, "-p", "Compare.", "--shm")
    assert r.code == 0, r.err
    answer = r.json()["answer"]
    assert answer.endswith("red, blue") and ";" in answer  # image colours; video colours


def test_stdout_is_the_answer_alone_and_the_report_goes_to_stderr(cli, stub, red_blue):
    # ANSWER=$(mmctl send clip.mp4) is the answer; decisions and timings are for a person.
    r = cli("send", red_blue, "--target", stub.running.address, "--shm")
    assert r.code == 0, r.err
    assert r.out == "red, blue\n"
    assert "time to first token" in r.err and "transport shm" in r.err
    assert not [line for line in r.err.splitlines() if line != line.rstrip()], r.err
    unstreamed = cli("send", red_blue, "--target", stub.running.address, "--no-stream")
    assert unstreamed.code == 0 and unstreamed.out == "red, blue\n", unstreamed.err


def test_build_for_a_worker_names_no_flag_that_was_not_given(cli, stub, red_blue, tmp_path):
    # Issue 44: the reasons said "--transport inline" and "--processing client",
    # options build does not even have.
    built = cli("build", red_blue, "-o", tmp_path / "r.pb", "-t", stub.running.address, "--json")
    assert built.code == 0, built.err
    decisions = built.json()["decisions"]
    assert decisions["transport"]["value"] == "inline"
    assert decisions["processing"]["value"] == "client"
    for name, decision in decisions.items():
        assert "--" not in decision["reason"], (name, decision)
    human = cli("build", red_blue, "-o", tmp_path / "r2.pb", "-t", stub.running.address)
    assert human.code == 0 and "--transport" not in human.err and "--processing" not in human.err


def test_replay_a_built_request(send_json, cli, stub, red_blue, tmp_path, no_leaks):
    req = tmp_path / "req.pb"
    built = cli("build", red_blue, "-p", PROMPT, "-o", req, "-t", stub.running.address, "--json")
    assert built.code == 0, built.err
    assert built.json()["decisions"]["pixel_dtype"]["value"] == "bfloat16"  # the stub's dtype
    r = send_json(stub, "--request", req, "--shm")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["answer"] == "red, blue" and doc["bytes"]["shm"] == 192 * 1536 * 2


def test_device_normalizing_worker_gets_uint8(send_json, cli, make_stub, red_blue):
    dn = make_stub(device_normalize=True)
    r = send_json(dn, red_blue, "-p", PROMPT)
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["decisions"]["pixel_dtype"]["value"] == "uint8" and doc["answer"] == "red, blue"
    assert "uint8 via" in dn.log.getvalue()
    refused = send_json(dn, red_blue, "--pixel-dtype", "float32")
    assert refused.code == 6 and "normalize these floats twice" in refused.err


def test_legacy_worker_gets_float32_and_a_refusal_for_video(
    send_json, cli, make_stub, red_blue, picture
):
    old = make_stub(legacy_proto=True)
    r = send_json(old, red_blue, "-p", PROMPT)
    assert r.code == 6
    assert "no `modality` field" in r.err and "treat the video as an image" in r.err
    image = send_json(old, picture, "-p", "Colour?")
    assert image.code == 0, image.err
    assert image.json()["decisions"]["pixel_dtype"]["value"] == "float32"


def test_worker_processing_and_compare(send_json, cli, stub, red_blue):
    r = send_json(stub, red_blue, "-p", PROMPT, "--processing", "worker")
    assert r.code == 0, r.err
    assert r.json()["answer"] == "red, blue"
    both = send_json(stub, red_blue, "--compare-processing")
    assert both.code == 0 and both.json()["same_answer"]


def test_bundle_is_fetched_verified_and_cached(send_json, cli, stub, red_blue):
    first = send_json(stub, red_blue).json()["model"]["bundle"]
    assert not first["cached"] and first["bytes"] > 0
    second = send_json(stub, red_blue).json()["model"]["bundle"]
    assert second["cached"] and second["sha256"] == first["sha256"]


def test_tampered_bundle_is_rejected(send_json, cli, make_stub, red_blue):
    bad = make_stub()
    from mmctl.checkpoint.source import build_bundle

    data, _ = build_bundle(bad.running.servicer.cfg.model.source)
    bad.running.servicer._bundle = (data, "0" * 64)
    r = send_json(bad, red_blue)
    assert r.code == 3 and "corrupt" in r.err


def test_real_reader_reads_our_shm_files_byte_exact():
    import numpy as np
    from smg_grpc_proto.generated import common_pb2
    from smg_grpc_servicer import mm_shm

    payload = np.arange(300_000, dtype=np.float32).reshape(1000, 300)
    with ShmArena() as arena:
        seg = arena.put(payload)
        handle = common_pb2.ShmHandle(name=seg.name, offset=0, nbytes=seg.nbytes)
        raw = mm_shm.tensor_payload_bytes_from_shm(handle)
        assert raw == payload.tobytes()
        assert not seg.path.exists()  # the real reader unlinked it
        assert arena.close() == []


def test_worker_not_running_exits_5(cli, red_blue):
    r = cli("send", red_blue, "--target", "127.0.0.1:1", "--timeout", "3")
    assert r.code == 5 and "unavailable" in r.err


def test_deadline_exits_5_and_cleans_shm(cli, make_stub, red_blue, no_leaks):
    slow = make_stub(delay_ms=1000)
    r = cli("send", red_blue, "--target", slow.running.address, "--shm", "--timeout", "1.5")
    assert r.code == 5 and "deadline" in r.err


def test_shm_to_a_worker_on_another_dev_shm_is_refused_before_sending(
    send_json, cli, stub, red_blue, replay, monkeypatch, no_leaks
):
    # Issue 44: sent anyway, the worker could open no file (exit 4, "No such
    # file or directory"); `bench --transport shm` already refused this case.
    monkeypatch.setattr("mmctl.client.route.namespace_id", lambda: "another-host:1")
    sent = stub.log.getvalue().count("[stub] Generate")  # the stub is the module's
    for media in ([red_blue], ["--request", replay]):
        r = send_json(stub, *media, "--shm")
        assert r.code == 6, r.err
        assert "--transport shm: the worker does not share this host's /dev/shm" in r.err
        assert "here another-host:1" in r.err and "Hint: " in r.err
    assert stub.log.getvalue().count("[stub] Generate") == sent  # nothing was sent
    auto = send_json(stub, red_blue)  # auto still goes inline, and says why
    assert auto.code == 0, auto.err
    assert "different /dev/shm" in auto.json()["decisions"]["transport"]["reason"]


@pytest.fixture
def replay(cli, stub, red_blue, tmp_path):
    req = tmp_path / "req.pb"
    built = cli("build", red_blue, "-o", req, "-t", stub.running.address)
    assert built.code == 0, built.err
    return req


def test_limits_are_checked_before_shipping(send_json, cli, make_stub, red_blue, no_leaks):
    tight = make_stub(encoder_budget=40)
    r = send_json(tight, red_blue, "--shm")
    assert r.code == 3 and "mm_encoder_budget" in r.err and "--max-pixels" in r.err
    assert "[stub] Generate" not in tight.log.getvalue()  # nothing was sent


def test_health_and_info(cli, stub, make_stub):
    h = cli("health", "--target", stub.running.address, "--json")
    assert h.code == 0 and h.json()["healthy"] and h.json()["grpc_health"] == "SERVING"
    info = cli("info", "--target", stub.running.address, "--json").json()
    assert info["shm"]["shared"] and info["capabilities"]["modality_field"]
    assert info["server"]["mm_item_limits"] == "image=8,video=2"
    # The worker's bundle, resolved as transformers resolves it, each value with its file.
    vision = info["vision"]
    assert vision["family"] == "qwen3-vl" and "bundle" in vision["model"]
    assert vision["settings"]["video_max_pixels"] == {
        "value": 25165824,
        "from": "video_preprocessor_config.json",
    }
    assert vision["settings"]["image_min_pixels"]["from"] == "preprocessor_config.json"
    human = cli("info", "--target", stub.running.address)
    assert "video_preprocessor_config.json: video_min_pixels" in " ".join(human.out.split())
    old = cli("info", "--target", make_stub(legacy_proto=True).running.address, "--json").json()
    assert old["capabilities"]["modality_field"] is False and not old["advertises_capabilities"]
    down = cli("health", "--target", "127.0.0.1:1", "--timeout", "2")
    assert down.code == 5


def test_send_sweeps_dead_files_and_says_so_in_json_only(send_json, stub, red_blue, tmp_path,
                                                          monkeypatch):  # fmt: skip
    # Another process's killed client left a file: swept before sending, named
    # in --json, and no line on stderr (on a shared machine it is not news).
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("MMCTL_SHM_DIR", str(folder))
    (folder / "mmctl-424242-1-abcd1234").write_bytes(b"x" * 10)  # nobody holds its lock
    r = send_json(stub, red_blue, "--shm")
    assert r.code == 0, r.err
    assert r.json()["shm_swept"] == ["mmctl-424242-1-abcd1234"]
    assert "shm file" not in r.err and list(folder.iterdir()) == []


def test_shm_gc_removes_only_files_no_live_process_owns(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_SHM_DIR", str(tmp_path))
    # A file nobody holds, named after our own (live) PID: a PID proves nothing.
    (tmp_path / f"mmctl-{os.getpid()}-1-abcd1234").write_bytes(b"x" * 10)
    with ShmArena(tmp_path) as arena:
        live = arena.put(np.zeros(4, np.uint8))  # ours, locked while the arena is open
        listed = cli("shm", "gc", "--dry-run", "--json").json()
        assert {f["name"]: f["alive"] for f in listed["files"]} == {
            f"mmctl-{os.getpid()}-1-abcd1234": False,
            live.name: True,
        }
        assert listed["removed"] == []
        done = cli("shm", "gc", "--json").json()
        assert done["removed"] == [f"mmctl-{os.getpid()}-1-abcd1234"]
        assert live.path.exists()  # in use: kept


def test_shm_unavailable_fails_clearly_and_auto_falls_back(
    send_json, cli, stub, red_blue, tmp_path, monkeypatch
):
    monkeypatch.setenv("MMCTL_SHM_DIR", str(tmp_path / "missing"))
    forced = send_json(stub, red_blue, "--shm")
    assert forced.code == 3 and "does not exist" in forced.err
    auto = send_json(stub, red_blue, "--transport", "auto")
    assert auto.code == 0
    assert "falling back to inline" in auto.json()["decisions"]["transport"]["reason"]


def test_demo(cli):
    r = cli("demo", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["ok"] and doc["inline"]["answer"] == doc["shm"]["answer"] == "red, blue"


# ---- failure paths with real processes ----------------------------------------


def _mmctl(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mmctl", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _start_stub(*args) -> tuple[subprocess.Popen, str]:
    proc = _mmctl("stub-worker", "--port", "0", "--json", *args)
    line = proc.stdout.readline()
    ready = json.loads(line)
    assert ready["event"] == "ready"
    return proc, ready["address"]


def _mine(pid: int) -> list[str]:
    return [p.name for p in shm_dir().iterdir() if p.name.startswith(f"mmctl-{pid}-")]


def test_stub_worker_process_ready_line_and_clean_sigterm():
    proc, address = _start_stub()
    assert address.startswith("127.0.0.1:")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert "shutting down" in proc.stderr.read()


@pytest.mark.parametrize("after_s", [0.1, 0.4, 0.8])
def test_sigterm_while_the_stub_starts_exits_130_or_0(after_s):
    """Before the ready line a stop signal is an interruption (130); after it,
    the normal way out (0). Never 3 from a loader swallowing it, never a traceback."""
    proc = _mmctl("stub-worker", "--port", "0", "--json")
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    if proc.returncode == -signal.SIGTERM:  # before the interpreter ran any of mmctl
        assert err == "" and out == ""
        return
    ready = '"event":"ready"' in out
    assert proc.returncode == (0 if ready else 130), err
    assert "Traceback" not in err


def test_worker_killed_mid_stream_exits_5_without_leaks(red_blue, tmp_path):
    stub, address = _start_stub("--delay-ms", "400")
    try:
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path)}
        client = _mmctl("send", red_blue, "--target", address, "--shm", env=env)
        time.sleep(2.5)  # model load, preprocessing, first tokens
        stub.kill()
        _, err = client.communicate(timeout=30)
        assert client.returncode == 5, err
        assert _mine(client.pid) == []
    finally:
        stub.kill()
        stub.wait()


def _active_requests(address: str) -> int:
    from mmctl.wire import proto

    with grpc.insecure_channel(address) as channel:
        engine = proto.engine_grpc.VllmEngineStub(channel)
        info = engine.GetServerInfo(proto.engine_pb2.GetServerInfoRequest(), timeout=5)
        return info.active_requests


def _wait_until_generating(address: str, seconds: float = 30) -> None:
    """Until the worker has a Generate in flight (start-up, preprocessing done)."""
    deadline = time.time() + seconds
    while _active_requests(address) == 0 and time.time() < deadline:
        time.sleep(0.1)
    assert _active_requests(address) > 0, "no Generate reached the worker"


def _wait_until_mmctl_handles_stops(proc: subprocess.Popen, seconds: float = 60) -> None:
    """Until mmctl's own code runs: ``mmctl._entry`` sets a SIGINT and then a SIGTERM
    handler first thing. Before that the interpreter is still starting and a SIGINT is
    Python's to answer, which no code of mmctl can change: exit 1 ("Fatal Python error:
    init_import_site") while ``site`` imports, a KeyboardInterrupt traceback after. A
    loaded machine stretches that start past any fixed sleep."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as status:
            caught = next(int(x.split()[1], 16) for x in status if x.startswith("SigCgt:"))
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.005)
    raise AssertionError(f"mmctl set no stop handlers within {seconds:g} s (exit {proc.poll()})")


def test_a_frozen_worker_is_detected_by_keepalive_exits_5_without_leaks(red_blue, tmp_path):
    """SIGSTOP the worker mid-generation: keepalive pings (1 s here, as
    MMCTL_KEEPALIVE_S allows) fail the call instead of waiting forever."""
    stub, address = _start_stub("--delay-ms", "5000")
    try:
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path), "MMCTL_KEEPALIVE_S": "1"}
        client = _mmctl("send", red_blue, "--target", address, "--shm", env=env)
        _wait_until_generating(address)
        stub.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        _, err = client.communicate(timeout=60)
        waited = time.monotonic() - frozen
        assert client.returncode == 5, err
        assert "unavailable" in err and waited < 30, (waited, err)
        assert _mine(client.pid) == []
    finally:
        stub.send_signal(signal.SIGCONT)
        stub.kill()
        stub.wait()


def test_sigint_while_waiting_exits_130_and_removes_shm_files(red_blue, tmp_path):
    stub, address = _start_stub("--delay-ms", "10000")
    try:
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path)}
        client = _mmctl("send", red_blue, "--target", address, "--shm", "--no-stream", env=env)
        # Not a fixed sleep: on a loaded machine the client may still be starting
        # its interpreter then, where a SIGINT is Python's to answer (exit 1).
        _wait_until_generating(address, seconds=120)  # the answer is 10 s away
        client.send_signal(signal.SIGINT)
        _, err = client.communicate(timeout=30)
        assert client.returncode == 130, err
        assert "interrupted" in err.lower()
        assert _mine(client.pid) == []
    finally:
        stub.send_signal(signal.SIGTERM)
        stub.wait(10)


def test_tls_with_ca_cert_and_headers(cli, builtin_model, red_blue, tmp_path):
    import shutil

    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    running = start(
        StubConfig(model=builtin_model), port=0, tls=(key.read_bytes(), cert.read_bytes())
    )
    try:
        target = f"localhost:{running.port}"
        plain = cli("health", "--target", target, "--timeout", "3")
        assert plain.code == 5  # a TLS server does not speak plaintext
        r = cli(
            "send",
            red_blue,
            "--target",
            target,
            "--tls",
            "--ca-cert",
            cert,
            "-H",
            "x-team:mm",
            "--json",
        )
        assert r.code == 0, r.err
        assert r.json()["answer"] == "red, blue"
    finally:
        running.stop(0.5)


def test_worker_refusal_exits_4(cli, make_stub, red_blue):
    dn = make_stub(device_normalize=True)
    r = cli(
        "send",
        red_blue,
        "--target",
        dn.running.address,
        "--pixel-dtype",
        "float32",
        "--skip-checks",
    )
    assert r.code == 4 and "INVALID_ARGUMENT" in r.err and "normalized twice" in r.err


def test_shm_full_auto_falls_back_inline_and_shm_fails(
    send_json, cli, stub, red_blue, monkeypatch, no_leaks
):
    import errno

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    auto = send_json(stub, red_blue, "-p", PROMPT, "--transport", "auto")
    assert auto.code == 0, auto.err
    doc = auto.json()
    assert doc["answer"] == "red, blue" and doc["bytes"]["shm"] == 0
    assert "full" in doc["decisions"]["transport"]["reason"]
    forced = send_json(stub, red_blue, "--shm")
    assert forced.code == 3 and "full" in forced.err


def test_worker_processing_with_file_urls(send_json, cli, make_stub, red_blue):
    allowed = make_stub(allowed_local_media_path=red_blue.parent)
    ok = send_json(allowed, red_blue, "-p", PROMPT, "--processing", "worker", "--media-ref", "file")
    assert ok.code == 0, ok.err
    assert ok.json()["answer"] == "red, blue"
    plain = make_stub()
    refused = send_json(plain, red_blue, "--processing", "worker", "--media-ref", "file")
    assert refused.code == 6 and "not file:" in refused.err


def test_replay_in_auto_falls_back_when_shm_is_full(
    send_json, cli, stub, red_blue, tmp_path, monkeypatch
):
    import errno

    req = tmp_path / "req.pb"
    assert cli("build", red_blue, "-p", PROMPT, "-o", req, "-t", stub.running.address).code == 0

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    r = send_json(stub, "--request", req, "--transport", "auto")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["answer"] == "red, blue" and doc["decisions"]["transport"]["value"] == "inline"


# ---- the modality check behind interceptors ----

REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


class _Deny(grpc.aio.ServerInterceptor):
    """A server interceptor refusing some calls with ``code`` (a handler of the same kind)."""

    def __init__(self, refuse, code, message):
        self.refuse, self.code, self.message = refuse, code, message

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or not self.refuse(details):
            return handler

        async def abort(request, context):
            await context.abort(self.code, self.message)

        kind = (handler.request_streaming, handler.response_streaming)
        make = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[kind]
        return make(abort)


@pytest.fixture
def guarded_stub(builtin_model):
    """A stub worker behind one interceptor; closed after the test."""
    import io

    from mmctl.worker import checks
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    made = []

    def make(interceptor, **policy):
        cfg = StubConfig(model=builtin_model, policy=checks.Policy(**policy), log=io.StringIO())
        running = start(cfg, port=0, interceptors=[interceptor])
        made.append(running)
        return running.address

    yield make
    for running in made:
        running.stop(grace=0)


def test_headers_reach_reflection_so_the_modality_check_runs(cli, guarded_stub, red_blue):

    def unauthenticated(details):
        return ("authorization", "Bearer s3cret") not in tuple(details.invocation_metadata)

    address = guarded_stub(_Deny(unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "no token"))
    res = cli("send", red_blue, "-t", address, "-H", "authorization: Bearer s3cret", "--json")
    assert res.code == 0, res.err
    check = next(c for c in json.loads(res.out)["checks"] if c["name"] == "modality_field")
    assert check == {"name": "modality_field", "ran": True, "ok": True, "by": "reflection"}


@pytest.mark.parametrize(
    ("legacy", "skip", "code"), [(False, False, 0), (True, False, 6), (True, True, 4)]
)
def test_without_reflection_video_needs_proof_of_a_new_worker(
    cli, guarded_stub, red_blue, legacy, skip, code
):

    address = guarded_stub(
        _Deny(lambda d: d.method == REFLECTION, grpc.StatusCode.UNIMPLEMENTED, "no reflection"),
        legacy_proto=legacy,
    )
    res = cli("send", red_blue, "-t", address, "--json", *(["--skip-checks"] if skip else []))
    assert res.code == code, res.err
    if code == 6:
        assert "cannot tell whether the worker knows video" in res.err
    elif code == 4:  # --skip-checks sent it; the old worker read the video as an image
        assert "image embedding token" in res.err
    else:  # the 0.4.28 capability fields prove a worker newer than `modality`
        check = next(c for c in json.loads(res.out)["checks"] if c["name"] == "modality_field")
        assert check["ran"] is True and check["ok"] is True and "capability" in check["by"]


def test_sigint_at_ten_points_of_a_send_always_exits_130_or_0(stub, red_blue, tmp_path):
    """Ctrl-C anywhere — imports, connecting, the bundle, the tokenizer load,
    decoding, generating — is 130 (or 0 once the answer is out), never
    another error's code, never a traceback, never a file left in /dev/shm."""
    env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "mmctl", "send", str(red_blue), "-t", stub.running.address,
            "--shm", "--json"]  # fmt: skip
    runs = []
    for _ in range(2):  # the first fills the bundle cache; the second is the run to spread over
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        runs.append(time.perf_counter() - start)
    whole = runs[-1]
    codes = []
    for n in range(1, 11):
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_until_mmctl_handles_stops(proc)
        time.sleep(max(0.0, started + whole * n / 11 - time.perf_counter()))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        codes.append(proc.returncode)
        if proc.returncode == -signal.SIGINT:
            # Python's own teardown, after main() returned, restores the default
            # handler: the shell reports 130 all the same, and the answer is out.
            assert json.loads(out)["answer"] == "red, blue", (n, err.decode())
            continue
        assert proc.returncode in (0, 130), (n, err.decode())
        assert b"Traceback" not in err
        if proc.returncode == 130:
            errors = [x for x in err.decode().splitlines() if x.startswith("Error: ")]
            assert len(errors) == 1 and errors[0].startswith("Error: interrupted by SIGINT"), (
                err.decode()
            )
        assert not [p for p in os.listdir(shm_dir()) if p.startswith(f"mmctl-{proc.pid}-")]
    assert codes.count(130) >= 3, codes  # the early points land before the answer


HANGING_CLEANUP = """
import sys, time
from mmctl.transport import shm
shm.ShmArena.close = lambda self: time.sleep(3600)  # a clean-up that never ends
from mmctl.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_whose_clean_up_hangs_still_exits_130_and_removes_shm_files(red_blue, tmp_path):
    """The watchdog (mmctl.signals): a stopped command exits within the grace
    period however its clean-up is stuck (and leaves no shm file of its own)."""
    stub, address = _start_stub("--delay-ms", "3000")
    try:
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path), "MMCTL_STOP_GRACE_S": "2"}
        argv = [sys.executable, "-c", HANGING_CLEANUP, "send", str(red_blue), "-t", address,
                "--shm", "--no-stream"]  # fmt: skip
        client = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _wait_until_generating(address)
        client.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        _, err = client.communicate(timeout=30)
        assert client.returncode == 130, err
        assert time.monotonic() - stopped < 10
        assert "clean-up did not finish within 2 s" in err
        assert _mine(client.pid) == []
    finally:
        stub.kill()
        stub.wait()


def test_an_aborted_generation_exits_9_with_the_partial_answer(cli, make_stub, red_blue):
    """A worker shutting down aborts what it generates (finish_reason abort):
    that is not an answer, so it is not exit 0."""
    import threading

    slow = make_stub(answer="echo", delay_ms=50)  # an answer of many tokens, slowly

    def abort_soon() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not len(slow.running.servicer.requests):
            time.sleep(0.01)
        time.sleep(0.3)
        slow.running.servicer.requests.abort_all()

    threading.Thread(target=abort_soon).start()
    res = cli("send", red_blue, "-t", slow.running.address, "--json")
    assert res.code == 9, res.err
    doc = json.loads(res.out)
    assert doc["finish_reason"] == "abort" and doc["completion_tokens"] > 0
    assert "the worker aborted the generation" in res.err


def test_pixels_that_would_round_twice_are_refused(send_json, stub, red_blue):
    # The stub's model runs in bfloat16: float16 pixels would be rounded twice.
    r = send_json(stub, red_blue, "--pixel-dtype", "float16")
    assert r.code == 6 and "rounded twice (float16, then bfloat16)" in r.err
    forced = send_json(stub, red_blue, "--pixel-dtype", "float16", "--skip-checks")
    assert forced.code == 0 and forced.json()["answer"] == "red, blue", forced.err


def test_max_tokens_beyond_the_context_is_refused_before_sending(send_json, cli, stub, red_blue):
    info = cli("info", "-t", stub.running.address, "--json").json()
    limit = info["model"]["max_context_length"]
    assert limit > 0
    r = send_json(stub, red_blue, "--max-tokens", limit)
    assert r.code == 6 and "max_context_length" in r.err and "--max-tokens" in r.err
    shown = cli("info", "-t", stub.running.address)
    assert f"{limit:,} tokens (max_context_length)" in shown.out
    assert [line.split()[0] for line in shown.out.splitlines()].count("vision") <= 1


@pytest.mark.parametrize("media", ["red_blue", "picture"])
def test_a_request_built_for_another_family_says_so(cli, red_blue, picture, media, tmp_path,
                                                     no_leaks):  # fmt: skip
    # Issue 44: replayed at a Llama 4 worker, a Qwen request said only "mm_inputs
    # (video) carries no aspect_ratios tensor" (or, first, a pixel dtype to
    # rebuild with): nothing said the file was built for another family.
    from mmctl.models.model import load_model
    from tests.conftest import _stub

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "families"
    req = tmp_path / "qwen.pb"
    built = cli("build", {"red_blue": red_blue, "picture": picture}[media], "-o", req)
    assert built.code == 0, built.err
    llama4 = _stub(load_model(model_dir=fixtures / "llama4"))
    try:
        r = cli("send", "--request", req, "--target", llama4.running.address)
    finally:
        llama4.close()
    assert r.code == 3, r.err
    assert "carries no aspect_ratios tensor" in r.err
    hint = r.err.split("Hint: ", 1)[1]
    assert "qwen3-vl" in hint and "read as llama4's" in hint and "mmctl build" in hint


def test_a_forced_family_the_workers_files_do_not_hold_leads_with_that(cli, red_blue, picture):
    # Issue 44: `--family llava` against a Qwen3.5 worker led with "config.json
    # has no vision_config.image_size".
    from mmctl.models.model import load_model
    from tests.conftest import _stub

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "families"
    qwen35 = _stub(load_model(model_dir=fixtures / "qwen3_5"))
    try:
        r = cli("send", picture, "--family", "llava", "--target", qwen35.running.address)
    finally:
        qwen35.close()
    assert r.code == 3, r.err
    message = r.err.splitlines()[0]
    assert message.startswith("Error: --family llava does not fit "), message
    assert "a qwen3.5 model's files (config.json has no vision_config.image_size)" in message
    assert "Hint: --family llava reads a llava model's files" in r.err
