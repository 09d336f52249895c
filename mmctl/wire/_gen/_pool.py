"""mmctl's private protobuf descriptor pool.

The generated modules register here instead of protobuf's default pool, so
importing mmctl next to `smg_grpc_proto` (which defines the same
`smg.grpc.common` / `vllm.grpc.engine` names) cannot clash.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
