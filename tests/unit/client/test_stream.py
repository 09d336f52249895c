"""One rule for a Generate stream's token ids, as smg-grpc-servicer sends them."""

from __future__ import annotations

from mmctl.client.stream import TokenStream
from mmctl.wire import proto


def _chunk(*ids: int):
    return proto.engine_pb2.GenerateResponse(
        chunk=proto.engine_pb2.GenerateStreamChunk(token_ids=ids)
    )


def _complete(*ids: int):
    return proto.engine_pb2.GenerateResponse(
        complete=proto.engine_pb2.GenerateComplete(output_ids=ids, finish_reason="stop")
    )


def test_streaming_takes_the_chunks_not_the_repeated_last_delta():
    # The servicer's DELTA mode: the completion repeats the last step's tokens.
    received = TokenStream(stream=True)
    for resp in (_chunk(1, 2), _chunk(3), _complete(3)):
        received.feed(resp)
    assert received.ids == [1, 2, 3]
    assert received.complete.finish_reason == "stop"


def test_non_streaming_takes_the_completion():
    received = TokenStream(stream=False)
    assert received.feed(_complete(4, 5, 6)) == "complete"
    assert received.ids == [4, 5, 6]


def test_a_newer_response_kind_is_skipped():
    received = TokenStream(stream=True)
    assert received.feed(proto.engine_pb2.GenerateResponse()) is None
    assert received.ids == [] and received.complete is None
