"""Protobuf requests: tensors, content hashes, GenerateRequest assembly and views."""
