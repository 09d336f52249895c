"""Shared by the send tests: a private bundle cache and no inherited target."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMCTL_TARGET", raising=False)


@pytest.fixture
def send_json(cli):
    """``mmctl send ARGS --target STUB --json``."""

    def run(stub, *args):
        return cli("send", *args, "--target", stub.running.address, "--json")

    return run
