"""Random and mutated ``GenerateRequest`` bytes and field values against the
stub worker: each is answered or refused with INVALID_ARGUMENT — never
INTERNAL, never a hang, never a file left in (or taken from) /dev/shm."""

from __future__ import annotations

import contextlib
import uuid

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmctl.client.channel import generate_method
from mmctl.transport.shm import own_files, shm_dir
from mmctl.wire import proto

CALL_TIMEOUT_S = 20
COUNTS: dict[str, int] = {}


class Bases:
    """Valid requests to mutate: a small image (a plain message) and a video
    whose pixels are large enough to be parsed apart (mmctl.wire.splice)."""

    def __init__(self, image: bytes, video: bytes) -> None:
        self.all = (image, video)

    def __repr__(self) -> str:  # hypothesis prints its arguments
        return f"Bases({', '.join(str(len(b)) for b in self.all)} bytes)"


@pytest.fixture(scope="module")
def worker(builtin_model):
    from tests.conftest import _stub

    stub = _stub(builtin_model, device_normalize=True)  # uint8 pixels: small requests
    yield stub
    stub.close()


@pytest.fixture(scope="module")
def base(red_blue, picture, builtin_model) -> Bases:
    from mmctl.choices import PixelFormat
    from mmctl.request.compose import compose

    def request(path):
        composed = compose([path], "Which colours?", builtin_model, pixel_format=PixelFormat.UINT8)
        return composed.plan.to_proto().SerializeToString()

    return Bases(request(picture), request(red_blue))


@pytest.fixture
def shm_unchanged():
    """This process's /dev/shm files (the in-process stub's and its clients'):
    other processes on a shared machine create and remove their own meanwhile."""

    def ours() -> set[str]:
        return set(own_files())

    before = ours()
    yield
    after = ours()
    assert after == before, f"/dev/shm changed: +{sorted(after - before)} -{sorted(before - after)}"


def outcome(stub, data: bytes) -> str:
    """Send ``data`` as a Generate request; the status name (``OK`` when answered)."""
    call = generate_method(stub.channel)(data, timeout=CALL_TIMEOUT_S)
    try:
        responses = list(call)
    except grpc.RpcError as err:
        code = err.code()
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, err.details())
        assert err.details(), "a refusal says why"
        return code.name
    assert responses and responses[-1].HasField("complete"), responses[-1:]
    return "OK"


def _count(test: str, result: str) -> None:
    key = f"{test}:{result}"
    COUNTS[key] = COUNTS.get(key, 0) + 1


# ---- raw bytes ----------------------------------------------------------------


@given(data=st.binary(max_size=4096))
def test_random_bytes(worker, data, shm_unchanged):
    _count("random", outcome(worker, data))


@st.composite
def mutated(draw, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "dup"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


@given(data=st.data(), which=st.integers(0, 1))
def test_mutated_valid_request_bytes(worker, base, data, which, shm_unchanged):
    _count("mutated", outcome(worker, data.draw(mutated(base.all[which]))))


# ---- field values ------------------------------------------------------------

INTS = st.one_of(
    st.integers(-3, 40),
    st.sampled_from([-(2**63), -(2**31), 2**31 - 1, 2**32, 2**40, 2**63 - 1]),
)
UINTS = st.one_of(st.integers(0, 4096), st.sampled_from([2**31, 2**32 - 1, 2**40, 2**64 - 1]))
DTYPES = st.sampled_from(
    ["float32", "bfloat16", "float16", "uint8", "int64", "int32", "float64", "", "bool", "x" * 40]
)
TENSOR_KEYS = st.sampled_from(
    ["pixel_values", "video_grid_thw", "image_grid_thw", "second_per_grid_ts", "nonsense"]
)


def _shm_name(kind: str) -> str:
    """A name of each kind the reader must handle (files made here are removed here)."""
    if kind == "valid":
        return f"mmctl-fuzz-{uuid.uuid4().hex}"
    return {
        "missing": "mmctl-does-not-exist",
        "traversal": "../../etc/passwd",
        "absolute": "/etc/passwd",
        "empty": "",
        "dot": ".",
        "nul": "a\x00b",
        "long": "m" * 300,
    }[kind]


@st.composite
def field_mutation(draw):
    """A list of edits to a parsed request; applied by :func:`apply`."""
    return draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("shape"), TENSOR_KEYS, st.lists(INTS, max_size=6)),
                st.tuples(st.just("dtype"), TENSOR_KEYS, DTYPES),
                st.tuples(st.just("inline"), TENSOR_KEYS, st.binary(max_size=64)),
                st.tuples(
                    st.just("shm"),
                    TENSOR_KEYS,
                    st.sampled_from(
                        ["valid", "missing", "traversal", "absolute", "empty", "dot", "nul", "long"]
                    ),
                    UINTS,
                    UINTS,
                ),
                st.tuples(st.just("modality"), st.integers(-5, 10)),
                st.tuples(st.just("placeholder"), INTS, INTS),
                st.tuples(st.just("ids"), st.lists(st.integers(0, 2**32 - 1), max_size=12)),
                st.tuples(st.just("max_tokens"), st.integers(0, 2**31 - 1)),
                st.tuples(st.just("stop"), st.lists(st.text(max_size=8), max_size=3)),
                st.tuples(st.just("hashes"), st.lists(st.text(max_size=70), max_size=3)),
                st.tuples(st.just("extra"), st.integers(0, 3)),
                st.tuples(st.just("ref"), st.text(max_size=60), st.integers(-1, 5)),
            ),
            min_size=1,
            max_size=4,
        )
    )


def _tensor(req, key):
    mm = req.mm_inputs
    if key == "pixel_values":
        return mm.pixel_values
    return mm.model_specific_tensors[key]


def apply(req, edits, made: list) -> None:
    for edit in edits:
        with contextlib.suppress(ValueError, TypeError):  # a value the field cannot hold
            _apply(req, edit, made)


def _apply(req, edit, made: list) -> None:
    common = proto.common_pb2
    kind = edit[0]
    if kind == "shape":
        _tensor(req, edit[1]).shape[:] = [max(-(2**63), min(2**63 - 1, v)) for v in edit[2]]
    elif kind == "dtype":
        _tensor(req, edit[1]).dtype = edit[2]
    elif kind == "inline":
        _tensor(req, edit[1]).inline = edit[2]
    elif kind == "shm":
        _, key, name_kind, offset, nbytes = edit
        td = _tensor(req, key)
        name = _shm_name(name_kind)
        if name_kind == "valid":
            payload = td.inline if td.WhichOneof("payload") == "inline" else b"\0" * 64
            (shm_dir() / name).write_bytes(payload)
            made.append(shm_dir() / name)
            nbytes = nbytes if nbytes % 2 else len(payload)  # half of them exact
            offset = offset if offset % 3 == 0 else 0
        td.shm.CopyFrom(common.ShmHandle(name=name, offset=offset, nbytes=nbytes))
    elif kind == "modality":
        req.mm_inputs.modality = edit[1]
    elif kind == "placeholder":
        ph = req.mm_inputs.mm_placeholders
        if ph:
            ph[0].offset = max(-(2**31), min(2**31 - 1, edit[1]))
            ph[0].length = max(-(2**31), min(2**31 - 1, edit[2]))
    elif kind == "ids":
        ids = req.tokenized.input_ids
        cut = len(edit[1]) % (len(ids) + 1)
        del ids[len(ids) - cut :]
        ids.extend(edit[1])
    elif kind == "max_tokens":
        req.sampling_params.max_tokens = edit[1]
    elif kind == "stop":
        req.sampling_params.stop[:] = edit[1]
    elif kind == "hashes":
        req.mm_inputs.mm_hashes[:] = edit[1]
    elif kind == "extra":
        for _ in range(edit[1]):
            req.extra_mm_inputs.add().CopyFrom(req.mm_inputs)
    elif kind == "ref":
        item = req.media_refs.items.add()
        item.url, item.modality = edit[1], edit[2]  # beside mm_inputs: refused


@given(edits=field_mutation(), which=st.integers(0, 1))
def test_mutated_field_values(worker, base, edits, which, shm_unchanged):
    req = proto.engine_pb2.GenerateRequest.FromString(base.all[which])
    made: list = []
    try:
        apply(req, edits, made)
        _count("fields", outcome(worker, req.SerializeToString()))
    finally:
        for path in made:
            path.unlink(missing_ok=True)


def test_zz_report_counts(capsys):
    """Prints how many examples each fuzz test ran and how they ended (CI log),
    and holds that each ran, and that the stub both refused and answered some:
    a fuzz run that only ever saw one outcome explored nothing."""
    with capsys.disabled():
        print(f"\nfuzz outcomes: {dict(sorted(COUNTS.items()))}")
    mine = {k: n for k, n in COUNTS.items() if k.split(":")[0] in ("random", "mutated", "fields")}
    assert {key.split(":")[0] for key in mine} == {"random", "mutated", "fields"}, COUNTS
    outcomes = {key.split(":", 1)[1] for key in mine}
    assert "OK" in outcomes and outcomes - {"OK"}, mine
