"""`mmctl batch` asks several questions of one clip: the clip is preprocessed
once, each question gets the same pixels and the same ``mm_hashes``."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import mmctl
from mmctl.media import synth
from mmctl.request.view import batches, read_request

COLOURS = [("red", "blue"), ("green", "red"), ("blue", "green"), ("red", "green")]


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    return [
        synth.color_clip(folder / f"{a}-{b}.mp4", ((a, 1.0), (b, 1.0)), fps=8) for a, b in COLOURS
    ]


def _three_questions(path, clips, media=None):
    lines = []
    for n, clip in enumerate(clips):
        for q in range(3):
            doc = {"id": f"c{n}q{q}", "prompt": f"Question {q}?", "media": [str(clip)]}
            lines.append(json.dumps(doc))
    for extra in media or []:
        lines.append(json.dumps(extra))
    path.write_text("\n".join(lines) + "\n")
    return path


def _lines(path):
    return {d["custom_id"]: d for d in map(json.loads, path.read_text().splitlines())}


def test_three_questions_per_clip_preprocess_each_clip_once(make_stub, clips, tmp_path, no_leaks):
    record = tmp_path / "record"
    record.mkdir()
    stub = make_stub(record_dir=record)
    data = _three_questions(tmp_path / "in.jsonl", clips)
    out = tmp_path / "out.jsonl"
    counts = mmctl.batch(data, out, targets=stub.running.address, workers=2)
    assert counts.succeeded == 12, counts
    lines = _lines(out)
    for n, (a, b) in enumerate(COLOURS):
        asks = [lines[f"c{n}q{q}"] for q in range(3)]
        how = Counter(d["mmctl"]["pixel_cache"][0] for d in asks)
        assert how["miss"] == 1 and how["hit"] + how["shared"] == 2, how
        answers = {d["response"]["body"]["choices"][0]["message"]["content"] for d in asks}
        assert answers == {f"{a}, {b}"}  # the stub's answer reads the pixels
    cache = counts.pixel_cache
    assert (cache["misses"], cache["hits"] + cache["shared"]) == (4, 8)
    assert cache["bytes"] <= cache["budget_bytes"] and cache["entries"] == 4
    # The worker got, per clip, three requests with the same pixels and hashes.
    pixels: dict[str, set[bytes]] = {}
    asked: Counter[str] = Counter()
    for path in record.iterdir():
        (batch,) = batches(read_request(path))
        (mm_hash,) = batch.mm_hashes
        pixels.setdefault(mm_hash, set()).add(batch.pixel_values.inline)
        asked[mm_hash] += 1
    assert sorted(asked.values()) == [3, 3, 3, 3]
    assert all(len(v) == 1 for v in pixels.values())


def test_a_cached_medium_and_a_new_one_in_one_item(make_stub, clips, tmp_path, no_leaks):
    stub = make_stub()
    extra = [
        {"id": "both", "prompt": "Compare.", "media": [str(clips[0]), str(clips[1])]},
    ]
    data = _three_questions(tmp_path / "in.jsonl", clips[:1], extra)
    out = tmp_path / "out.jsonl"
    counts = mmctl.batch(data, out, targets=stub.running.address, workers=1, max_concurrency=1)
    assert counts.succeeded == 4, counts
    both = _lines(out)["both"]
    assert both["mmctl"]["pixel_cache"] == ["hit", "miss"]


def test_the_cache_off_decodes_every_item_and_the_cli_says_what_it_saved(
    cli, make_stub, clips, tmp_path
):
    stub = make_stub()
    data = _three_questions(tmp_path / "in.jsonl", clips[:2])
    off = tmp_path / "off.jsonl"
    counts = mmctl.batch(data, off, targets=stub.running.address, workers=1, pixel_cache_mb=0)
    assert counts.succeeded == 6 and counts.pixel_cache["budget_bytes"] == 0
    assert {d["mmctl"]["pixel_cache"][0] for d in _lines(off).values()} == {"off"}
    on = tmp_path / "on.jsonl"
    res = cli("batch", data, "-o", on, "-t", stub.running.address, "--workers", "1")
    assert res.code == 0, res.err
    assert "pixel cache: 4 of 6 media served without decoding" in res.err
    bad = cli("batch", data, "-o", tmp_path / "x.jsonl", "-t", stub.running.address,
              "--pixel-cache-mb", "-1")  # fmt: skip
    assert bad.code == 2 and "--pixel-cache-mb must be 0 (off) or more MiB" in bad.err
