"""A model family: what it is, and four parts split by who reads them.

The request path —

    media → processor → prompt (expand, check) → wire (fields, batching) → transport

— and the stub worker's checks never branch on a family's name: they ask the
family's parts. Each part has one reader:

- :class:`Processor` (preprocessing): media → the tensors vLLM's processor
  makes, with their timing; the pixel type a default worker takes.
- :class:`Prompt` (prompt layout): the chat format, what one placeholder
  becomes (vLLM's ``_get_prompt_updates``), and the check of a laid-out
  prompt (the mrope walk for Qwen).
- :class:`Wire` (request building): the field table (vLLM's
  ``_get_mm_fields_config``) and how the HF processor batches items.
- :class:`Contract` (the stub worker and ``inspect-tokens --request``): items
  read back from received tensors, the shapes vLLM's model validates, and
  the colours the stub answers with.

A family that reuses another's processor is a declaration of a few lines
(:func:`dataclasses.replace` of the other's :class:`Family`). The anchors:
smg's ``ModelProcessorSpec`` (matching, placeholders, field layouts), vLLM's
``BaseProcessingInfo`` / ``BaseMultiModalProcessor`` split, transformers'
declared processor settings (:mod:`mmctl.models.settings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat, PruningMethod
from mmctl.media.probe import MediaKind
from mmctl.models.settings import Settings
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.values.fields import WireField
from mmctl.values.items import Frames, ItemFacts, ItemOptions, Preprocessed
from mmctl.values.layout import Layout, LayoutCheck
from mmctl.values.pruning import VideoPruning
from mmctl.values.received import Received
from mmctl.values.tokens import Tokens


class ModelView(Protocol):
    """What a family's parts read of a loaded model (:class:`mmctl.models.model.Model`)."""

    @property
    def params(self) -> Any:
        """The family's resolved settings (its own :class:`Settings` class)."""
        ...

    @property
    def token_ids(self) -> Tokens: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def pruning(self) -> VideoPruning:
        """The worker's video pruning (:mod:`mmctl.values.pruning`): how many of a
        video's tokens its prompt holds."""
        ...


class Processor(Protocol):
    """Media → exactly the tensors vLLM's processor gives the model."""

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

    def preprocess(
        self, path: Path, kind: MediaKind, settings: Any, fmt: PixelFormat, options: ItemOptions
    ) -> Preprocessed:
        """One media item → its tensors and facts; ``settings`` the family's."""
        ...


class Prompt(Protocol):
    """The prompt: chat format, expansion, and its check."""

    @property
    def default_system(self) -> str | None:
        """mmctl's built-in chat format's system turn (``None``: none)."""
        ...

    @property
    def check_name(self) -> str:
        """The check's name in a run's checks (``mrope_walk``, ``placeholder_spans``)."""
        ...

    def knows_media(self, template: str) -> bool:
        """Whether a chat template writes this family's media placeholders."""
        ...

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        """The text one item contributes to a prompt mmctl writes itself."""
        ...

    def chat_format(self, body: str, system: str | None) -> str:
        """One user turn (``body``: placeholders and text) in the family's chat
        format, for model folders without a multimodal template."""
        ...

    def expand(
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        """The placeholders of the prompt's ``ids`` expanded for ``items``, as vLLM's
        prompt updates expand them; spans are the expansions."""
        ...

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        """What vLLM's model relies on in the laid-out prompt."""
        ...

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        """How a video item's embedding tokens divide into its frames (``inspect-tokens``
        shows a row each); ``None`` for an image."""
        ...


class Wire(Protocol):
    """How a modality's items travel in one batch."""

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        """The tensors of one modality's batch (:mod:`mmctl.values.fields`)."""
        ...

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        """The items' pixel tensors joined as the HF processor batches them."""
        ...


class Contract(Protocol):
    """A received batch read the way vLLM's model reads it (the stub's checks,
    ``inspect-tokens --request``); tensors by worker-side names
    (``pixel_values_videos`` for video)."""

    def received_items(self, batch: Received, model: ModelView) -> list[ItemFacts]:
        """The items of a batch, read back from its tensors."""
        ...

    def check_received(self, batch: Received, model: ModelView) -> None:
        """The shapes vLLM's model for this family validates (its TensorSchema);
        :class:`~mmctl.values.received.ContractError` otherwise."""
        ...

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: ModelView
    ) -> list[list[np.ndarray]]:
        """Per item, the mean RGB of each temporal unit (the stub's colours answer)."""
        ...


#: ``tokens(config, vocab)``: the special ids from ``config.json`` (``vocab``:
#: the tokenizer's token → id, for ids the config does not carry).
TokenReader = Callable[[Mapping[str, Any], Callable[[str], int | None]], Tokens]


@dataclass(frozen=True)
class Family:
    """One model family: how it is recognised, what it reads, and its parts."""

    #: mmctl's name (``--family``), e.g. ``qwen3-vl``, ``llava-next``.
    name: str
    #: Other ``--family`` names for it.
    aliases: tuple[str, ...]
    #: ``config.json`` ``model_type`` values it serves.
    model_types: tuple[str, ...]
    #: The kinds of media the model reads; others are refused before decoding.
    modalities: tuple[MediaKind, ...]
    #: Its processor settings, declared (:mod:`mmctl.models.settings`).
    settings: type[Settings]
    tokens: TokenReader
    processor: Processor
    prompt: Prompt
    wire: Wire
    contract: Contract
    #: ``architectures`` prefixes that are this family's where ``model_type`` is not.
    architectures: tuple[str, ...] = ()
    #: The model types whose vLLM model prunes video (``SupportsMultiModalPruning``)
    #: and the methods it implements (its ``supported_video_pruning_methods``).
    video_pruning: tuple[tuple[str, tuple[PruningMethod, ...]], ...] = ()
    #: The kinds its vLLM model cannot take preprocessed, each with the reason: a
    #: request carrying one is processed by the worker as a whole
    #: (:func:`mmctl.request.refs.by_worker`, beside sound's rule).
    worker_kinds: tuple[tuple[MediaKind, str], ...] = ()

    def matches(self, config: Mapping[str, Any]) -> bool:
        """True when ``config.json`` (model_type / architectures) is this family's."""
        if config.get("model_type") in self.model_types:
            return True
        architectures = config.get("architectures") or ()
        return bool(self.architectures) and any(
            str(a).startswith(self.architectures)
            for a in (architectures if isinstance(architectures, list) else ())
        )

    def pruning_methods(self, model_type: str) -> tuple[PruningMethod, ...]:
        """What vLLM's model for ``model_type`` can prune with; ``()``: it cannot.
        Files of another model type (``--family`` forced on them) get every
        method any of the family's models has: which one serves them is the
        worker's to know."""
        table = dict(self.video_pruning)
        if model_type in self.model_types:
            return table.get(model_type, ())
        return tuple(dict.fromkeys(m for methods in table.values() for m in methods))

    def check_failed(self, reason: str) -> str:
        """The sentence for a failed :meth:`Prompt.check` ("mrope walk failed: …")."""
        return f"{self.prompt.check_name.replace('_', ' ')} failed: {reason}"
