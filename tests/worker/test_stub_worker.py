"""The stub worker with hand-built requests: answers, transports, streaming, Abort,
the malformed-request table, capabilities, reflection, bundle."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
import time
import zipfile

import grpc
import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.request import tensors
from mmctl.transport.shm import ShmArena, shm_dir
from mmctl.wire import proto

from .conftest import shm_placer

VS = 151652
VPAD = 151656


def test_red_blue_inline_streaming(stub, video_request, builtin_model):
    req, _ = video_request()
    tokens, done = stub.generate(req)
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red, blue"
    assert done.finish_reason == "stop" and done.matched_token_id == 151645
    assert done.prompt_tokens == len(req.tokenized.input_ids)


def test_red_blue_non_streaming_bf16(stub, video_request, builtin_model):
    req, _ = video_request(PixelFormat.BFLOAT16)
    req.stream = False
    tokens, done = stub.generate(req)
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red, blue"
    assert list(done.output_ids) == tokens and done.completion_tokens == len(tokens)


def test_red_blue_over_shm_and_files_are_consumed(stub, video_request, builtin_model, no_leaks):
    req, composed = video_request()
    with ShmArena() as arena:
        req = composed.plan.to_proto(shm_placer(arena, min_bytes=64 * 1024))
        assert req.mm_inputs.pixel_values.WhichOneof("payload") == "shm"
        assert (
            req.mm_inputs.model_specific_tensors["video_grid_thw"].WhichOneof("payload") == "inline"
        )
        tokens, _ = stub.generate(req)
        assert arena.pending() == []  # the worker unlinked what it read
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red, blue"
    assert "via shm" in stub.log.getvalue()


def test_max_tokens_cuts_with_length(stub, video_request):
    req, _ = video_request()
    req.sampling_params.max_tokens = 1
    tokens, done = stub.generate(req)
    assert len(tokens) == 1 and done.finish_reason == "length"


def test_stop_string(stub, video_request, builtin_model):
    req, _ = video_request()
    req.sampling_params.stop.append(",")
    tokens, done = stub.generate(req)
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red"
    assert done.finish_reason == "stop" and done.matched_stop_str == ","


def test_abort_cancels_an_in_flight_stream(make_stub, video_request):
    slow = make_stub(delay_ms=300)
    req, _ = video_request()
    req.request_id = "to-abort"
    result = {}

    def run():
        result["out"] = slow.generate(req)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 5
    while time.time() < deadline and "to-abort" not in str(slow.running.servicer.requests._events):
        time.sleep(0.02)
    slow.engine.Abort(proto.engine_pb2.AbortRequest(request_ids=["to-abort"]))
    thread.join(10)
    tokens, done = result["out"]
    assert done.finish_reason == "abort" and len(tokens) < 4


def test_echo_describes_what_arrived(make_stub, video_request, builtin_model):
    echo = make_stub(answer="echo")
    req, _ = video_request()
    tokens, _ = echo.generate(req)
    text = builtin_model.tokenizer.decode(tokens, skip_special_tokens=True)
    assert "VIDEO" in text and "pixel_values_videos [192, 1536] float32 via inline" in text


def test_device_normalize_takes_uint8_and_refuses_floats(make_stub, video_request, builtin_model):
    dn = make_stub(device_normalize=True)
    req, _ = video_request(PixelFormat.UINT8)
    tokens, _ = dn.generate(req)
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red, blue"
    info = dn.engine.GetServerInfo(proto.engine_pb2.GetServerInfoRequest())
    assert info.mm_device_do_normalize
    req, _ = video_request(PixelFormat.FLOAT32)
    with pytest.raises(grpc.RpcError) as err:
        dn.generate(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "normalized twice" in err.value.details()


def test_media_refs_processed_by_the_worker(stub, red_blue, builtin_model):
    engine, common = proto.engine_pb2, proto.common_pb2
    text = (
        "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Which colours?"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    url = "data:video/mp4;base64," + base64.b64encode(red_blue.read_bytes()).decode()
    req = engine.GenerateRequest(
        request_id="refs",
        tokenized=engine.TokenizedInput(
            original_text=text, input_ids=builtin_model.tokenizer.encode(text)
        ),
        media_refs=engine.MediaRefs(items=[engine.MediaRef(modality=common.VIDEO, url=url)]),
        stream=True,
    )
    tokens, _ = stub.generate(req)
    assert builtin_model.tokenizer.decode(tokens, skip_special_tokens=True) == "red, blue"


# ---- the malformed-request table ----------------------------------------------


def _shm_file(name: str, data: bytes) -> str:
    (shm_dir() / name).write_bytes(data)
    return name


def _with_shm_pixels(req, name: str, nbytes: int | None = None) -> None:
    td = req.mm_inputs.pixel_values
    nbytes = nbytes if nbytes is not None else len(td.inline)
    td.shm.name, td.shm.offset, td.shm.nbytes = name, 0, nbytes


def _mutate_ids(req, fn) -> None:
    ids = list(req.tokenized.input_ids)
    fn(ids)
    del req.tokenized.input_ids[:]
    req.tokenized.input_ids.extend(ids)


def _drop_frame2_start(req):
    def fn(ids):
        starts = [i for i, t in enumerate(ids) if t == VS]
        ids[starts[2]] = 27  # outer, frame 1, frame 2

    _mutate_ids(req, fn)


def _extra_pad(req):
    def fn(ids):
        ids.insert(ids.index(VPAD), VPAD)

    _mutate_ids(req, fn)
    req.mm_inputs.mm_placeholders[0].length += 1


def _rows_off(req):
    td = req.mm_inputs.pixel_values
    td.inline = td.inline[: -1536 * 4]
    td.shape[0] -= 1


def _float64(req):
    td = req.mm_inputs.pixel_values
    td.dtype = "float64"
    td.shape[1] //= 2


def _uint8_to_float_worker(req):
    td = req.mm_inputs.pixel_values
    arr = tensors.from_bytes(td.inline, td.shape, "float32")
    td.inline = np.clip((arr * 127.5 + 127.5).round(), 0, 255).astype(np.uint8).tobytes()
    td.dtype = "uint8"


def _flat_missing(req):
    req.mm_inputs.flat_keys["pixel_values"] = "patches_per_clip"


def _undeclare(field, key):
    def fn(req):
        keys = getattr(req.mm_inputs, field)
        kept = [k for k in keys if k != key]
        del keys[:]
        keys.extend(kept)

    return fn


def _short_timestamps(req):
    td = req.mm_inputs.model_specific_tensors["timestamps"]
    td.inline = td.inline[:4]
    del td.shape[:]
    td.shape.extend([1, 1])


def _grid_of_four(req):
    grid = np.asarray([[4, 6, 8, 1]], np.int64)
    req.mm_inputs.model_specific_tensors["video_grid_thw"].CopyFrom(tensors.inline(grid, "int64"))


def _modality(value):
    def fn(req):
        req.mm_inputs.modality = value

    return fn


MALFORMED = [
    ("shm-dotdot", lambda req, tmp: _with_shm_pixels(req, "../x"), "Invalid TensorData.shm name"),
    (
        "shm-absolute",
        lambda req, tmp: _with_shm_pixels(req, "/etc/passwd"),
        "Invalid TensorData.shm name",
    ),
    ("shm-symlink", "symlink", "is a symlink"),
    ("shm-fifo", "fifo", "not a regular file"),
    ("shm-short", "short", "byte length mismatch"),
    ("dtype-float64", lambda req, tmp: _float64(req), "unsupported proto tensor dtype 'float64'"),
    (
        "uint8-to-float-worker",
        lambda req, tmp: _uint8_to_float_worker(req),
        "does not normalize on the device",
    ),
    ("rows", lambda req, tmp: _rows_off(req), "needs sum(t*h*w) = 192"),
    ("pad-count", lambda req, tmp: _extra_pad(req), "holds 49 video pad tokens"),
    ("frame2-start", lambda req, tmp: _drop_frame2_start(req), "frame 2/4"),
    (
        "flat-sizes-missing",
        lambda req, tmp: _flat_missing(req),
        "flat_keys splits 'pixel_values_videos' by 'patches_per_clip', which is not a tensor",
    ),
    ("grid-shape", lambda req, tmp: _grid_of_four(req), "video_grid_thw has shape [1, 4]"),
    (
        "grid-not-batched",
        lambda req, tmp: _undeclare("batched_keys", "video_grid_thw")(req),
        "batched_keys lacks 'video_grid_thw'",
    ),
    (
        "timestamps",
        lambda req, tmp: _short_timestamps(req),
        "timestamps has shape [1, 1]; 1 placeholder(s) with grids [[4, 6, 8]] need [1, 4]",
    ),
    # The servicer reads every modality but VIDEO as an image batch.
    (
        "audio",
        lambda req, tmp: _modality(2)(req),
        "the served model's image embedding token is 151655",
    ),
    (
        "modality-7",
        lambda req, tmp: _modality(7)(req),
        "the served model's image embedding token is 151655",
    ),
]


@pytest.mark.parametrize("name,mutate,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_are_invalid_argument(
    stub, video_request, name, mutate, message, tmp_path, no_leaks
):
    req, _ = video_request()
    made = []
    if mutate == "symlink":
        target = tmp_path / "target"
        target.write_bytes(req.mm_inputs.pixel_values.inline)
        link = shm_dir() / f"mmctl-test-{os.getpid()}-link"
        link.symlink_to(target)
        made.append(link)
        _with_shm_pixels(req, link.name)
    elif mutate == "fifo":
        fifo = shm_dir() / f"mmctl-test-{os.getpid()}-fifo"
        os.mkfifo(fifo)
        made.append(fifo)
        _with_shm_pixels(req, fifo.name)
    elif mutate == "short":
        data = req.mm_inputs.pixel_values.inline
        name_ = _shm_file(f"mmctl-test-{os.getpid()}-short", data[:100])
        _with_shm_pixels(req, name_, nbytes=len(data))
        made.append(shm_dir() / name_)
    else:
        mutate(req, tmp_path)
    try:
        with pytest.raises(grpc.RpcError) as err:
            stub.generate(req)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        assert message in err.value.details()
        # Refused without unlinking: the stub deletes only what it read
        # (the real worker unlinks a short file too; SECURITY.md).
        assert all(path.exists() or path.is_symlink() for path in made)
    finally:
        for path in made:
            if path.exists() or path.is_symlink():
                path.unlink()
    ok = stub.engine.HealthCheck(proto.engine_pb2.HealthCheckRequest())
    assert ok.healthy  # still serving after the refusal


def test_item_limit_and_encoder_budget(make_stub, video_request):
    tight = make_stub(item_limits={"video": 1}, encoder_budget=40)
    req, _ = video_request()
    with pytest.raises(grpc.RpcError) as err:
        tight.generate(req)
    assert "mm_encoder_budget 40" in err.value.details()


# ---- legacy, capabilities, reflection, bundle -------------------------------------


def test_legacy_worker_looks_old(make_stub, video_request):
    old = make_stub(legacy_proto=True)
    info = old.engine.GetServerInfo(proto.engine_pb2.GetServerInfoRequest())
    assert info.shm_namespace_id and not info.model_dtype and not info.mm_item_limits
    assert not info.mm_device_do_normalize and info.mm_encoder_budget == 0
    req, _ = video_request(PixelFormat.BFLOAT16)
    with pytest.raises(grpc.RpcError) as err:
        old.generate(req)
    assert "unsupported proto tensor dtype 'bfloat16'" in err.value.details()


def _reflection(address: str, request):
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with grpc.insecure_channel(address) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        (resp,) = list(
            stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(**request)]))
        )
    return resp


def _multimodal_fields(address: str) -> set[str]:
    from google.protobuf import descriptor_pb2

    resp = _reflection(address, {"file_containing_symbol": "vllm.grpc.engine.MultimodalInputs"})
    for raw in resp.file_descriptor_response.file_descriptor_proto:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
        for message in fdp.message_type:
            if message.name == "MultimodalInputs":
                return {f.name for f in message.field}
    raise AssertionError("MultimodalInputs not served")


def test_reflection_lists_services_like_grpcurl(stub, make_stub):
    resp = _reflection(stub.running.address, {"list_services": ""})
    names = {s.name for s in resp.list_services_response.service}
    assert {"vllm.grpc.engine.VllmEngine", "grpc.health.v1.Health"} <= names
    assert "modality" in _multimodal_fields(stub.running.address)
    old = make_stub(legacy_proto=True)
    assert "modality" not in _multimodal_fields(old.running.address)


def test_standard_health_service(stub):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    health = health_pb2_grpc.HealthStub(stub.channel)
    resp = health.Check(health_pb2.HealthCheckRequest(service="vllm.grpc.engine.VllmEngine"))
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_get_tokenizer_streams_the_bundle_in_64k_chunks(stub):
    chunks = list(stub.engine.GetTokenizer(proto.common_pb2.GetTokenizerRequest()))
    assert all(len(c.data) == 64 * 1024 for c in chunks[:-1])
    assert all(not c.sha256 for c in chunks[:-1])
    data = b"".join(c.data for c in chunks)
    assert chunks[-1].sha256 == hashlib.sha256(data).hexdigest()
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert {"tokenizer.json", "config.json", "preprocessor_config.json"} <= names


def test_model_info(stub):
    info = stub.engine.GetModelInfo(proto.engine_pb2.GetModelInfoRequest())
    assert info.supports_vision and info.model_type == "qwen3_vl"
    assert list(info.eos_token_ids) == [151645, 151643]


def test_item_limit_is_enforced(make_stub, red_blue, builtin_model):
    from mmctl.request.compose import compose

    one = make_stub(item_limits={"video": 1})
    req = compose([red_blue, red_blue], "Both?", builtin_model).plan.to_proto()
    with pytest.raises(grpc.RpcError) as err:
        one.generate(req)
    assert (
        "2 video items in one request; this worker's mm_item_limits allow 1" in err.value.details()
    )


def test_file_media_ref_outside_the_allowed_folder(make_stub, red_blue, builtin_model, tmp_path):
    engine, common = proto.engine_pb2, proto.common_pb2
    guarded = make_stub(allowed_local_media_path=tmp_path)
    text = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>?<|im_end|>\n"
    req = engine.GenerateRequest(
        tokenized=engine.TokenizedInput(input_ids=builtin_model.tokenizer.encode(text)),
        media_refs=engine.MediaRefs(
            items=[engine.MediaRef(modality=common.VIDEO, url=red_blue.resolve().as_uri())]
        ),
    )
    with pytest.raises(grpc.RpcError) as err:
        guarded.generate(req)
    assert "outside the allowed folder" in err.value.details()


def test_a_terabyte_shm_claim_is_a_short_read_not_an_allocation(stub, video_request, no_leaks):
    req, _ = video_request()
    name = _shm_file(f"mmctl-test-{os.getpid()}-tiny", b"x" * 64)
    _with_shm_pixels(req, name, nbytes=2**40)
    with pytest.raises(grpc.RpcError) as err:
        stub.generate(req)
    assert "expected 1099511627776, got 64" in err.value.details()
    (shm_dir() / name).unlink()  # not read, so not the stub's to remove


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_the_stub_reads_only_its_own_uids_shm_files(make_stub, video_request, no_leaks):
    """A stub running as root must not serve another user's 0600 file to
    whoever names it, nor delete it."""
    req, _ = video_request()
    payload = req.mm_inputs.pixel_values.inline
    name = _shm_file(f"mmctl-test-{os.getpid()}-nobody", payload)
    path = shm_dir() / name
    os.chown(path, 65534, 65534)
    path.chmod(0o600)
    try:
        _with_shm_pixels(req, name)
        with pytest.raises(grpc.RpcError) as err:
            make_stub().generate(req)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "owned by uid 65534; this worker reads only files of uid 0" in err.value.details()
        assert path.exists()  # not read, not removed
        allowing = make_stub(shm_owners=frozenset({0, 65534}))
        _, done = allowing.generate(req)
        assert done.finish_reason == "stop" and not path.exists()  # read, then removed
    finally:
        path.unlink(missing_ok=True)


def _stub_process(*args):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mmctl", "stub-worker", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_port_out_of_range_is_usage(port):
    done = _stub_process("--port", port)
    assert done.returncode == 2
    assert done.stderr == f"Error: port must be 0-65535, got {port}\n"


def test_a_busy_port_is_refused_not_shared(stub):
    port = stub.running.port
    done = _stub_process("--port", port)
    assert done.returncode == 2, done.stderr
    # One line, ours: no gRPC C-core log line, and no second server on the port.
    assert done.stderr == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_a_qwen25_worker_checks_its_own_field_table(red_blue, tmp_path, monkeypatch):
    import mmctl
    from mmctl.models.model import load_model
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path))
    running = start(StubConfig(model=load_model(family="qwen2.5-vl"), log=io.StringIO()), port=0)
    try:
        with mmctl.Client(running.address, family="qwen2.5-vl") as client:
            ok = client.send(red_blue, "Which colours?", transport="inline")
            built = client.build(red_blue, "Which colours?")
        assert ok.answer == "red, blue"
        assert "second_per_grid_ts" in built.request.mm_inputs.batched_keys
        refused = pytest.raises(mmctl.WorkerRejected, match="carries no second_per_grid_ts tensor")
        with mmctl.Client(running.address) as qwen3, refused:  # Qwen3-VL: no timing tensor
            qwen3.send(red_blue, "Which colours?", transport="inline", skip_checks=True)
    finally:
        running.stop(grace=0.5)


# ---- details ----


def test_a_tensor_of_too_many_dimensions_is_invalid_argument(stub, video_request):
    req, _ = video_request()
    td = req.mm_inputs.model_specific_tensors["video_grid_thw"]
    td.shape[:] = [1] * 65
    td.inline = b"\0" * 8
    td.dtype = "int64"
    with pytest.raises(grpc.RpcError) as err:
        stub.generate(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "65 dimensions, at most 64" in err.value.details()


def test_a_file_url_naming_another_host_is_refused(make_stub, red_blue, builtin_model, tmp_path):
    engine, common = proto.engine_pb2, proto.common_pb2
    (tmp_path / "clip.mp4").write_bytes(red_blue.read_bytes())
    guarded = make_stub(allowed_local_media_path=tmp_path)
    text = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>?<|im_end|>\n"
    for host, ok in (("other-host", False), ("localhost", True), ("", True)):
        url = f"file://{host}{tmp_path / 'clip.mp4'}"
        req = engine.GenerateRequest(
            tokenized=engine.TokenizedInput(input_ids=builtin_model.tokenizer.encode(text)),
            media_refs=engine.MediaRefs(items=[engine.MediaRef(modality=common.VIDEO, url=url)]),
        )
        if ok:
            _, done = guarded.generate(req)
            assert done.finish_reason in ("stop", "length")
            continue
        with pytest.raises(grpc.RpcError) as err:
            guarded.generate(req)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "file://other-host/" in err.value.details()


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_cancelled_and_deadlined_generates_leave_a_log_line(make_stub, video_request, how):
    slow = make_stub(delay_ms=200)
    req, _ = video_request()
    req.request_id = f"to-{how}"
    if how == "deadline":
        with pytest.raises(grpc.RpcError):
            slow.generate(req, timeout=0.5)
    else:
        call = slow.engine.Generate(req)
        next(call)  # the first token arrived: the request is in flight
        call.cancel()
    want = "DEADLINE_EXCEEDED" if how == "deadline" else "CANCELLED by the client"
    deadline = time.time() + 5
    while time.time() < deadline and want not in slow.log.getvalue():
        time.sleep(0.02)
    line = next(x for x in slow.log.getvalue().splitlines() if f"Generate to-{how}" in x)
    assert want in line, slow.log.getvalue()


def test_media_refs_over_the_item_limit_are_refused_before_decoding(make_stub, builtin_model):
    """Three undecodable video refs to a worker that takes two: the refusal
    names the limit, so nothing was decoded first."""
    engine, common = proto.engine_pb2, proto.common_pb2
    limited = make_stub(item_limits={"video": 2})
    junk = "data:video/mp4;base64," + base64.b64encode(b"not a video").decode()
    text = "<|im_start|>user\n" + "<|vision_start|><|video_pad|><|vision_end|>" * 3 + "<|im_end|>\n"
    req = engine.GenerateRequest(
        tokenized=engine.TokenizedInput(input_ids=builtin_model.tokenizer.encode(text)),
        media_refs=engine.MediaRefs(
            items=[engine.MediaRef(modality=common.VIDEO, url=junk) for _ in range(3)]
        ),
    )
    with pytest.raises(grpc.RpcError) as err:
        limited.generate(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "3 video item(s) in one request, this worker allows 2" in err.value.details()
