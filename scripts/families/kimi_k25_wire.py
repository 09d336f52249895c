"""Can a request smg-grpc-servicer 0.14.1 carries reach vLLM's Kimi-K2.5 encoder exactly?

Engine-free, in a Python with vLLM and the servicer (the engine environment):

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/kimi_k25_wire.py

vLLM models Kimi-K2.5 as one ``vision_chunk`` modality; the servicer names every
preprocessed batch ``image`` or ``video`` (``mm_keys.modality_name``). This script runs,
for two committed images and both pixel forms (vLLM's default, device normalization on:
uint8; and off: float32):

1. vLLM's own processor (``MULTIMODAL_REGISTRY.create_processor``: Kimi's fused CPU
   processor) on them as ``vision_chunk`` items, as the chat path hands image parts over;
2. the same images as ``image`` items, as a ``media_refs`` IMAGE item reaches it;
3. its tensors as one IMAGE ``MultimodalInputs`` batch (``pixel_values`` flat by a
   ``patches_per_image`` tensor, ``grid_thws`` batched and kept on the CPU) through the
   servicer's own ``_build_preprocessed_mm_inputs``;
4. both item lists through vLLM's batching (``group_and_batch_mm_kwargs``) and the model's
   own input parser (``KimiK25ForConditionalGeneration._parse_and_validate_media_input``),
   and compares what the vision tower would receive.

The model folder is a stand-in (no Kimi tokenizer ships in any package here): the
Kimi_K25Config defaults, the published ``media_proc_cfg``, and the OneVision folder's
byte-level BPE with Kimi's media tokens added at their ids. Only ``<|media_pad|>``'s id
and the image processor matter to what is compared. Exit 1 if the encoder inputs differ.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MEDIA = ROOT / "tests" / "fixtures" / "media"
MEDIA_PAD = 163605  # config.json media_placeholder_token_id / Kimi_K25Config.image_token_id
SPECIALS = {
    "[BOS]": 163584,
    "[EOS]": 163585,
    "<|im_end|>": 163586,
    "<|im_user|>": 163587,
    "<|im_assistant|>": 163588,
    "<|im_middle|>": 163601,
    "<|media_begin|>": 163602,
    "<|media_content|>": 163603,
    "<|media_end|>": 163604,
    "<|media_pad|>": MEDIA_PAD,
}
# moonshotai/Kimi-K2.5 preprocessor_config.json media_proc_cfg (the values smg's
# vision/processors/kimi_k25.rs defaults to).
MEDIA_PROC_CFG = {
    "in_patch_limit": 16384,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2,
    "fixed_output_tokens": None,
    "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
    "sample_fps": 2.0,
    "max_num_frames_each_video": None,
    "temporal_merge_kernel_size": 4,
    "timestamp_mode": "hh:mm:ss.fff",
}


def write_folder(folder: Path) -> None:
    config = {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "text_config": {"model_type": "deepseek_v3", "vocab_size": 163840},
        "vision_config": {},
        "media_placeholder_token_id": MEDIA_PAD,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "preprocessor_config.json").write_text(json.dumps({"media_proc_cfg": MEDIA_PROC_CFG}))
    source = ROOT / "tests" / "fixtures" / "families" / "llava_onevision" / "tokenizer.json"
    tok = json.loads(source.read_text(encoding="utf-8"))
    tok["added_tokens"] = [
        {
            "id": i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for c, i in SPECIALS.items()
    ]
    for content, token_id in SPECIALS.items():  # else tokenizers renumbers them
        tok["model"]["vocab"][content] = token_id
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "[BOS]"}
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "eos_token": "[EOS]"}))


def tensor_data(tensor):
    from smg_grpc_proto import vllm_engine_pb2

    array = np.ascontiguousarray(tensor.numpy())
    return vllm_engine_pb2.TensorData(
        shape=list(array.shape), dtype=str(array.dtype), inline=array.tobytes()
    )


def run(folder: Path, device_normalize: bool | None) -> bool:
    import torch
    from smg_grpc_proto import vllm_engine_pb2
    from smg_grpc_proto.generated import common_pb2
    from smg_grpc_servicer.vllm.servicer import VllmEngineServicer
    from vllm.config import ModelConfig
    from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.media import ImageMediaIO
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs
    from vllm.multimodal.utils import group_and_batch_mm_kwargs

    config = ModelConfig(
        model=str(folder),
        tokenizer=str(folder),
        dtype="float32",
        seed=0,
        mm_device_do_normalize=device_normalize,
    )
    print(f"--- mm_device_do_normalize = {config.multimodal_config.mm_device_do_normalize}")
    proc = MULTIMODAL_REGISTRY.create_processor(config)
    limits = dict(proc.info.supported_mm_limits)
    print(f"supported modalities {limits}; {type(proc.info.image_processor).__name__}")
    images = [
        ImageMediaIO().load_bytes((MEDIA / name).read_bytes()).media
        for name in ("rgb_odd.png", "large.png")
    ]
    media = [SPECIALS["<|media_begin|>"], 9, SPECIALS["<|media_content|>"], MEDIA_PAD]
    media.append(SPECIALS["<|media_end|>"])
    user = [SPECIALS["<|im_user|>"], 10, SPECIALS["<|im_middle|>"]]
    prompt = [*user, *media, *media, 11, SPECIALS["<|im_end|>"], SPECIALS["<|im_assistant|>"]]

    chunks = [{"type": "image", "image": image, "uuid": None} for image in images]
    items = proc.info.parse_mm_data({"vision_chunk": chunks})
    own = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
    ranges = own["mm_placeholders"]["vision_chunk"]
    own_items = own["mm_kwargs"]["vision_chunk"]
    print(
        f"1. vLLM's own: {len(own['prompt_token_ids'])} ids, ranges "
        f"{[(r.offset, r.length, r.is_embed) for r in ranges]}, items "
        f"{[sorted(i.keys()) for i in own_items]}, pixel_values "
        f"{[tuple(i['pixel_values'].data.shape) for i in own_items]} "
        f"{own_items[0]['pixel_values'].data.dtype}, grid_thws "
        f"{[i['grid_thws'].data.tolist() for i in own_items]}"
    )
    try:
        wrong = proc.info.parse_mm_data({"image": images})
        proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=wrong), TimingContext())
        print("2. as 'image' items: accepted")
    except Exception as err:  # the answer is the error
        print(f"2. as 'image' items: {type(err).__name__}: {err}")

    pixels = torch.cat([i["pixel_values"].data for i in own_items])
    grids = torch.stack([i["grid_thws"].data for i in own_items])
    batch = vllm_engine_pb2.MultimodalInputs(
        pixel_values=tensor_data(pixels),
        model_specific_tensors={
            "grid_thws": tensor_data(grids),
            "patches_per_image": tensor_data(grids.prod(-1)),
        },
        mm_placeholders=[
            vllm_engine_pb2.PlaceholderRange(offset=r.offset, length=r.length) for r in ranges
        ],
        mm_hashes=["a" * 64, "b" * 64],
        batched_keys=["grid_thws", "patches_per_image"],
        flat_keys={"pixel_values": "patches_per_image"},
        keep_on_cpu_keys=["grid_thws"],
        modality=common_pb2.IMAGE,
    )
    tokenized = vllm_engine_pb2.TokenizedInput(input_ids=list(own["prompt_token_ids"]))
    engine = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=torch.float32))
    wire = VllmEngineServicer._build_preprocessed_mm_inputs(
        types.SimpleNamespace(engine=engine), tokenized, [batch]
    )
    wire_items = wire["mm_kwargs"]["image"]
    same_items = all(
        a["pixel_values"].data.dtype == b["pixel_values"].data.dtype
        and torch.equal(a["pixel_values"].data, b["pixel_values"].data)
        and torch.equal(a["grid_thws"].data, b["grid_thws"].data)
        for a, b in zip(own_items, wire_items, strict=True)
    )
    same_ranges = [(r.offset, r.length) for r in wire["mm_placeholders"]["image"]] == [
        (r.offset, r.length) for r in ranges
    ]
    print(
        f"3. servicer: modalities {list(wire['mm_kwargs'])}, items "
        f"{[sorted(i.keys()) for i in wire_items]}; per-item tensors equal {same_items}; "
        f"ids equal {wire['prompt_token_ids'] == own['prompt_token_ids']}; "
        f"ranges equal {same_ranges}"
    )
    seen = {}
    for label, modality, listed in (
        ("own", "vision_chunk", own_items),
        ("wire", "image", wire_items),
    ):
        ((group, count, kwargs),) = group_and_batch_mm_kwargs(
            [(modality, item) for item in listed], device="cpu"
        )
        parsed = KimiK25ForConditionalGeneration._parse_and_validate_media_input(
            None, **dict(kwargs)
        )
        seen[label] = parsed
        print(
            f"4. {label}: group {group} x{count}, kwargs {sorted(kwargs)} -> pixel_values "
            f"{tuple(parsed['pixel_values'].shape)} {parsed['pixel_values'].dtype}, "
            f"grid_thws {parsed['grid_thws'].tolist()}"
        )
    equal = torch.equal(seen["own"]["pixel_values"], seen["wire"]["pixel_values"]) and torch.equal(
        seen["own"]["grid_thws"], seen["wire"]["grid_thws"]
    )
    print(f"encoder inputs bit-equal: {equal}")
    return equal and same_items and same_ranges


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_folder(folder)
        results = [run(folder, mode) for mode in (None, False)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
