"""The one modality table against the wire's enum, and what it refuses."""

from __future__ import annotations

import pytest

from mmctl import modality
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.wire import proto


def test_the_table_is_the_wire_enum():
    common = proto.common_pb2
    assert {v: k for k, v in common.Modality.items()} == modality.WIRE_NAMES
    for kind, entry in modality.MODALITIES.items():
        assert entry.wire == common.Modality.Value(entry.wire_name)
        assert modality.ref_from_wire(modality.to_wire(kind)) is kind
        if entry.tensors:
            assert modality.from_wire(modality.to_wire(kind)) is kind
    assert modality.UNSPECIFIED == common.MODALITY_UNSPECIFIED
    assert set(modality.MODALITIES) == set(MediaKind)


@pytest.mark.parametrize("value", [0, 2, 7])
def test_an_unknown_modality_is_refused_not_guessed(value):
    # 2 is AUDIO: it travels as media_refs only, never as a tensor batch (the
    # servicer would read an audio feature batch as an image).
    with pytest.raises(InputError, match="which mmctl does not handle"):
        modality.from_wire(value)


def test_media_refs_take_sound_as_the_servicer_does():
    # smg-grpc-servicer's parse_media_refs: IMAGE, VIDEO, AUDIO; UNSPECIFIED and unknown refused.
    assert modality.ref_from_wire(2) is MediaKind.AUDIO
    assert modality.ref_from_wire(0) is None and modality.ref_from_wire(7) is None


def test_the_stub_reads_as_the_servicer_does():
    # smg-grpc-servicer's modality_name: VIDEO is video, everything else an image.
    assert modality.servicer_kind(3) is MediaKind.VIDEO
    for value in (0, 1, 2, 7):
        assert modality.servicer_kind(value) is MediaKind.IMAGE


def test_the_worker_pixel_keys():
    assert modality.pixel_key(MediaKind.IMAGE) == "pixel_values"
    assert modality.pixel_key(MediaKind.VIDEO) == "pixel_values_videos"
