"""How the Qwen-VL families read their files: token ids and budgets."""

from __future__ import annotations

import json

import pytest

from mmctl.checkpoint import source
from mmctl.errors import InputError
from mmctl.models.model import load_model
from mmctl.models.qwen_vl.settings import TokenIds


def test_config_with_some_token_ids_missing_is_an_error():
    config = {"model_type": "qwen3_vl", "image_token_id": 1, "video_token_id": 2}
    with pytest.raises(InputError, match="vision_start_token_id, vision_end_token_id"):
        TokenIds.from_config(config)
    assert TokenIds.from_config({}) == TokenIds()  # no config.json: the published ids


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
    assert model.params.video_max_pixels == 2_000_000 and model.params.fps == 1.0
