"""Proxy variables: loopback is never proxied; other addresses go through the
proxy unless no_proxy exempts them (Go's rules, as grpcurl applies them).

The proxy here is a stand-in HTTP CONNECT proxy on 127.0.0.1 that records
what it was asked for and tunnels names it knows to the stub worker.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import pytest

PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")
NO_PROXY_VARIABLES = ("no_grpc_proxy", "no_proxy", "NO_PROXY")


class ConnectProxy:
    """Answers ``CONNECT host:port``: tunnels a host in ``routes`` to its
    address, refuses (502) anything else; ``asked`` lists every CONNECT target."""

    def __init__(self, routes: dict[str, tuple[str, int]]) -> None:
        self.routes, self.asked = routes, []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                conn.close()
                return
            head += chunk
        first = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = first.split(" ", 2)
        self.asked.append(target)
        host = target.rsplit(":", 1)[0]
        if method != "CONNECT" or host not in self.routes:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            conn.close()
            return
        upstream = socket.create_connection(self.routes[host])
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(stub, monkeypatch):
    for name in (*PROXY_VARIABLES, *NO_PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    port = int(stub.running.address.rsplit(":", 1)[1])
    p = ConnectProxy({"worker.invalid": ("127.0.0.1", port)})
    yield p
    p.close()


@pytest.mark.parametrize("variable", PROXY_VARIABLES)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
def test_loopback_is_never_proxied(cli, stub, proxy, monkeypatch, variable, host):
    if host == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    port = int(stub.running.address.rsplit(":", 1)[1])
    forward = None
    if host in ("[::1]", "127.0.0.2"):  # the stub listens on 127.0.0.1 only
        forward = _forwarder(host.strip("[]"), port)
        port = forward.getsockname()[1]
    monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
    try:
        res = cli("health", "-t", f"{host}:{port}", "--json", "--timeout", "5")
    finally:
        if forward is not None:
            forward.close()
    assert res.code == 0, res.err
    assert json.loads(res.out)["healthy"] is True
    assert proxy.asked == []


def test_a_dead_proxy_does_not_stop_a_loopback_health_check(cli, stub, proxy, monkeypatch):
    # http_proxy names a port nobody listens on (it was exit 5: "failed to connect … :9").
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    res = cli("health", "-t", stub.running.address, "--timeout", "5")
    assert res.code == 0, res.err


@pytest.mark.parametrize("variable", PROXY_VARIABLES)
def test_another_host_goes_through_the_proxy(cli, proxy, monkeypatch, variable):
    monkeypatch.setenv(variable, f"127.0.0.1:{proxy.port}")  # no scheme: http, as Go reads it
    res = cli("health", "-t", "worker.invalid:50051", "--json", "--timeout", "10")
    assert res.code == 0, res.err
    assert proxy.asked == ["worker.invalid:50051"]


@pytest.mark.parametrize(
    "no_proxy", ["*", "worker.invalid", ".invalid", "*.invalid", "worker.invalid:50051",
                 "example.com, worker.invalid"],
)  # fmt: skip
def test_no_proxy_exempts_a_host_as_go_does(cli, proxy, monkeypatch, no_proxy):
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", no_proxy)
    res = cli("health", "-t", "worker.invalid:50051", "--timeout", "3")
    assert res.code == 5  # dialled directly: the name does not resolve
    assert proxy.asked == []


@pytest.mark.parametrize("no_proxy", ["other.invalid", "worker.invalid:1234", "orker.invalid"])
def test_no_proxy_entries_that_do_not_match_leave_the_proxy(cli, proxy, monkeypatch, no_proxy):
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", no_proxy)
    res = cli("health", "-t", "worker.invalid:50051", "--timeout", "10")
    assert res.code == 0, res.err
    assert proxy.asked == ["worker.invalid:50051"]


def _forwarder(host: str, port: int) -> socket.socket:
    """A plain TCP forwarder listening on ``host`` (another loopback address) to the stub."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen()

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", port))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server
