"""The stub worker: a strict VllmEngine gRPC server for GPU-less tests and CI."""
