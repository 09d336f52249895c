"""Whether a channel to a worker goes through an HTTP CONNECT proxy, decided as Go decides it.

gRPC's core reads ``grpc_proxy``/``https_proxy``/``http_proxy`` and sends
every name that ``no_grpc_proxy``/``no_proxy`` does not exempt through the
proxy — loopback included: with ``http_proxy`` set (a common corporate
default) and no ``no_proxy``, ``mmctl health -t 127.0.0.1:50051`` asked the
proxy for 127.0.0.1 and failed. grpcurl (Go's ``net/http`` proxy rules, which
grpc-go uses) never proxies ``localhost`` or a loopback address. mmctl decides
here, once per channel, and tells gRPC: ``grpc.enable_http_proxy=0`` for a
direct connection, else ``grpc.http_proxy`` with the proxy chosen.

The proxy is the first variable set of ``grpc_proxy``, ``https_proxy``
(or ``HTTPS_PROXY``), ``http_proxy`` (or ``HTTP_PROXY``) — gRPC's order, so a
remote worker is reached as any gRPC client on the machine reaches it.
The exemptions are Go's (``golang.org/x/net/http/httpproxy``): ``localhost``
and loopback addresses always; then the first set of ``no_grpc_proxy``,
``no_proxy``, ``NO_PROXY``, a comma-separated list of ``*`` (everything), an
IP or CIDR (``10.0.0.0/8``), or a domain — ``example.com`` matches it and its
subdomains, ``.example.com`` and ``*.example.com`` only subdomains — each
optionally with ``:port``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Where the proxy comes from, in gRPC's order (each lower case first, then upper case).
PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")
#: Where the exemptions come from (gRPC's own name first).
NO_PROXY_VARIABLES = ("no_grpc_proxy", "no_proxy", "NO_PROXY")
#: gRPC target prefixes that name a resolver; what follows is ``host:port``.
_RESOLVER_PREFIXES = ("dns:///", "dns:", "ipv4:", "ipv6:")


@dataclass(frozen=True)
class ProxyChoice:
    """How a channel reaches its worker: ``proxy`` (a URL) or directly, and why."""

    proxy: str | None
    reason: str

    def channel_options(self) -> list[tuple[str, str | int]]:
        if self.proxy is None:
            return [("grpc.enable_http_proxy", 0)]
        return [("grpc.enable_http_proxy", 1), ("grpc.http_proxy", self.proxy)]


def choose(address: str, environ: Mapping[str, str] | None = None) -> ProxyChoice:
    """The proxy (or none) for a channel to ``address`` (``host:port``, ``[v6]:port``,
    ``unix:…``), from the environment's proxy variables."""
    env = os.environ if environ is None else environ
    if address.startswith(("unix:", "unix-abstract:", "vsock:")):
        return ProxyChoice(None, "a local socket")
    variable, proxy = _first(env, PROXY_VARIABLES)
    if not proxy:
        return ProxyChoice(None, "no proxy variable is set")
    host, port = _host_port(address)
    if host == "localhost" or _is_loopback(host):
        return ProxyChoice(None, f"{host} is loopback: never proxied")
    exempt_by, exemptions = _first(env, NO_PROXY_VARIABLES)
    entry = _exempting(host, port, exemptions)
    if entry is not None:
        return ProxyChoice(None, f"{exempt_by} has {entry!r}")
    return ProxyChoice(_as_url(proxy), f"{variable}")


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return "", ""


def _host_port(address: str) -> tuple[str, str]:
    for prefix in _RESOLVER_PREFIXES:
        if address.startswith(prefix):
            address = address[len(prefix) :]
            break
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = address, ""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.strip().lower(), port


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # Go compares ::ffff:a.b.c.d as a.b.c.d
    return ip


def _is_loopback(host: str) -> bool:
    ip = _ip(host)
    return ip is not None and ip.is_loopback


def _exempting(host: str, port: str, exemptions: str) -> str | None:
    """The ``no_proxy`` entry that exempts ``host:port``, or None (Go's ``useProxy``)."""
    ip = _ip(host)
    for raw in exemptions.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return entry
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            if ip is not None and ip.version == network.version and ip in network:
                return entry
            continue
        name, want_port = _entry_host_port(entry)
        if not name:
            continue
        if want_port and want_port != port:
            continue
        entry_ip = _ip(name)
        if entry_ip is not None:
            if ip is not None and ip == entry_ip:
                return entry
            continue
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):
            if host.endswith(name):
                return entry
        elif host == name or host.endswith("." + name):
            return entry
    return None


def _entry_host_port(entry: str) -> tuple[str, str]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port if port.isdigit() else ""
    return entry, ""  # a name, or an IPv6 address without a port


def _as_url(proxy: str) -> str:
    """``proxy:3128`` as ``http://proxy:3128`` (Go reads a bare host:port so too)."""
    return proxy if "://" in proxy else f"http://{proxy}"
