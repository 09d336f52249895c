"""Qwen3.5 is Qwen3-VL's processing under its own name, with its own folder's ids."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models import registry
from mmctl.models.model import load_model
from mmctl.models.qwen_vl import qwen3_5, qwen3_vl

FOLDER = Path(__file__).resolve().parents[2] / "fixtures" / "families" / "qwen3_5"


def test_it_is_qwen3_vl_but_for_its_name_and_ids():
    mine, theirs = qwen3_5.FAMILY, qwen3_vl.FAMILY
    assert mine.settings is theirs.settings
    assert mine.processor.variant == qwen3_vl.VARIANT.__class__(name="qwen3.5")  # type: ignore[attr-defined]
    for kind in (MediaKind.IMAGE, MediaKind.VIDEO):
        assert mine.wire.fields(kind) == theirs.wire.fields(kind)
    assert mine.processor.worker_pixels == theirs.processor.worker_pixels
    assert mine.tokens is not theirs.tokens


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "qwen3_5"},
        {"model_type": "qwen3_5_moe"},
        {"architectures": ["Qwen3_5MoeForConditionalGeneration"]},
    ],
)
def test_the_registry_picks_it_from_config_json(config):
    assert registry.for_config(config) is qwen3_5.FAMILY
    assert registry.by_name("qwen3.6") is qwen3_5.FAMILY


def test_a_folder_without_its_config_is_refused(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    (folder / "config.json").unlink()
    with pytest.raises(InputError, match=r"these files hold no config\.json") as refused:
        load_model(model_dir=folder, family="qwen3.5")
    assert "--model-dir" in (refused.value.hint or "")


def test_it_never_takes_qwen3_vl_ids():
    """Forced over the built-in Qwen3-VL files: refused, not Qwen3-VL's 151655."""
    with pytest.raises(InputError, match=r"a 'qwen3_vl' model's config\.json"):
        load_model(family="qwen3.5")


def test_a_config_missing_one_id_is_refused(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(FOLDER, folder)
    config = json.loads((folder / "config.json").read_text())
    del config["video_token_id"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="lacks video_token_id"):
        load_model(model_dir=folder)
