"""A Client asks again about the same media: the pixels come from its cache,
the worker gets the same tensors and the same ``mm_hashes``, and every shared
memory file is still the request's own (the worker consumes each once)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import mmctl
from mmctl.request.view import batches, read_request
from mmctl.transport.shm import shm_dir

PROMPT = "Which colours appear, in order?"


def _received(folder):
    """Per recorded request: (pixel bytes, mm_hashes) of its batches."""
    out = []
    for path in sorted(folder.iterdir()):
        req = read_request(path)
        out.append([(b.pixel_values.inline, list(b.mm_hashes)) for b in batches(req)])
    return out


def _rows_add_up(result):
    rows = {k: v for k, v in result.timings.items() if k != "total_s"}
    assert sum(rows.values()) == pytest.approx(result.timings["total_s"], abs=1e-9)


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_a_second_ask_is_served_from_the_cache_with_the_same_request(
    make_stub, red_blue, tmp_path, transport, no_leaks
):
    record = tmp_path / "record"
    record.mkdir()
    stub = make_stub(record_dir=record)
    with mmctl.Client(stub.running.address) as client:
        first = client.send(red_blue, PROMPT, transport=transport)
        second = client.send(red_blue, "And now?", transport=transport)
        third = client.send(red_blue, PROMPT, transport=transport)
    assert [r.answer for r in (first, second, third)] == ["red, blue"] * 3
    assert first.items[0]["pixel_cache"] == "miss" and "decode_s" in first.timings
    for again in (second, third):
        assert again.items[0]["pixel_cache"] == "hit"
        assert "decode_s" not in again.timings and "pixel_cache_s" in again.timings
        assert again.pixel_cache["hits"] == 1 and again.pixel_cache["bytes"] > 0
        assert again.items[0]["content_hash"] == first.items[0]["content_hash"]
    for r in (first, second, third):
        _rows_add_up(r)
    assert third.pixel_cache["cache"]["hits"] == 2 and third.pixel_cache["cache"]["misses"] == 1
    received = _received(record)
    assert len(received) == 3 and received[0] == received[1] == received[2]
    if transport == "shm":  # three requests, three files, each read (and unlinked) by the stub
        assert all(len(r.shm_files) == 1 for r in (first, second, third))
        names = {r.shm_files[0] for r in (first, second, third)}
        assert len(names) == 3 and not any((shm_dir() / n).exists() for n in names)


def test_the_same_bytes_under_another_name_hit_and_other_settings_miss(
    make_stub, red_blue, tmp_path
):
    copy = tmp_path / "copy-of-the-clip.mp4"
    copy.write_bytes(red_blue.read_bytes())
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client:
        client.send(red_blue, PROMPT, transport="inline")
        renamed = client.send(copy, PROMPT, transport="inline")
        slower = client.send(copy, PROMPT, transport="inline", fps=1.0)
        as_floats = client.send(copy, PROMPT, transport="inline", pixel_dtype="float32")
    assert renamed.items[0]["pixel_cache"] == "hit"
    assert slower.items[0]["pixel_cache"] == "miss"
    assert slower.items[0]["frames"] != renamed.items[0]["frames"]
    assert as_floats.items[0]["pixel_cache"] == "miss"
    assert as_floats.items[0]["content_hash"] != renamed.items[0]["content_hash"]


def test_concurrent_asks_preprocess_once(make_stub, red_blue, no_leaks):
    stub = make_stub(delay_ms=20)

    async def main():
        async with mmctl.AsyncClient(stub.running.address) as client:
            return await asyncio.gather(
                *(client.send(red_blue, PROMPT, transport="shm") for _ in range(6))
            )

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["red, blue"] * 6
    how = sorted(r.items[0]["pixel_cache"] for r in results)
    assert how.count("miss") == 1 and set(how) <= {"miss", "hit", "shared"}
    assert len({r.items[0]["content_hash"] for r in results}) == 1


def test_off_every_ask_decodes(make_stub, red_blue):
    stub = make_stub()
    with mmctl.Client(stub.running.address, pixel_cache_mb=0) as client:
        results = [client.send(red_blue, PROMPT, transport="inline") for _ in range(2)]
    assert [r.items[0]["pixel_cache"] for r in results] == ["off", "off"]
    assert all("decode_s" in r.timings for r in results)
    assert results[1].pixel_cache["cache"]["budget_bytes"] == 0
    with pytest.raises(mmctl.UsageError, match="--pixel-cache-mb"):
        mmctl.Client(stub.running.address, pixel_cache_mb=-1)


def test_a_cached_tensor_is_never_changed_by_a_request(make_stub, red_blue):
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client:
        client.send(red_blue, PROMPT, transport="shm")
        (entry,) = list(client.pixel_cache._kept.values())
        kept = entry.value.pre.pixel_values
        before = kept.copy()
        client.send(red_blue, PROMPT, transport="shm")
        client.send(red_blue, PROMPT, transport="inline")
    assert not kept.flags.writeable and np.array_equal(kept, before)
