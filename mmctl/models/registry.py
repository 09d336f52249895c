"""Choose a model family from ``config.json`` or a ``--family`` name.

Ordered lookup, first match wins. Qwen3-VL comes first because it is the
primary family and its matcher is the narrower one (``Qwen3VL*``); the
Qwen2 matcher must not see a Qwen3 config first. The LLaVA families match
their ``model_type`` exactly (``llava`` must not take ``llava_next``'s or
OneVision's folders, as smg's name-based matcher does). GLM matches its
model types exactly (GLM-5-Next's ``glm5_next`` its own); which GLM processing (4.1V or 4.6V) a folder gets is
its processor class's, read with its settings (vLLM decides it so too).
InternVL matches ``internvl`` (the transformers format) only: the remote-code
``internvl_chat`` folders are another processing in vLLM (``internvl.py``).
Inkling matches its ``inkling_mm_model`` exactly (the text-only ``inkling_model``
reads no media). Nemotron-3-Nano-Omni matches ``nemotron_h_omni``; its images are
the worker's to process (``Family.worker_kinds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmctl.errors import InputError, UnknownFamily, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import (
    gemma4,
    glm4v,
    glm5_next,
    inkling,
    internvl,
    llama4,
    llava,
    llava_next,
    llava_onevision,
    minimax_m3_vl,
    nemotron_h_omni,
)
from mmctl.models.family import Family
from mmctl.models.qwen_vl import qwen2_vl, qwen3_5, qwen3_omni, qwen3_vl

FAMILIES: tuple[Family, ...] = (
    qwen3_vl.FAMILY,
    qwen3_5.FAMILY,
    qwen2_vl.FAMILY,
    qwen3_omni.FAMILY,
    llava.FAMILY,
    llava_next.FAMILY,
    llava_onevision.FAMILY,
    llama4.FAMILY,
    glm4v.FAMILY,
    glm5_next.FAMILY,
    gemma4.FAMILY,
    internvl.FAMILY,
    minimax_m3_vl.FAMILY,
    inkling.FAMILY,
    nemotron_h_omni.FAMILY,
)
ALIASES: dict[str, Family] = {
    name: family for family in FAMILIES for name in (family.name, *family.aliases)
}
DEFAULT: Family = qwen3_vl.FAMILY

# Model types vLLM serves that no mmctl request can reach, by ``model_type`` and
# ``--family`` spelling, with the reason (README, "Model families"). The general
# hint (worker-side processing) would lead nowhere for these.
UNSERVED: dict[str, str] = {
    "kimi_k25": (
        "Kimi-K2.5 models take their media as vLLM's vision_chunk items: mmctl does not "
        "preprocess them, and the worker's own processing refuses image references"
    ),
}
UNSERVED_NAMES: dict[str, str] = {"kimi-k2.5": "kimi_k25", "kimi_k25": "kimi_k25"}


def canonical_names() -> list[str]:
    """Each family once, by mmctl's own name, in the registry's order."""
    return [family.name for family in FAMILIES]


def _preprocessed() -> str:
    names = canonical_names()
    return f"mmctl preprocesses {', '.join(names[:-1])} and {names[-1]} models itself"


def _unserved_hint(model_type: str) -> str:
    return f'{_preprocessed()}; README "Model families" says why not {model_type}'


def supported_hint() -> str:
    """The one sentence that answers "which models can mmctl handle?": the
    families mmctl prepares itself, each once (an alias list invites forcing a
    wrong family on a model it does not fit), and the way to any other model."""
    return (
        f"{_preprocessed()}; any other model the worker preprocesses: "
        "--processing worker (send, bench, batch)"
    )


def reading(kind: MediaKind) -> list[str]:
    """The families whose models read ``kind`` (canonical names)."""
    return [family.name for family in FAMILIES if kind in family.modalities]


def pruning_model_types() -> list[str]:
    """The ``model_type`` values whose vLLM model prunes video, in the registry's order."""
    return [t for family in FAMILIES for t, methods in family.video_pruning if methods]


def refuse_kind(family: Family, kind: MediaKind) -> None:
    """One sentence for media ``family``'s model cannot read, and which families read it."""
    if kind not in family.modalities:
        kinds = " and ".join(k.value for k in family.modalities)
        *others, last = reading(kind)
        readers = f"{', '.join(others)} and {last}" if others else last
        raise InputError(
            f"{family.name} models read {kinds}, not {kind.value}",
            hint=f"{readers} models read {kind.value}",
        )


def forced_mismatch(
    forced: Family, config: Mapping[str, Any], files: str, detail: str
) -> tuple[str, str]:
    """The error and its hint when ``--family`` names a family that ``files`` (a
    source's label) do not hold, so that its tokens or settings cannot be read
    (``detail``: what was missing). The mismatch leads: the missing key is
    only its symptom."""
    own = next((spec.name for spec in FAMILIES if config and spec.matches(config)), None)
    held = f"a {own or config.get('model_type')} model's" if config else "no config.json"
    return (
        f"--family {forced.name} does not fit {files}, which holds {held} files ({detail})",
        f"--family {forced.name} reads a {forced.name} model's files: pass that model's "
        "folder with --model-dir DIR (or its worker's --bundle ZIP), or leave --family out",
    )


def by_name(name: str) -> Family:
    try:
        return ALIASES[name.lower()]
    except KeyError:
        unserved = UNSERVED_NAMES.get(name.lower())
        if unserved:
            raise UsageError(
                f"--family {name}: mmctl cannot serve it: {UNSERVED[unserved]}",
                hint=_unserved_hint(unserved),
            ) from None
        raise UsageError(
            f"unknown model family {name!r}; known: {', '.join(canonical_names())}"
        ) from None


def for_config(config: Mapping[str, Any]) -> Family:
    """The family whose matcher accepts ``config.json``; typed error otherwise."""
    for spec in FAMILIES:
        if spec.matches(config):
            return spec
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in UNSERVED:
        raise InputError(
            f"config.json describes model_type={model_type!r}, which mmctl cannot serve: "
            f"{UNSERVED[model_type]}",
            hint=_unserved_hint(model_type),
        )
    raise UnknownFamily(
        f"config.json describes model_type={config.get('model_type')!r} "
        f"architectures={list(config.get('architectures') or [])}, which no mmctl model family handles",
        model_type=str(config.get("model_type")),
        hint=supported_hint(),
    )


def resolve(family: str | None, config: Mapping[str, Any] | None) -> Family:
    """``--family`` wins; then ``config.json``; then the default (Qwen3-VL)."""
    if family:
        return by_name(family)
    if config:
        return for_config(config)
    return DEFAULT
