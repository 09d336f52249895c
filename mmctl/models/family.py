"""The one interface a model family implements.

A family (``mmctl/models/<family>.py``) declares what it is and everything
that differs between families, so that the request path —

    media → family.preprocess → prompt (family.expand, family.check) →
    request (family.fields, family.batch_pixels; the ids' embed token) → transport

— and the stub worker's contract checks (``family.check_received``) never
branch on a family's name. The counterparts upstream: smg's
``ModelProcessorSpec`` (``crates/multimodal/src/registry/traits.rs``) and
vLLM's per-model ``_get_mm_fields_config`` + ``_get_prompt_updates``.

Adding a family is one module implementing :class:`Family` plus its entry in
:mod:`mmctl.models.registry` (ARCHITECTURE.md §1 "A fifth family").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from mmctl.choices import LayoutKind, PixelFormat
    from mmctl.models.base import ModelFiles, VisionOverrides
    from mmctl.models.fields import WireField
    from mmctl.models.model import Model
    from mmctl.preprocessing.pipeline import Allocator, FrameCallback, Preprocessed
    from mmctl.prompt.layout import Layout
    from mmctl.prompt.mrope import WalkResult


class ContractError(ValueError):
    """A received batch breaks the family's contract (the stub turns it into a refusal).

    ``key``: the tensor the sentence is about (it then reads "<key> <message>");
    without one the sentence is about the batch ("carries no … tensor").
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message, self.key = message, key

    def about(self, label: str, kind: MediaKind) -> str:
        """The sentence, for the batch ``label`` of ``kind``."""
        if self.key is not None:
            return f"{label}.{self.key} {self.message}"
        return f"{label} ({kind.value}) {self.message}"


class Tokens(Protocol):
    """A family's special token ids (from ``config.json`` or the tokenizer)."""

    def placeholder(self, kind: MediaKind) -> int:
        """The token the chat template writes once per item of ``kind``."""
        ...

    def embed(self, kind: MediaKind) -> int:
        """The token whose positions receive the item's embeddings (``im_token_id``)."""
        ...

    def markers(self) -> dict[int, str]:
        """Structural tokens an account of the layout shows by name."""
        ...

    def as_dict(self) -> dict[str, int]:
        """By the ``config.json`` key (or token) each mirrors (``--json``)."""
        ...


class Vision(Protocol):
    """A family's resolved processor settings (frozen; one class per family)."""

    #: HF ``image_mean`` / ``image_std`` / ``rescale_factor`` (the stub undoes them).
    @property
    def image_mean(self) -> tuple[float, float, float]: ...

    @property
    def image_std(self) -> tuple[float, float, float]: ...

    @property
    def rescale_factor(self) -> float: ...

    def overridden(self, overrides: VisionOverrides) -> Vision:
        """A copy with a user's ``--fps``/``--num-frames``/… applied; a value the
        family has no use for is a :class:`~mmctl.errors.UsageError`."""
        ...

    def settings(self) -> dict[str, Any]:
        """Every setting by name (``info``, ``preprocess --json``)."""
        ...


@dataclass(frozen=True)
class ItemFacts:
    """What the prompt layout and its checks know of one item, whether it was
    preprocessed here or read back from a request's tensors."""

    kind: MediaKind
    #: Positions that receive embeddings (``im_token_id`` tokens in the span).
    tokens: int
    #: Qwen: the item's patch grid; ``None`` for families without one.
    grid_thw: tuple[int, int, int] | None = None
    #: Qwen3-VL video: one time per temporal patch (the prompt's timestamps).
    patch_times: tuple[float, ...] = ()
    #: What else the family's expansion reads (``image_size``, ``aspect_ratio``, ``frames``).
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Rows of the item's share of a *flat* pixel tensor (Qwen ``t·h·w``, Llama 4
    #: tiles): what the batch's sizes tensor must hold for it.
    rows: int | None = None

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind.value, "num_tokens": self.tokens}
        if self.grid_thw is not None:
            doc["grid_thw"] = list(self.grid_thw)
        doc.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.extra.items()})
        return doc

    @property
    def grid(self) -> tuple[int, int, int]:
        """The Qwen grid (families with one only)."""
        if self.grid_thw is None:
            raise ContractError(f"this {self.kind.value} item has no patch grid")
        return self.grid_thw


@dataclass(frozen=True)
class Frames:
    """How a video item's embedding tokens divide into frames, in prompt order:
    ``count`` runs of ``tokens`` each, then ``after`` tokens that belong to no
    frame (OneVision's newline after the last one)."""

    count: int
    tokens: int
    after: int = 0


class Family(Protocol):
    """What a model family provides. One frozen instance per family module."""

    @property
    def name(self) -> str:
        """mmctl's name (``--family``), e.g. ``qwen3-vl``, ``llava-next``."""
        ...

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other ``--family`` names for it."""
        ...

    @property
    def model_types(self) -> tuple[str, ...]:
        """``config.json`` ``model_type`` values it serves."""
        ...

    @property
    def modalities(self) -> tuple[MediaKind, ...]:
        """The kinds of media the model reads (vLLM's ``get_supported_mm_limits``: any
        number of each for every family here); others are refused before decoding."""
        ...

    @property
    def worker_pixels(self) -> PixelFormat:
        """What a default ``vllm serve MODEL --grpc`` (0.33) wants when no worker
        is asked: raw uint8 where it normalizes on the device (Qwen), else the
        model's floats (float32 here; a worker's facts refine it)."""
        ...

    @property
    def device_normalize(self) -> bool:
        """Whether vLLM can normalize this family's pixels on the device (uint8 in)."""
        ...

    @property
    def default_system(self) -> str | None:
        """The system turn mmctl's built-in chat format adds when none is given."""
        ...

    @property
    def layout_check(self) -> str:
        """The name of :meth:`check` in a run's checks (``mrope_walk`` for Qwen)."""
        ...

    def matches(self, config: Mapping[str, Any]) -> bool:
        """True when ``config.json`` (model_type / architectures) is this family's."""
        ...

    def vision(self, files: ModelFiles) -> tuple[Vision, dict[str, str]]:
        """The processor settings a worker serving ``files`` has, and each one's origin."""
        ...

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        """The special ids from ``config.json`` (``vocab``: the tokenizer's
        token → id, for ids the config does not carry)."""
        ...

    def preprocess(
        self,
        path: Path,
        kind: MediaKind,
        model: Model,
        pixel_format: PixelFormat,
        *,
        keep_frames: bool = False,
        on_frame: FrameCallback | None = None,
        allocate: Allocator | None = None,
        strict: bool = False,
    ) -> Preprocessed:
        """One media item → exactly the tensors the HF processor gives vLLM."""
        ...

    def knows_media(self, template: str) -> bool:
        """Whether a chat template writes this family's media placeholders."""
        ...

    def placeholder_text(self, kind: MediaKind, model: Model) -> str:
        """The text one item contributes to a prompt mmctl writes itself."""
        ...

    def chat_format(self, body: str, system: str | None) -> str:
        """One user turn (``body``: placeholders and text) in the family's chat
        format, for model folders without a multimodal template."""
        ...

    def expand(
        self,
        prompt_ids: Sequence[int],
        items: Sequence[ItemFacts],
        model: Model,
        layout: LayoutKind,
    ) -> Layout:
        """The k-th placeholder of ``prompt_ids`` expanded for the k-th item, as
        vLLM's processor expands it; spans are the expansions."""
        ...

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: Model) -> WalkResult:
        """What vLLM's model relies on in the laid-out prompt (the mrope walk for
        Qwen; the embedding positions per span for every family)."""
        ...

    def frames(self, item: ItemFacts, model: Model) -> Frames | None:
        """How a video item's embedding tokens divide into its frames (``inspect-tokens``
        shows a row each); ``None`` for an image."""
        ...

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        """The tensors of one modality's batch (:mod:`mmctl.models.fields`)."""
        ...

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        """The items' pixel tensors joined as the HF processor batches them."""
        ...

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        """The items of a batch read back from its tensors (worker-side names,
        ``pixel_values_videos`` for video): for the stub's checks and ``--request``."""
        ...

    def check_received(
        self,
        kind: MediaKind,
        tensors: Mapping[str, np.ndarray],
        count: int,
        model: Model,
        raw: bool,
    ) -> None:
        """The shapes vLLM's model for this family validates (its TensorSchema);
        :class:`ContractError` with one sentence otherwise. ``raw``: uint8 pixels."""
        ...

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: Model
    ) -> list[list[np.ndarray]]:
        """Per item, the mean RGB (0–255, normalization undone by the caller's
        ``pixels`` being float32 normalized or uint8 raw) of each temporal unit:
        what the stub's ``colors`` answer reads."""
        ...


def check_failed(family: Family, reason: str) -> str:
    """The sentence for a failed :meth:`Family.check` ("mrope walk failed: …")."""
    return f"{family.layout_check.replace('_', ' ')} failed: {reason}"


def refuse_kind(family: Family, kind: MediaKind) -> None:
    """One sentence for media the family's model cannot read, and which families read it."""
    if kind not in family.modalities:
        # The registry imports every family module, each of which imports this one.
        from mmctl.models.registry import reading

        kinds = " and ".join(k.value for k in family.modalities)
        *others, last = reading(kind)
        readers = f"{', '.join(others)} and {last}" if others else last
        raise InputError(
            f"{family.name} models read {kinds}, not {kind.value}",
            hint=f"{readers} models read {kind.value}",
        )
