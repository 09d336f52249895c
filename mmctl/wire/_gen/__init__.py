"""Generated protobuf/gRPC code; reach it through :mod:`mmctl.wire.proto`."""
