"""Everything about the wire: generated protos, tensors, request assembly."""
