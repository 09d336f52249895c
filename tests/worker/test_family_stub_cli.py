"""The family fixtures through ``mmctl batch`` and ``mmctl bench`` against their stubs
(split from test_family_stub.py so that its parts run in parallel)."""

from __future__ import annotations

import json

import pytest

from mmctl.media.probe import MediaKind
from mmctl.models.model import load_model
from tests.conftest import _stub
from tests.worker.family_stubs import FAMILIES, batch_answers, run_mmctl


@pytest.mark.parametrize(
    "model_type",
    [
        "llava_onevision",
        "gemma4",
        "internvl",
        "glm5_next",
        "minimax_m3_vl",
        "inkling",
        "qwen3_omni_moe",
    ],
)
def test_batch_and_bench_run_a_family(model_type, tmp_path, images, red_blue):
    """A family's images (and video, where it reads video) through ``mmctl batch`` and
    ``mmctl bench``."""
    model = load_model(model_dir=FAMILIES / model_type)
    running = _stub(model)
    try:
        lines = [{"id": "image", "media": [str(images[0])], "prompt": "Colour?"}]
        if MediaKind.VIDEO in model.spec.modalities:
            lines += [
                {"id": "video", "media": [str(red_blue)]},
                {"id": "both", "media": [str(images[1]), str(red_blue)]},
            ]
            want = {"image": "red", "video": "red, blue", "both": "blue; red, blue"}
        else:  # an image family: two images in one line
            lines.append({"id": "two", "media": [str(images[1]), str(images[0])]})
            want = {"image": "red", "two": "blue; red"}
        target = running.running.address
        dataset, answers = batch_answers(tmp_path, target, lines)
        assert answers == want
        # each item twice: the bench's path for the family, not a load test
        bench = run_mmctl("bench", "--dataset", str(dataset), "--target", target, "--json",
                       "--num-prompts", "6")  # fmt: skip
        assert bench.returncode == 0, bench.stderr
        assert json.loads(bench.stdout)
    finally:
        running.close()
