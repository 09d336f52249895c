"""Mutated ``GenerateResponse`` streams against the client: every stream ends
in an answer or in an mmctl error (a documented exit code) — never another
exception, never a hang."""

from __future__ import annotations

import io

import grpc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import mmctl
from mmctl.errors import ExitCode, MmctlError
from mmctl.wire import proto

from .test_fuzz_stub_requests import COUNTS, mutated

GENERATE = f"/{proto.SERVICE_NAME}/Generate"


class Scripted(grpc.aio.ServerInterceptor):
    """Answers Generate with ``self.stream`` (raw message bytes), whatever was asked."""

    def __init__(self) -> None:
        self.stream: list[bytes] = []

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if details.method != GENERATE:
            return handler

        async def scripted(request, context):
            for message in list(self.stream):
                yield message

        return grpc.unary_stream_rpc_method_handler(
            scripted, request_deserializer=None, response_serializer=None
        )


@pytest.fixture(scope="module")
def scripted_worker(builtin_model):
    from mmctl.worker.handlers import StubConfig
    from mmctl.worker.server import start

    script = Scripted()
    running = start(StubConfig(model=builtin_model, log=io.StringIO()), interceptors=[script])
    yield running, script
    running.stop(grace=0)


class Sender:
    """A client and one built request (a short repr: hypothesis prints its arguments)."""

    def __init__(self, client: mmctl.Client, request) -> None:
        self.client, self.request = client, request

    def __repr__(self) -> str:
        return f"Sender({self.request.request_id})"


@pytest.fixture(scope="module")
def sender(scripted_worker, red_blue, tmp_path_factory):
    import os

    running, _ = scripted_worker
    os.environ.setdefault("MMCTL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    client = mmctl.Client(running.address, timeout=20)
    yield Sender(client, client.build(red_blue, "Which colours?").request)
    client.close()


engine = proto.engine_pb2
TOKEN_IDS = st.lists(
    st.one_of(st.integers(0, 151_700), st.sampled_from([2**31 - 1, 2**32 - 1])), max_size=6
)
COUNTS_ST = st.integers(0, 2**32 - 1)


def chunk() -> st.SearchStrategy:
    return st.builds(
        lambda ids, p, c: engine.GenerateResponse(
            chunk=engine.GenerateStreamChunk(token_ids=ids, prompt_tokens=p, completion_tokens=c)
        ),
        TOKEN_IDS,
        COUNTS_ST,
        COUNTS_ST,
    )


def complete() -> st.SearchStrategy:
    return st.builds(
        lambda ids, reason, p, c: engine.GenerateResponse(
            complete=engine.GenerateComplete(
                output_ids=ids, finish_reason=reason, prompt_tokens=p, completion_tokens=c
            )
        ),
        TOKEN_IDS,
        st.sampled_from(["stop", "length", "abort", "", "error", "x" * 30]),
        COUNTS_ST,
        COUNTS_ST,
    )


@st.composite
def streams(draw) -> list[bytes]:
    messages = draw(st.lists(st.one_of(chunk(), complete()), max_size=6))
    if draw(st.booleans()):
        messages.append(draw(complete()))  # most streams end as a worker ends them
    raw = [m.SerializeToString() for m in messages]
    if raw and draw(st.booleans()):  # then damage one message's bytes
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] = draw(mutated(raw[at])) if raw[at] else draw(st.binary(max_size=16))
    if draw(st.integers(0, 9)) == 0:
        raw.append(draw(st.binary(max_size=64)))  # a message that is pure noise
    return raw


def stream_reason(stream: list[bytes]) -> str:
    """The finish_reason of the stream's last completion, as the client reads it."""
    reason = ""
    for raw in stream:
        msg = engine.GenerateResponse.FromString(raw)
        if msg.HasField("complete"):
            reason = msg.complete.finish_reason
    return reason


@given(stream=streams())
# Found by this test: tokens 126 then 94 are U+00A1's two bytes; the first
# alone decodes as U+FFFD, which was shown, and the answer read "¡".
@example(stream=[b"\n\x03\n\x01~", b"\n\x03\n\x01^", b"\x12\x06\x12\x04stop", b""])
def test_mutated_response_streams(scripted_worker, sender, stream):
    _, script = scripted_worker
    script.stream = stream
    shown: list[str] = []
    try:
        result = sender.client.send_request(sender.request, on_text=shown.append)
    except MmctlError as err:
        # A malformed, aborted or cut stream is an incomplete answer (9).
        assert err.exit_code == ExitCode.INCOMPLETE, (err.exit_code, err)
        outcome = f"client:exit {int(err.exit_code)}"
    else:
        # An "abort" completion is returned as such (the CLI then exits 9, tested there).
        assert result.finish_reason == stream_reason(stream)
        assert "".join(shown) == result.answer  # what was shown is what was answered
        outcome = f"client:answered {result.finish_reason or '(none)'}"
    COUNTS[outcome] = COUNTS.get(outcome, 0) + 1
