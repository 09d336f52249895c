"""Choose a model family from ``config.json`` or a ``--family`` name.

Ordered lookup, first match wins. Qwen3-VL comes first because it is the
primary family and its matcher is the narrower one (``Qwen3VL*``); the
Qwen2 matcher must not see a Qwen3 config first. The LLaVA families match
their ``model_type`` exactly (``llava`` must not take ``llava_next``'s or
OneVision's folders, as smg's name-based matcher does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmctl.errors import InputError, UsageError
from mmctl.models import llama4, llava, llava_next, llava_onevision
from mmctl.models.family import Family
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl

FAMILIES: tuple[Family, ...] = (
    qwen3_vl.FAMILY,
    qwen2_vl.FAMILY,
    llava.FAMILY,
    llava_next.FAMILY,
    llava_onevision.FAMILY,
    llama4.FAMILY,
)
ALIASES: dict[str, Family] = {
    name: family for family in FAMILIES for name in (family.name, *family.aliases)
}
DEFAULT: Family = qwen3_vl.FAMILY


def family_names() -> list[str]:
    return sorted(ALIASES)


def by_name(name: str) -> Family:
    try:
        return ALIASES[name.lower()]
    except KeyError:
        raise UsageError(
            f"unknown model family {name!r}; known: {', '.join(family_names())}"
        ) from None


def for_config(config: Mapping[str, Any]) -> Family:
    """The family whose matcher accepts ``config.json``; typed error otherwise."""
    for spec in FAMILIES:
        if spec.matches(config):
            return spec
    raise InputError(
        f"config.json describes model_type={config.get('model_type')!r} "
        f"architectures={list(config.get('architectures') or [])}, which no mmctl model family handles",
        hint=f"pass --family ({', '.join(family_names())}) to force one",
    )


def resolve(family: str | None, config: Mapping[str, Any] | None) -> Family:
    """``--family`` wins; then ``config.json``; then the default (Qwen3-VL)."""
    if family:
        return by_name(family)
    if config:
        return for_config(config)
    return DEFAULT
