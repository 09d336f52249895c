"""The stub worker under hostile load: stalled connections, slow generations,
oversized messages, memory after a large request."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mmctl.wire import proto

STALLED = 64


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
    )


def _literal_headers(pairs: list[tuple[str, str]]) -> bytes:
    """HPACK literals without indexing or Huffman coding (short names and values)."""
    out = b""
    for name, value in pairs:
        out += b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
    return out


def stalled_generate(port: int) -> socket.socket:
    """A raw HTTP/2 connection whose Generate message announces 1000 bytes and sends 7."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(0x4, 0, 0, b""))
    headers = _literal_headers([
        (":method", "POST"),
        (":scheme", "http"),
        (":path", f"/{proto.SERVICE_NAME}/Generate"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ])  # fmt: skip
    sock.sendall(_frame(0x1, 0x4, 1, headers))  # HEADERS, END_HEADERS, stream 1
    sock.sendall(_frame(0x0, 0, 1, b"\x00" + (1000).to_bytes(4, "big") + b"\x0a" * 7))
    return sock


def health_answers_within(address: str, seconds: float) -> float:
    """Both health services answer on a fresh connection; returns the slower time."""
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=5)
        engine = proto.engine_grpc.VllmEngineStub(channel)
        standard = health_pb2_grpc.HealthStub(channel)
        t0 = time.perf_counter()
        assert engine.HealthCheck(proto.engine_pb2.HealthCheckRequest(), timeout=seconds).healthy
        took = time.perf_counter() - t0
        t0 = time.perf_counter()
        answer = standard.Check(health_pb2.HealthCheckRequest(), timeout=seconds)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        return max(took, time.perf_counter() - t0)


def test_sixty_four_stalled_connections_do_not_starve_health(make_stub):
    stub = make_stub()
    with ExitStack() as stack:
        for _ in range(STALLED):
            stack.callback(stalled_generate(stub.running.port).close)
        time.sleep(0.5)  # every stalled message has reached the server
        took = health_answers_within(stub.running.address, 1.0)
    assert took < 1.0


def test_slow_generations_do_not_starve_health_and_the_rest_are_refused(make_stub, video_request):
    stub = make_stub(delay_ms=5000, max_concurrent_requests=STALLED)
    req, _ = video_request()
    calls = []
    try:
        for n in range(STALLED):
            req.request_id = f"slow-{n}"
            calls.append(stub.engine.Generate(req, timeout=60))
        deadline = time.time() + 20
        while stub.running.servicer.requests.admitted < STALLED and time.time() < deadline:
            time.sleep(0.05)
        assert stub.running.servicer.requests.admitted == STALLED
        assert health_answers_within(stub.running.address, 1.0) < 1.0
        req.request_id = "one-too-many"
        with pytest.raises(grpc.RpcError) as err:
            stub.generate(req)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "at most 64 requests at once" in err.value.details()
    finally:
        for call in calls:
            call.cancel()


def test_a_message_over_max_message_mb_is_resource_exhausted(make_stub, video_request):
    stub = make_stub(max_message_mb=1)
    req, _ = video_request()
    req.mm_inputs.pixel_values.inline += b"\0" * (1024 * 1024)
    with pytest.raises(grpc.RpcError) as err:
        stub.generate(req)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert health_answers_within(stub.running.address, 1.0) < 1.0


def test_a_stop_iteration_in_the_work_pool_ends_the_request_and_not_the_wait(
    make_stub, video_request, monkeypatch
):
    """asyncio cannot put a StopIteration in a future: unconverted, the request
    would wait for ever (here: its 10 s deadline) and the error would be lost."""
    stub = make_stub()

    def stop(incoming):
        raise StopIteration("no more answers")

    monkeypatch.setattr(stub.running.servicer, "_answer", stop)
    req, _ = video_request()
    with pytest.raises(grpc.RpcError) as err:
        stub.generate(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert "StopIteration: no more answers" in err.value.details()


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        line = next(x for x in status if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _bench(address: str, size: str) -> dict:
    argv = [sys.executable, "-m", "mmctl", "bench", "-t", address, "--sizes", size,
            "--num-prompts", "1", "--warmup", "0", "--transport", "inline", "--no-floors",
            "--max-tokens", "4", "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RSS from /proc")
def test_memory_goes_back_after_a_500_mb_request(tmp_path):
    # Normalized bf16 pixels: 500 MB of them fit one item under the encoder
    # budget (as uint8 they would be twice the patches, and refused).
    argv = [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json",
            "--max-message-mb", "600", "--no-device-normalize"]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as stub:
        try:
            assert stub.stdout is not None
            ready = json.loads(stub.stdout.readline())
            address = ready["address"]
            _bench(address, "1MB")  # warm: tokenizer, code paths, gRPC buffers
            before = _rss_mb(stub.pid)
            big = _bench(address, "500MB")
            after = _rss_mb(stub.pid)
        finally:
            stub.terminate()
    assert big["prepared"][0]["payload_bytes"] > 495_000_000
    assert [(r["completed"], r["failed"]) for r in big["runs"]] == [(1, 0)]
    print(f"stub RSS: {before:.0f} MB before, {after:.0f} MB after a 500 MB request")
    assert after - before < 100, (before, after)
