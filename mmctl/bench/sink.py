"""A bare gRPC server for the transfer floor: one unary method that takes bytes and returns none.

    python -m mmctl.bench.sink     # prints its port, serves until killed

No protobuf, no checks: what grpcio itself costs to carry a payload over
the connection, in a process of its own as a worker is.
"""

from __future__ import annotations

import sys
from concurrent import futures

METHOD = "/mmctl.bench.Sink/Put"


def _put(request: bytes, context: object) -> bytes:
    return b""


def main() -> None:
    import grpc

    from mmctl.wire.proto import UNLIMITED

    handler = grpc.method_handlers_generic_handler(
        "mmctl.bench.Sink", {"Put": grpc.unary_unary_rpc_method_handler(_put)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=UNLIMITED)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes our stdin (or dies)
    server.stop(0)


if __name__ == "__main__":
    main()
