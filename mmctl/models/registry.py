"""Choose a model family from ``config.json`` or a ``--family`` name.

Ordered lookup, first match wins. Qwen3-VL comes first because it is the
primary family and its matcher is the narrower one (``Qwen3VL*``); the
Qwen2 matcher must not see a Qwen3 config first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmctl.errors import InputError, UsageError
from mmctl.models import qwen2_vl, qwen3_vl
from mmctl.models.base import ModelSpec

FAMILIES: tuple[ModelSpec, ...] = (qwen3_vl.SPEC, qwen2_vl.SPEC)
ALIASES: dict[str, ModelSpec] = {
    "qwen3-vl": qwen3_vl.SPEC,
    "qwen3-vl-moe": qwen3_vl.SPEC,
    "qwen2.5-vl": qwen2_vl.SPEC,
    "qwen2-vl": qwen2_vl.SPEC,
}
DEFAULT = qwen3_vl.SPEC


def family_names() -> list[str]:
    return sorted(ALIASES)


def by_name(name: str) -> ModelSpec:
    try:
        return ALIASES[name.lower()]
    except KeyError:
        raise UsageError(
            f"unknown model family {name!r}; known: {', '.join(family_names())}"
        ) from None


def for_config(config: Mapping[str, Any]) -> ModelSpec:
    """The family whose matcher accepts ``config.json``; typed error otherwise."""
    for spec in FAMILIES:
        if spec.matches(config):
            return spec
    raise InputError(
        f"config.json describes model_type={config.get('model_type')!r} "
        f"architectures={list(config.get('architectures') or [])}, which no mmctl model family handles",
        hint=f"pass --family ({', '.join(family_names())}) to force one",
    )


def resolve(family: str | None, config: Mapping[str, Any] | None) -> ModelSpec:
    """``--family`` wins; then ``config.json``; then the default (Qwen3-VL)."""
    if family:
        return by_name(family)
    if config:
        return for_config(config)
    return DEFAULT
