"""The one modality table: a media kind, its wire enum value and its names.

Every place that turns a :class:`~mmctl.media.probe.MediaKind` into the
shared ``smg.grpc.common.Modality`` enum, or back, reads this table — so a
modality mmctl does not handle (a value newer than our proto, or AUDIO in a
tensor batch) is refused with one sentence instead of being guessed to be an
image.

AUDIO travels only as a ``media_refs`` item: smg-grpc-servicer 0.14.1 fetches
and processes those with vLLM's own audio loader, but names every
preprocessed tensor batch that is not VIDEO "image" (``mm_keys.modality_name``),
so an audio feature batch would reach vLLM as pixels. ``Modality.tensors``
says which modalities may travel as tensors.

The one deliberate exception is the stub worker's reading of a request
(:func:`servicer_kind`): it mirrors smg-grpc-servicer 0.14.1, which reads
every value but VIDEO as an image, so it accepts what the real one accepts.

Standard library only: the enum numbers are the wire contract of
``common.proto`` (``tests/unit/test_modality.py`` checks them against the
generated module), so nothing here loads protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind


@dataclass(frozen=True)
class Modality:
    kind: MediaKind
    #: ``smg.grpc.common.Modality`` value (``common.proto``).
    wire: int
    #: The enum value's name in ``common.proto``.
    wire_name: str
    #: What vLLM calls the modality (``mm_item_limits``, ``limit_mm_per_prompt``).
    vllm_name: str
    #: The model kwarg the servicer registers a batch's ``pixel_values`` under.
    pixel_key: str
    #: Whether it may travel as a preprocessed tensor batch (else media_refs only).
    tensors: bool = True


MODALITIES: dict[MediaKind, Modality] = {
    MediaKind.IMAGE: Modality(MediaKind.IMAGE, 1, "IMAGE", "image", "pixel_values"),
    MediaKind.VIDEO: Modality(MediaKind.VIDEO, 3, "VIDEO", "video", "pixel_values_videos"),
    MediaKind.AUDIO: Modality(MediaKind.AUDIO, 2, "AUDIO", "audio", "", tensors=False),
}
#: ``Modality.MODALITY_UNSPECIFIED``, which the servicer reads as an image.
UNSPECIFIED = 0
#: Every value ``common.proto`` names, for messages about the ones mmctl lacks.
WIRE_NAMES = {0: "MODALITY_UNSPECIFIED", 1: "IMAGE", 2: "AUDIO", 3: "VIDEO"}
_BY_WIRE = {m.wire: m for m in MODALITIES.values()}


def of(kind: MediaKind) -> Modality:
    return MODALITIES[kind]


def to_wire(kind: MediaKind) -> int:
    return MODALITIES[kind].wire


def from_wire(value: int, what: str = "a batch") -> MediaKind:
    """The kind of a recorded or received tensor batch; a modality that cannot
    travel as tensors (AUDIO) or is unknown is refused."""
    found = _BY_WIRE.get(value)
    if found is None or not found.tensors:
        name = WIRE_NAMES.get(value, f"value {value}")
        handled = ", ".join(m.wire_name for m in MODALITIES.values() if m.tensors)
        raise InputError(
            f"{what} has modality {name}, which mmctl does not handle (it handles {handled})"
        )
    return found.kind


def ref_from_wire(value: int) -> MediaKind | None:
    """The kind of a ``media_refs`` item (IMAGE, VIDEO, AUDIO), as the servicer's
    ``parse_media_refs`` reads it; ``None`` for what it refuses (UNSPECIFIED, unknown)."""
    found = _BY_WIRE.get(value)
    return None if found is None else found.kind


def servicer_kind(value: int) -> MediaKind:
    """smg-grpc-servicer's ``modality_name``: VIDEO is video, everything else an image."""
    return MediaKind.VIDEO if value == MODALITIES[MediaKind.VIDEO].wire else MediaKind.IMAGE


def pixel_key(kind: MediaKind) -> str:
    return MODALITIES[kind].pixel_key
