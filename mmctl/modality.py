"""The one modality table: a media kind, its wire enum value and its names.

Every place that turns a :class:`~mmctl.media.probe.MediaKind` into the
shared ``smg.grpc.common.Modality`` enum, or back, reads this table — so a
modality mmctl does not handle (AUDIO, a value newer than our proto) is
refused with one sentence instead of being guessed to be an image.

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


MODALITIES: dict[MediaKind, Modality] = {
    MediaKind.IMAGE: Modality(MediaKind.IMAGE, 1, "IMAGE", "image", "pixel_values"),
    MediaKind.VIDEO: Modality(MediaKind.VIDEO, 3, "VIDEO", "video", "pixel_values_videos"),
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
    """The kind of a recorded or received batch; an unknown modality is refused."""
    found = _BY_WIRE.get(value)
    if found is None:
        name = WIRE_NAMES.get(value, f"value {value}")
        raise InputError(
            f"{what} has modality {name}, which mmctl does not handle "
            f"(it handles {', '.join(m.wire_name for m in MODALITIES.values())})"
        )
    return found.kind


def servicer_kind(value: int) -> MediaKind:
    """smg-grpc-servicer's ``modality_name``: VIDEO is video, everything else an image."""
    return MediaKind.VIDEO if value == MODALITIES[MediaKind.VIDEO].wire else MediaKind.IMAGE


def pixel_key(kind: MediaKind) -> str:
    return MODALITIES[kind].pixel_key
