"""Dataset lines: the OpenAI batch format and the short form; each bad line named."""

from __future__ import annotations

import base64
import json

import pytest

from mmctl.dataset import Embedded, Items, Remote, local_paths
from mmctl.errors import InputError


def _write(path, *docs):
    path.write_text("\n".join(d if isinstance(d, str) else json.dumps(d) for d in docs) + "\n")
    return path


def test_both_formats(tmp_path):
    (tmp_path / "clips").mkdir()
    data = _write(
        tmp_path / "set.jsonl",
        {"id": "a", "prompt": "What happens?", "media": ["clips/x.mp4"], "max_tokens": 8},
        "",
        {
            "custom_id": "b",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "qwen",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "video_url", "video_url": {"url": "file:///abs/y.mp4"}},
                            {"type": "image_url", "image_url": {"url": "z.png"}},
                            {"type": "text", "text": "Compare them."},
                        ],
                    },
                ],
                "max_completion_tokens": 16,
                "temperature": 0,
                "stop": "END",
            },
        },
    )
    with Items(data) as items:
        a, b = list(items)
    assert (a.id, a.prompt, a.media, a.sampling) == (
        "a", "What happens?", [tmp_path / "clips/x.mp4"], {"max_tokens": 8},
    )  # fmt: skip
    assert b.id == "b" and b.system == "Be brief." and b.prompt == "Compare them."
    assert [str(p) for p in b.media] == ["/abs/y.mp4", str(tmp_path / "z.png")]
    assert b.sampling == {"max_tokens": 16, "temperature": 0, "stop": ("END",)}


def test_data_urls_travel_as_bytes_and_are_files_only_while_read(tmp_path):
    url = "data:video/mp4;base64," + base64.b64encode(b"not really a video").decode()
    data = _write(tmp_path / "d.jsonl", {"id": "1", "prompt": "", "media": [url, "x.mp4"]})
    with Items(data) as items:
        (item,) = list(items)
    embedded, path = item.media
    assert embedded == Embedded(b"not really a video", ".mp4")
    assert path == tmp_path / "x.mp4"
    with local_paths(item.media) as paths:
        assert paths[0].read_bytes() == b"not really a video" and paths[0].suffix == ".mp4"
        assert paths[1] == path  # a file stays where it is
        folder = paths[0].parent
    assert not folder.exists()  # removed when read
    with (
        pytest.raises(InputError, match="data: URLs are not accepted"),
        Items(data, data_urls=False) as items,
    ):
        list(items)


def test_remote_media_are_fetched_where_they_are_read_with_the_cap(tmp_path, http_files):
    www, base = http_files
    (www / "clip.mp4").write_bytes(b"x" * 100)
    data = _write(tmp_path / "d.jsonl", {"id": "1", "media": [f"{base}/clip.mp4"]})
    with Items(data, remote_cap=100) as items:
        (item,) = list(items)
    assert item.media == [Remote(f"{base}/clip.mp4", 100, "d.jsonl:1")]  # not fetched yet
    with local_paths(item.media) as (path,):
        assert path.read_bytes() == b"x" * 100 and path.suffix == ".mp4"
    assert not path.exists()
    for url, says in (("clip.mp4", r".* is over the 99-byte cap"), ("missing.mp4", "cannot fetch")):
        with (
            pytest.raises(InputError, match=f"d.jsonl:1: {says}"),
            local_paths([Remote(f"{base}/{url}", 99, "d.jsonl:1")]),
        ):
            pass


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "d.jsonl:1: not JSON"),
        ("[1, 2]", "one JSON object"),
        ('{"media": "http://example.com/a.mp4"}', "remote media"),
        ('{"media": "file://other-host/a.mp4"}', "must name this host"),
        ('{"media": [1]}', "media must be a list of paths"),
        ('{"custom_id": "x", "body": {"messages": [], "logprobs": true}}', "body.logprobs"),
        ('{"custom_id": "x", "url": "/v1/embeddings", "body": {"messages": []}}', "/v1/embeddings"),
        ('{"custom_id": "x", "body": {"messages": [{"role": "assistant", "content": "hi"}]}}',
         "role 'assistant'"),
        ('{"custom_id": "x", "body": {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}}',
         "input_audio"),
        ('{"prompt": "x", "max_tokens": "8"}', "max_tokens has the wrong type"),
        ('{"media": ["data:video/mp4,abc"]}', "must be base64"),
    ],
)  # fmt: skip
def test_bad_lines_are_named(tmp_path, line, says):
    data = _write(tmp_path / "d.jsonl", line)
    with pytest.raises(InputError, match=says.replace("(", r"\(")), Items(data) as items:
        list(items)


# ---- no line can stop the run ----


def _entries(path):
    with Items(path) as items:
        return list(items.entries())


def test_a_bom_before_the_first_line_is_skipped(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "first", "prompt": "hi"}).encode() + b"\n")
    (entry,) = _entries(path)
    assert entry.error is None and entry.id == "first"


def test_a_line_nested_100000_deep_is_that_lines_error(tmp_path):
    path = tmp_path / "deep.jsonl"
    deep = b'{"id": "deep", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path.write_bytes(deep + b"\n" + json.dumps({"id": "next"}).encode() + b"\n")
    bad, good = _entries(path)
    assert (bad.id, bad.code) == ("line-1", "invalid_line")
    assert "nested too deep" in bad.error
    assert good.error is None and good.id == "next"


@pytest.mark.parametrize(
    "value",
    [None, {"a": 1}, 7, 1.5, True, ["x"]],
    ids=["null", "object", "int", "float", "bool", "list"],
)
@pytest.mark.parametrize("key", ["id", "custom_id"])
def test_an_id_that_is_not_a_string_is_invalid_id_and_kept_as_its_json_value(tmp_path, key, value):
    doc = {key: value, "prompt": "hi"} if key == "id" else {key: value, "body": {"messages": []}}
    (entry,) = _entries(_write(tmp_path / "ids.jsonl", doc))
    assert entry.code == "invalid_id"
    assert entry.custom_id == value  # written back as the value it was, not its repr
    assert "must be a string" in entry.error


def test_a_line_that_is_not_utf8_is_that_lines_error(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "caf\xe9"}\n' + json.dumps({"id": "next"}).encode() + b"\n")
    bad, good = _entries(path)
    assert bad.code == "invalid_line" and "not UTF-8" in bad.error
    assert good.id == "next"


def test_a_line_over_the_size_cap_is_that_lines_error(tmp_path, monkeypatch):
    import mmctl.dataset

    monkeypatch.setattr(mmctl.dataset, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "long", "prompt": "x" * 5000}) + "\n" + '{"id": "next"}\n')
    bad, good = _entries(path)
    assert "over 1,000 bytes" in bad.error
    assert good.id == "next"


def test_an_odd_structure_is_that_lines_error_never_an_exception(tmp_path):
    odd = {"custom_id": "odd", "body": {"messages": [{"role": "user", "content": 5}]}}
    (entry,) = _entries(_write(tmp_path / "odd.jsonl", odd))
    assert entry.id == "odd" and entry.code == "invalid_line"
