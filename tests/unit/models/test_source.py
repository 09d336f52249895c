"""Model files: built-in set, folders, tokenizer bundles, token ids from config.json."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from mmctl.errors import InputError, UsageError
from mmctl.models import qwen3_vl, source
from mmctl.models.model import load_model
from mmctl.models.qwen import token_ids_from_config


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
    assert model.tokenizer.encode("<|video_pad|>") == [qwen3_vl.TOKEN_IDS.video_token_id]


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


def test_config_with_some_token_ids_missing_is_an_error():
    config = {"model_type": "qwen3_vl", "image_token_id": 1, "video_token_id": 2}
    with pytest.raises(InputError, match="vision_start_token_id, vision_end_token_id"):
        token_ids_from_config(config, qwen3_vl.TOKEN_IDS)
    ids, origin = token_ids_from_config({}, qwen3_vl.TOKEN_IDS)
    assert ids == qwen3_vl.TOKEN_IDS and "defaults" in origin


def test_model_dir_overrides_ids_and_budgets(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for path in source.builtin().files().values():
        (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config["video_token_id"] = 151655 + 100
    (folder / "config.json").write_text(json.dumps(config))
    video = json.loads((folder / "video_preprocessor_config.json").read_text())
    video["size"] = {"shortest_edge": 1024, "longest_edge": 2_000_000}
    video["fps"] = 1
    (folder / "video_preprocessor_config.json").write_text(json.dumps(video))
    model = load_model(model_dir=folder)
    assert model.token_ids.video_token_id == 151755
    assert model.params.video_budget.max_pixels == 2_000_000 and model.params.fps == 1.0


def test_model_dir_and_bundle_are_exclusive(tmp_path):
    with pytest.raises(UsageError):
        source.resolve(tmp_path, tmp_path / "b.zip")
