"""The pixel cache: an LRU under a byte budget, one maker per key, frozen copies."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.settings import VisionOverrides
from mmctl.request.pixel_cache import (
    MIB,
    PixelCache,
    Pixels,
    budget_bytes,
    key_of,
    lookup,
    pixel_cache,
)


def _cache(mb: int = 1) -> PixelCache[str]:
    return PixelCache(mb)


def _put(cache: PixelCache[str], key: str, nbytes: int, group: object = None) -> str:
    claim = cache.claim(key)
    assert claim.owner
    return claim.fill(key, nbytes, group)


def test_the_budget_is_mib_and_zero_is_off():
    assert budget_bytes(3) == 3 * 2**20
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(UsageError, match="--pixel-cache-mb must be 0"):
            budget_bytes(bad)  # type: ignore[arg-type]
    off = _cache(0)
    assert not off.enabled
    _put(off, "a", 10)
    assert off.claim("a").owner  # nothing kept: every ask makes its own
    assert off.snapshot().entries == 0


def test_least_recently_used_goes_first_and_the_bytes_stay_within_the_budget():
    cache = _cache(1)
    third = MIB // 3
    for key in "abc":
        _put(cache, key, third)
    assert cache.claim("a").value == "a"  # a is now the most recent
    _put(cache, "d", third)  # over the budget: b, the least recent, goes
    assert cache.claim("b").owner
    assert cache.claim("c").value == "c" and cache.claim("d").value == "d"
    stats = cache.snapshot()
    assert stats.bytes <= MIB and stats.evictions == 1 and stats.entries == 3


def test_an_entry_over_the_budget_is_never_kept():
    cache = _cache(1)
    _put(cache, "small", 1000)
    _put(cache, "huge", MIB + 1)
    assert cache.claim("huge").owner
    assert cache.claim("small").value == "small"  # and it evicted nothing
    assert cache.snapshot().too_large == 1


def test_ten_thousand_entries_hold_the_budget_not_the_dataset():
    cache = _cache(4)
    for n in range(10_000):
        _put(cache, f"k{n}", 64 * 1024)
    stats = cache.snapshot()
    assert stats.peak_bytes <= 4 * MIB and stats.bytes <= 4 * MIB
    assert stats.entries == 64 and stats.evictions == 10_000 - 64


def test_each_group_has_its_own_budget_and_goes_away_whole():
    cache = _cache(1)
    half = MIB // 2
    _put(cache, "a1", half, "node-a")
    _put(cache, "a2", half, "node-a")
    _put(cache, "b1", half, "node-b")
    _put(cache, "a3", half, "node-a")  # evicts a1, not b1
    assert cache.where("a1") is None and cache.where("b1") == "node-b"
    assert cache.groups() == {"node-a": MIB, "node-b": half}
    assert cache.drop_group("node-a") == 2
    assert cache.where("a3") is None and cache.claim("b1").value == "b1"


def test_concurrent_asks_for_one_key_make_it_once():
    cache = _cache(1)
    made = []
    gate = threading.Event()

    def make() -> tuple[str, int]:
        made.append(1)
        gate.wait(5)
        return "pixels", 100

    results: list[tuple[str, str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("k", make))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)  # all four have asked
    gate.set()
    for t in threads:
        t.join(5)
    assert len(made) == 1
    assert sorted(how for _, how in results) == ["miss", "shared", "shared", "shared"]
    assert {value for value, _ in results} == {"pixels"}


def test_a_failed_maker_wakes_the_waiters_and_one_of_them_makes_it():
    cache = _cache(1)
    first = cache.claim("k")
    waiter = cache.claim("k")
    assert first.owner and waiter.future is not None
    first.fail()
    assert waiter.future.result(1) is None  # ask again
    again = cache.claim("k")
    assert again.owner
    again.fill("v", 10)
    assert cache.claim("k").value == "v"


def test_the_key_is_the_content_and_every_processing_setting(builtin_model):
    model, fmt = builtin_model, PixelFormat.UINT8
    base = key_of("d1", MediaKind.VIDEO, model, fmt)
    assert base == key_of("d1", MediaKind.VIDEO, model, fmt)
    others = {
        key_of("d2", MediaKind.VIDEO, model, fmt),  # other content
        key_of("d1", MediaKind.IMAGE, model, fmt),
        key_of("d1", MediaKind.VIDEO, model, PixelFormat.BFLOAT16),
        key_of("d1", MediaKind.VIDEO, model.with_vision(VisionOverrides(fps=1.0)), fmt),
        key_of("d1", MediaKind.VIDEO, model.with_vision(VisionOverrides(max_frames=8)), fmt),
    }
    assert base not in others and len(others) == 5


def _preprocess(model, path):
    from mmctl.values.items import DEFAULT_OPTIONS

    return model.spec.processor.preprocess(
        path, MediaKind.VIDEO, model.params, PixelFormat.UINT8, DEFAULT_OPTIONS
    )


def test_kept_pixels_are_private_and_read_only(builtin_model, red_blue):
    pre = _preprocess(builtin_model, red_blue)
    buffer = np.zeros(pre.pixel_values.size + 16, dtype=np.uint8)
    mapped = buffer[16:].reshape(pre.pixel_values.shape)  # as a /dev/shm mapping is: a view
    mapped[...] = pre.pixel_values
    kept = Pixels(replace(pre, pixel_values=mapped), "h").kept()
    assert kept.pre.pixel_values.base is None  # a copy, not the view
    assert not kept.pre.pixel_values.flags.writeable
    buffer[:] = 0  # the request's file goes away
    assert np.array_equal(kept.pre.pixel_values, pre.pixel_values)


def test_lookup_refuses_a_truncated_video_from_the_cache_under_strict(builtin_model, red_blue):
    pre = _preprocess(builtin_model, red_blue)
    truncated = replace(pre, source=replace(pre.source, warnings=("only 3 of 8 frames decode",)))
    cache = pixel_cache(1)
    args = ("digest", MediaKind.VIDEO, builtin_model, PixelFormat.UINT8)
    made, how = lookup(cache, *args, lambda: Pixels(truncated, "h"))
    assert how == "miss" and made.pre is truncated
    _, how = lookup(cache, *args, lambda: pytest.fail("made twice"))
    assert how == "hit"
    with pytest.raises(Exception, match="only 3 of 8 frames decode"):
        lookup(cache, *args, lambda: pytest.fail("made twice"), strict=True)
