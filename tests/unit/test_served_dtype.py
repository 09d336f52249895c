"""The stub's ``model_dtype``: the folder's, as ``vllm serve --dtype auto`` on a GPU
resolves it (vLLM 0.33 ``_get_and_verify_dtype`` / ``_resolve_auto_dtype``)."""

from __future__ import annotations

import pytest

from mmctl.worker.dtype import served_dtype


@pytest.mark.parametrize(
    ("config", "served"),
    [
        ({"torch_dtype": "float16"}, "float16"),
        (
            {"dtype": "float16", "torch_dtype": "bfloat16"},
            "float16",
        ),  # dtype wins, as in transformers
        ({"torch_dtype": "bfloat16"}, "bfloat16"),
        ({"torch_dtype": "half"}, "float16"),
        ({"torch_dtype": "float32"}, "bfloat16"),  # auto downcasts float32 on a GPU
        ({"torch_dtype": "float64"}, "bfloat16"),  # unsupported: the platform's first choice
        ({}, "bfloat16"),  # none anywhere: float32, then downcast
        ({"text_config": {"torch_dtype": "float16"}}, "float16"),
        ({"torch_dtype": "bfloat16", "text_config": {"torch_dtype": "float16"}}, "bfloat16"),
        ({"vision_config": {"dtype": "float16"}}, "float16"),
        ({"text_config": {}, "vision_config": {"torch_dtype": "float16"}}, "float16"),
        ({"encoder_config": {"torch_dtype": "float16"}}, "float16"),
        # Two text configs: transformers' get_text_config refuses to choose.
        ({"text_config": {"dtype": "float16"}, "decoder": {"dtype": "float16"}}, "bfloat16"),
        ({"model_type": "gemma3", "torch_dtype": "float16"}, "bfloat16"),
        ({"torch_dtype": 16}, "bfloat16"),
    ],
)
def test_served_dtype(config, served):
    assert served_dtype(config) == served


def test_the_builtin_model_is_bfloat16():
    from mmctl.models.model import load_model

    assert served_dtype(load_model().files.config) == "bfloat16"
