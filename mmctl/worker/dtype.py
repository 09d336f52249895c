"""The dtype a default ``vllm serve MODEL --dtype auto`` on a GPU serves a folder in.

The stub advertises it as ``model_dtype`` and ``multimodal_encoder_dtype``
(the servicer reports the engine's ``model_config.dtype`` for both), and
``send`` picks its pixels by it — so it must be the folder's, not one
constant. vLLM 0.33 (``config/model.py`` ``_get_and_verify_dtype`` →
``_resolve_auto_dtype``, and ``ModelArchConfigConvertorBase.get_torch_dtype``):

1. the config's dtype: ``dtype`` (or the older ``torch_dtype``) of the top
   level, else of the text config (``text_config``, ``decoder``, ``generator``,
   ``text_encoder``: transformers' ``get_text_config``), else of
   ``vision_config``, else of ``encoder_config``; none anywhere means float32
   (vLLM would read the weights' headers first; the stub has no weights);
2. on a GPU that has bfloat16 (Ampere and later) float32 becomes bfloat16,
   float16 and bfloat16 stay, and anything else (float64, an integer type)
   falls back to bfloat16; float16 is not offered for the model types vLLM
   keeps off it (Gemma 2 and 3, GLM-4), which then get bfloat16 too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The model types vLLM refuses float16 for (``_FLOAT16_NOT_SUPPORTED_MODELS``).
FLOAT16_UNSUPPORTED = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})
#: transformers turns a dtype string into ``getattr(torch, name)``: these name the two halves.
_NAMES = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}
#: Where transformers' ``get_text_config`` looks for a composite model's text part.
_TEXT_CONFIG_KEYS = ("text_encoder", "decoder", "generator", "text_config")


def config_dtype(config: Mapping[str, Any]) -> Any:
    """The config's dtype as vLLM reads it (any JSON value; None when none is set)."""
    for part in (config, _text_config(config), config.get("vision_config"),
                 config.get("encoder_config")):  # fmt: skip
        if isinstance(part, Mapping):
            value = part.get("dtype")
            if value is None:
                value = part.get("torch_dtype")
            if value is not None:
                return value
    return None


def served_dtype(config: Mapping[str, Any]) -> str:
    """``float16`` or ``bfloat16``: what ``--dtype auto`` on an Ampere-or-later GPU serves."""
    value = config_dtype(config)
    name = _NAMES.get(value) if isinstance(value, str) else None
    if name == "float16" and config.get("model_type") in FLOAT16_UNSUPPORTED:
        return "bfloat16"
    return name or "bfloat16"


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = [config[k] for k in _TEXT_CONFIG_KEYS if isinstance(config.get(k), Mapping)]
    return found[0] if len(found) == 1 else None  # transformers refuses to choose among several
