"""Qwen3.5 and Qwen3.6 (``qwen3_5``, ``qwen3_5_moe``): Qwen3-VL's processing.

vLLM 0.33 processes both model classes with ``Qwen3VLMultiModalProcessor``
(``qwen3_5.py``), and their processor files are Qwen3-VL's, byte for byte;
Qwen3.6 checkpoints are these model types too. What differs is in the model's
own files, which mmctl always reads from its folder: the tokenizer (a new
vocabulary; combining marks join letters), the chat template (a thinking
block) and the token ids — which is why they come from a Qwen3.5 config.json
only, never Qwen3-VL's published ones. scripts/families/qwen3_5.md has the facts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mmctl.errors import InputError
from mmctl.models.qwen_vl import qwen3_vl
from mmctl.models.qwen_vl.parts import qwen_family
from mmctl.models.qwen_vl.settings import QwenVision, TokenIds


def _own_ids(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> TokenIds:
    if not FAMILY.matches(config):
        held = f"a {config.get('model_type')!r} model's" if config else "no"
        raise InputError(
            f"Qwen3.5's token ids are its own config.json's (no Qwen3-VL id is valid in its "
            f"vocabulary), and these files hold {held} config.json"
        )
    return TokenIds.from_config(config)


FAMILY = qwen_family(
    replace(qwen3_vl.VARIANT, name="qwen3.5"),
    QwenVision,
    qwen3_vl.TIMESTAMPS,
    aliases=("qwen3.5-moe", "qwen3.6"),
    model_types=("qwen3_5", "qwen3_5_moe"),
    architectures=("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    tokens=_own_ids,
    # Qwen3_5ForConditionalGeneration subclasses vLLM's Qwen3-VL model.
    video_pruning=tuple((t, qwen3_vl.PRUNING_METHODS) for t in ("qwen3_5", "qwen3_5_moe")),
)
