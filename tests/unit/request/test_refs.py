"""The media_refs request send, bench and batch share (:mod:`mmctl.request.refs`)."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from mmctl import modality
from mmctl.bench.runner import Arm, BenchConfig
from mmctl.bench.workload import WorkItem
from mmctl.choices import MediaRef, PixelFormat, Processing, Transport
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind
from mmctl.request.build import RequestPlan, Sampling
from mmctl.request.refs import media_refs


def test_data_refs_carry_the_file_and_file_refs_its_path(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 40)
    ((kind, url),) = media_refs([path], [MediaKind.IMAGE], MediaRef.DATA)
    assert kind is MediaKind.IMAGE and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == path.read_bytes()
    ((_, url),) = media_refs([path], [MediaKind.IMAGE], MediaRef.FILE)
    assert url == path.resolve().as_uri()


def test_a_plan_of_refs_becomes_media_refs_and_no_tensors():
    refs = [(MediaKind.VIDEO, "file:///v.mp4"), (MediaKind.IMAGE, "file:///a.png")]
    plan = RequestPlan("t", np.array([1, 2, 3]), [], Sampling(max_tokens=4), media_refs=refs)
    req = plan.to_proto()
    assert [(i.modality, i.url) for i in req.media_refs.items] == [
        (modality.to_wire(k), url) for k, url in refs
    ]
    assert not req.HasField("mm_inputs") and not req.extra_mm_inputs
    assert list(req.tokenized.input_ids) == [1, 2, 3]
    assert plan.encode().data == req.SerializeToString()  # nothing spliced


def test_a_plan_without_refs_has_no_media_refs():
    assert not RequestPlan("t", np.array([1]), []).to_proto().HasField("media_refs")


def test_the_bench_arm_of_worker_processing_is_named_for_it():
    assert Arm(Transport.INLINE, None).name == "inline/media_refs"
    assert Arm(Transport.SHM, PixelFormat.UINT8).name == "shm/uint8"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"processing": Processing.CLIENT, "media_ref": MediaRef.FILE}, "--media-ref applies"),
        ({"processing": "worker", "pixel_dtypes": (PixelFormat.FLOAT32,)}, "--pixel-dtype"),
        ({"processing": "sometimes"}, "--processing must be one of"),
    ],
)
def test_bench_checks_its_processing_options_as_send_does(options, said):
    with pytest.raises(UsageError) as err:
        BenchConfig(targets=("x:1",), items=(WorkItem("a"),), **options)
    assert said in err.value.message
