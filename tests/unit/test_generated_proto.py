"""The committed generated code matches proto/*.proto (regenerated here)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"run `python scripts/gen_proto.py`:\n{done.stderr}"


def test_generated_code_uses_the_private_pool():
    # Loading mmctl next to smg_grpc_proto must not clash in the default pool.
    from google.protobuf import descriptor_pool

    from mmctl.wire import proto

    pool = proto.descriptor_pool()
    assert pool is not descriptor_pool.Default()
    assert proto.engine_pb2.GenerateRequest.DESCRIPTOR.file.pool is pool
    assert pool.FindMessageTypeByName("vllm.grpc.engine.MultimodalInputs")
