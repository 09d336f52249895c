"""The proxy decision, rule by rule (Go's ``httpproxy`` rules; the channels are
tested against a stand-in proxy in tests/client/test_proxy.py)."""

from __future__ import annotations

import pytest

from mmctl.client.proxy import choose

PROXY = {"http_proxy": "http://proxy.corp:3128"}


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:50051", "127.9.9.9:1", "localhost:50051", "LOCALHOST:50051", "[::1]:50051",
     "[::ffff:127.0.0.1]:50051", "dns:///localhost:50051", "ipv4:127.0.0.1:50051",
     "unix:/tmp/worker.sock"],
)  # fmt: skip
def test_loopback_and_local_sockets_are_direct(address):
    assert choose(address, PROXY).proxy is None


@pytest.mark.parametrize(
    ("no_proxy", "address", "proxied"),
    [
        ("", "gpu-box:50051", True),
        ("*", "gpu-box:50051", False),
        ("gpu-box", "gpu-box:50051", False),
        ("example.com", "a.b.example.com:1", False),
        ("example.com", "example.com:1", False),
        ("example.com", "badexample.com:1", True),
        (".example.com", "example.com:1", True),
        (".example.com", "a.example.com:1", False),
        ("*.example.com", "example.com:1", True),
        ("*.example.com", "a.example.com:1", False),
        ("example.com:50051", "example.com:50051", False),
        ("example.com:50051", "example.com:50052", True),
        ("10.0.0.0/8", "10.1.2.3:50051", False),
        ("10.0.0.0/8", "11.1.2.3:50051", True),
        ("10.1.2.3", "10.1.2.3:50051", False),
        ("10.1.2.3:80", "10.1.2.3:50051", True),
        ("[2001:db8::1]:50051", "[2001:db8::1]:50051", False),
        ("2001:db8::/32", "[2001:db8::5]:50051", False),
        (" , other , GPU-BOX ", "gpu-box:50051", False),
    ],
)
def test_no_proxy_entries(no_proxy, address, proxied):
    choice = choose(address, {**PROXY, "no_proxy": no_proxy})
    assert (choice.proxy is not None) is proxied, choice.reason


def test_which_variable_wins():
    env = {"http_proxy": "http://h:1", "https_proxy": "http://s:1", "grpc_proxy": "http://g:1"}
    assert choose("w:1", env).proxy == "http://g:1"
    del env["grpc_proxy"]
    assert choose("w:1", env).proxy == "http://s:1"
    assert choose("w:1", {"HTTP_PROXY": "h:1"}).proxy == "http://h:1"
    assert choose("w:1", {}).proxy is None
    assert choose("w:1", {**env, "no_grpc_proxy": "w", "no_proxy": ""}).proxy is None


def test_the_options_gRPC_is_given():
    assert choose("127.0.0.1:1", PROXY).channel_options() == [("grpc.enable_http_proxy", 0)]
    assert choose("w:1", PROXY).channel_options() == [
        ("grpc.enable_http_proxy", 1),
        ("grpc.http_proxy", "http://proxy.corp:3128"),
    ]
