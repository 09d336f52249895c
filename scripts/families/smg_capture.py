"""Capture what the smg gateway (PyPI ``smg`` 1.13.0) sends a worker for the family goldens.

    .venv/bin/python scripts/families/smg_capture.py [--out DIR] [FAMILY ...]

For each family folder under tests/fixtures/families/ it starts a capture
worker on 127.0.0.1 (mmctl's stub servicer, whose Generate only writes the
arriving ``GenerateRequest`` and refuses it: no family check runs), launches
``smg launch --mm-processing router`` with the folder as ``--model-path`` in
front of it, sends one chat per golden case (the same committed media as data
URLs, the same prompt) and compares the recorded request with the golden:
prompt ids, placeholders and every tensor's bytes (float32 view). Prints one
line per case. Needs ``smg`` beside this Python (dev extra), ffmpeg/ffprobe and
libturbojpeg, like tests/compat/test_smg_gateway.py. Writes only under --out.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "tests" / "fixtures" / "families"
MEDIA = ROOT / "tests" / "fixtures" / "media"
PROMPT = "Describe what you see."
PUBLISHED_ID = {
    "llava": "llava-hf/llava-1.5-7b-hf",
    "llava_next": "llava-hf/llava-v1.6-mistral-7b-hf",
    "llama4": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llava_onevision": "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    "gemma4": "google/gemma-4-31B-it",
    "internvl": "OpenGVLab/InternVL3-1B-hf",
    "minimax_m3_vl": "MiniMaxAI/MiniMax-M3",
}
LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MIME = {
    ".png": ("image", "image/png"),
    ".jpg": ("image", "image/jpeg"),
    ".mp4": ("video", "video/mp4"),
    ".gif": ("video", "image/gif"),
    ".webm": ("video", "video/webm"),
    ".mov": ("video", "video/quicktime"),
    ".mkv": ("video", "video/x-matroska"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def capture_worker(out: Path, folder: Path):
    """The stub's servicer with a Generate that records and refuses, and a GetTokenizer
    that streams ``folder`` (smg 1.13.0 tokenizes with the worker's bundle, not
    ``--model-path``'s files) and a GetModelInfo with the folder's model_type."""
    from mmctl.checkpoint.source import build_bundle, from_dir
    from mmctl.models.model import load_model
    from mmctl.worker import checks, handlers, server

    class Capture(server.StubServicer):
        def __init__(self, cfg):  # type: ignore[no-untyped-def]
            super().__init__(cfg)
            self._bundle = build_bundle(from_dir(folder))

        async def GetServerInfo(self, request, context):  # type: ignore[no-untyped-def]
            # A float32 model: the gateway then sends float32 pixels, compared bit for bit.
            info = await super().GetServerInfo(request, context)
            info.model_dtype = info.multimodal_encoder_dtype = "float32"
            info.mm_device_do_normalize = False
            return info

        async def GetModelInfo(self, request, context):  # type: ignore[no-untyped-def]
            # The family's own config: the gateway picks its processor by model_type.
            info = await super().GetModelInfo(request, context)
            config = json.loads((folder / "config.json").read_text())
            info.model_type = config["model_type"]
            del info.architectures[:]
            info.architectures.extend(config["architectures"])
            # smg 1.13.0 picks its vision processor by a substring of this name
            # ("llava-1.5", "llava-v1.6", ...), not by model_type: use the published id.
            info.served_model_name = PUBLISHED_ID[config["model_type"]]
            info.model_path = info.tokenizer_path = str(folder)
            return info

        def _answer(self, incoming):  # type: ignore[no-untyped-def]
            request = incoming.request
            if incoming.pixels is not None:  # put the spliced-out payload back
                request.mm_inputs.pixel_values.inline = bytes(incoming.pixels)
            n = len(list(out.glob("*.pb")))
            (out / f"{n:03d}.pb").write_bytes(request.SerializeToString())
            raise checks.Rejected("captured")

    original = server.StubServicer
    server.StubServicer = Capture  # start() builds the servicer by this name
    try:
        return server.start(handlers.StubConfig(model=load_model(model_dir=None)), port=0)
    finally:
        server.StubServicer = original


def served_model(http: str) -> str:
    """The model name the worker reported (the gateway routes by it)."""
    with LOCAL.open(f"{http}/v1/models", timeout=10) as resp:
        return str(json.loads(resp.read())["data"][0]["id"])


def chat(http: str, media: list[str], model: str) -> str:
    """Send one chat; the gateway's error text ("" when it answered)."""
    content: list[dict] = []
    for name in media:
        kind, mime = MIME[Path(name).suffix]
        data = base64.b64encode((MEDIA / name).read_bytes()).decode()
        content.append(
            {"type": f"{kind}_url", f"{kind}_url": {"url": f"data:{mime};base64,{data}"}}
        )
    content.append({"type": "text", "text": PROMPT})
    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    req = urllib.request.Request(
        f"{http}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with LOCAL.open(req, timeout=60) as resp:
            resp.read()
    except urllib.error.HTTPError as err:  # the capture worker refuses every request
        return f"{err.code} {err.read()[:300]!r}"
    return ""


def _tensor(td) -> np.ndarray:
    dtype = {"float32": np.float32, "int64": np.int64, "uint8": np.uint8, "int32": np.int32}
    if td.dtype in dtype:
        return np.frombuffer(td.inline, dtype=dtype[td.dtype]).reshape(tuple(td.shape))
    if td.dtype == "bfloat16":
        raw = np.frombuffer(td.inline, dtype=np.uint16).astype(np.uint32) << 16
        return raw.view(np.float32).reshape(tuple(td.shape))
    if td.dtype == "float16":
        return np.frombuffer(td.inline, dtype=np.float16).astype(np.float32).reshape(td.shape)
    raise ValueError(td.dtype)


def compare(path: Path, golden: np.lib.npyio.NpzFile) -> list[str]:
    from mmctl.wire import proto

    req = proto.engine_pb2.GenerateRequest.FromString(path.read_bytes())
    notes = []
    ids = list(req.tokenized.input_ids)
    want_ids = golden["vllm_input_ids"].tolist()  # vLLM's expansion (HF's but for InternVL video)
    if ids != want_ids:
        notes.append(f"ids differ ({len(ids)} vs {len(want_ids)})")
    mms = [req.mm_inputs] if req.HasField("mm_inputs") else []
    mms += list(req.extra_mm_inputs)
    for n, mm in enumerate(mms):
        field = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        tensors = {"pixel_values": mm.pixel_values, **dict(mm.model_specific_tensors)}
        layout = f"batched={list(mm.batched_keys)} flat={dict(mm.flat_keys)} cpu={list(mm.keep_on_cpu_keys)}"
        im = mm.im_token_id if mm.HasField("im_token_id") else None
        holders = [(p.offset, p.length) for p in mm.mm_placeholders]
        notes.append(f"{field}: im_token_id={im} {layout} placeholders={holders[:3]}")
        video = mm.modality == 3  # smg.grpc.common.Modality.VIDEO
        for key, td in tensors.items():
            if not td.shape:
                continue
            array = _tensor(td)
            gkey = "pixel_values_videos" if (key == "pixel_values" and video) else key
            want = f"{gkey}_sha256"
            got32 = np.ascontiguousarray(
                array.astype(np.float32 if array.dtype.kind == "f" else np.int64)
            )
            if gkey in golden.files:
                same = np.array_equal(got32, golden[gkey])
            elif want in golden.files:
                same = hashlib.sha256(got32.tobytes()).hexdigest() == str(golden[want])
            else:
                notes.append(f"  {key} {td.dtype}{list(td.shape)}: not in the golden")
                continue
            gshape = golden[f"{gkey}_shape"].tolist() if f"{gkey}_shape" in golden.files else None
            how = "EQUAL" if same else "differs" + _how_far(got32, golden, gkey)
            if not same and str(golden.get(f"{gkey}_source_dtype", "")) == "torch.bfloat16":
                # HF's Llama 4 processor returns bfloat16: round the gateway's float32 alike.
                how += "; as bfloat16:" + _how_far(_to_bf16(got32), golden, gkey)
            notes.append(f"  {key} {td.dtype}{list(td.shape)} golden {gshape}: {how}")
    return notes


def _to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 (round to nearest even) -> float32, as torch casts."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def _how_far(got: np.ndarray, golden, key: str) -> str:
    """Max |difference| over the golden's entries (all, or its fixed sample)."""
    if f"{key}_full" in golden.files:
        want = golden[f"{key}_full"]
        if want.shape != got.shape:
            return f" (shape {list(got.shape)} vs {list(want.shape)})"
        diff = np.abs(got.astype(np.float64) - want)
    elif f"{key}_sample_pos" in golden.files:
        flat = got.reshape(-1)
        pos = golden[f"{key}_sample_pos"]
        if flat.size <= int(pos.max()):
            return f" (shape {list(got.shape)})"
        diff = np.abs(flat[pos].astype(np.float64) - golden[f"{key}_sample_val"])
    else:
        return ""
    return f" (max |d| {diff.max():.3g}, {np.mean(diff > 0):.1%} of entries compared differ)"


def run_family(family: str, out: Path, smg: Path) -> None:
    folder = FAMILIES / family
    record = out / family
    record.mkdir(parents=True, exist_ok=True)
    worker = capture_worker(record, folder)
    port, metrics = _free_port(), _free_port()
    log = out / f"{family}-smg.log"
    argv = [
        str(smg), "launch", "--host", "127.0.0.1", "--port", str(port),
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics),
        "--worker-urls", f"grpc://{worker.address}", "--model-path", str(folder),
        "--chat-template", str(folder / "chat_template.jinja"),
        "--mm-processing", "router", "--multimodal-tensor-transport", "inline",
        "--log-level", "warn", "--shutdown-grace-period-secs", "1",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        http = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                print(f"{family}: smg exited {proc.returncode}: {log.read_text()[-800:]}")
                return
            try:
                with LOCAL.open(f"{http}/readiness", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        model = served_model(http)
        for golden_path in sorted((FAMILIES / "goldens").glob(f"{family}-*.npz")):
            golden = np.load(golden_path)
            before = set(record.glob("*.pb"))
            said = chat(http, [str(m) for m in golden["media"].tolist()], model)
            new = sorted(set(record.glob("*.pb")) - before)
            if not new:
                print(f"{golden_path.name}: no request reached the worker: {said}")
                continue
            print(f"{golden_path.name}:")
            for line in compare(new[-1], golden):
                print(f"  {line}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        worker.stop(grace=0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=["llava", "llava_next", "llama4"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/smg-capture"))
    args = parser.parse_args()
    smg = Path(sys.executable).with_name("smg")
    if not smg.is_file():
        sys.exit("smg is not installed beside this Python (pip install smg==1.13.0)")
    for family in args.families:
        run_family(family, args.out, smg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
