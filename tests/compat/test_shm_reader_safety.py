"""What the real worker's shm reader (``smg_grpc_servicer.mm_shm`` 0.14.1) does
with hostile handles, next to the stub's reader (SECURITY.md). The real
behaviours are asserted so that a fixed upstream release shows up here."""

from __future__ import annotations

import os
import threading
import uuid

import pytest
from smg_grpc_proto.generated import common_pb2
from smg_grpc_servicer import mm_shm

from mmctl.transport.shm import ShmReadError, read_handle, shm_dir

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a file as another uid")


@pytest.fixture
def shm_file():
    made = []

    def make(data: bytes, uid: int | None = None) -> str:
        name = f"mmctl-safety-{uuid.uuid4().hex}"
        path = shm_dir() / name
        path.write_bytes(data)
        path.chmod(0o600)
        if uid is not None:
            os.chown(path, uid, uid)
        made.append(path)
        return name

    yield make
    for path in made:
        path.unlink(missing_ok=True)


@ROOT_ONLY
def test_another_users_file_real_reader_serves_and_deletes_it_stub_refuses(shm_file):
    name = shm_file(b"secret" * 10, uid=65534)  # someone else's 0600 segment
    handle = common_pb2.ShmHandle(name=name, offset=0, nbytes=60)
    with pytest.raises(ShmReadError, match="owned by uid 65534"):
        read_handle(name, 0, 60, owners=frozenset({0}))
    assert (shm_dir() / name).exists()  # the stub neither read nor removed it
    assert mm_shm.tensor_payload_bytes_from_shm(handle) == b"secret" * 10
    assert not (shm_dir() / name).exists()  # the real reader served it, then deleted it


def test_a_short_read_real_reader_deletes_the_file_stub_keeps_it(shm_file):
    name = shm_file(b"x" * 10)
    with pytest.raises(ShmReadError, match="expected 100, got 10"):
        read_handle(name, 0, 100)
    assert (shm_dir() / name).exists()
    with pytest.raises(ValueError, match="expected 100, got 10"):
        mm_shm.tensor_payload_bytes_from_shm(common_pb2.ShmHandle(name=name, nbytes=100))
    assert not (shm_dir() / name).exists()  # refused, yet deleted


def test_a_fifo_real_reader_blocks_stub_refuses_at_once():
    name = f"mmctl-safety-fifo-{uuid.uuid4().hex}"
    path = shm_dir() / name
    os.mkfifo(path)
    try:
        with pytest.raises(ShmReadError, match="not a regular file"):
            read_handle(name, 0, 8)
        outcome: list[object] = []

        def real() -> None:
            try:
                outcome.append(
                    mm_shm.tensor_payload_bytes_from_shm(common_pb2.ShmHandle(name=name, nbytes=8))
                )
            except Exception as err:  # recorded for the assertion
                outcome.append(err)

        reader = threading.Thread(target=real, daemon=True)
        reader.start()
        reader.join(1.0)
        assert reader.is_alive() and outcome == []  # blocked in open(), a worker thread held
        with open(path, "wb"):  # a writer appears: open() returns, the reader refuses
            pass
        reader.join(5)
        assert not reader.is_alive() and "not a regular file" in str(outcome[0])
    finally:
        path.unlink(missing_ok=True)
