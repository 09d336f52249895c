"""Model files: built-in set, folders, tokenizer bundles, token ids (config.json, tokenizer)."""

from __future__ import annotations

import io
import zipfile

import pytest

from mmctl.checkpoint import source
from mmctl.errors import InputError, UsageError
from mmctl.models.model import load_model
from mmctl.models.qwen_vl.settings import TokenIds


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))


def test_builtin_bundle_roundtrip(tmp_path):
    data, sha = source.build_bundle(source.builtin())
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert {"tokenizer.json", "config.json", "video_preprocessor_config.json"} <= names
    unpacked = source.from_bundle_bytes(data, "worker", sha256=sha)
    assert unpacked.find("tokenizer.json") is not None
    again = source.cached_bundle(sha)
    assert again is not None and again.folders == unpacked.folders
    model = load_model(source=unpacked)
    assert model.spec.name == "qwen3-vl" and model.token_ids_from == "config.json"
    assert model.tokenizer.encode("<|video_pad|>") == [TokenIds().video_token_id]


@pytest.mark.parametrize(
    ("folder", "origin"),
    [
        ("llava", "config.json"),
        ("qwen3_5", "config.json"),
        # their readers take some ids from the tokenizer, as vLLM does
        ("gemma4", "config.json and the tokenizer"),
        ("internvl", "config.json and the tokenizer"),
        ("glm46v", "config.json and the tokenizer"),
        ("llama4", "config.json and the tokenizer"),
    ],
)
def test_the_token_ids_origin_names_the_tokenizer_where_it_was_read(fixtures, folder, origin):
    assert load_model(model_dir=fixtures / "families" / folder).token_ids_from == origin


def test_tampered_bundle_is_refused():
    data, sha = source.build_bundle(source.builtin())
    with pytest.raises(InputError, match="corrupt"):
        source.from_bundle_bytes(data[:-1] + bytes([data[-1] ^ 1]), "worker", sha256=sha)


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


def test_bundle_members_must_be_plain_names():
    with pytest.raises(InputError, match="not a plain file name"):
        source.from_bundle_bytes(_zip({"../evil.json": b"{}", "tokenizer.json": b"{}"}), "x")
    with pytest.raises(InputError, match="holds no tokenizer"):
        source.from_bundle_bytes(_zip({"config.json": b"{}"}), "x")
    with pytest.raises(InputError, match="not a tokenizer bundle"):
        source.from_bundle_bytes(b"not a zip", "x")


def test_model_dir_and_bundle_are_exclusive(tmp_path):
    with pytest.raises(UsageError):
        source.resolve(tmp_path, tmp_path / "b.zip")
