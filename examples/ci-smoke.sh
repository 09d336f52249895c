#!/usr/bin/env bash
# CI smoke test: a stub worker on a free port, the mmctl commands a pipeline
# would run, assertions on their --json output. Always stops the worker; fails
# if /dev/shm holds mmctl files from this run.
#
#   bash examples/ci-smoke.sh            # uses `mmctl` from PATH (or $MMCTL)
set -euo pipefail

MMCTL=${MMCTL:-mmctl}
PY=${PYTHON:-python3}
work=$(mktemp -d)
export MMCTL_CACHE_DIR="$work/cache"
stub_pid=""

shm_files() { ls /dev/shm 2>/dev/null | grep -E '^mmctl-[0-9]+-' | sort || true; }
before=$(shm_files)

cleanup() {
  status=$?
  if [ -n "$stub_pid" ] && kill -0 "$stub_pid" 2>/dev/null; then
    kill -TERM "$stub_pid" 2>/dev/null || true
    wait "$stub_pid" 2>/dev/null || true
  fi
  leaked=$(comm -13 <(echo "$before") <(shm_files) | grep . || true)
  rm -rf "$work"
  if [ -n "$leaked" ]; then
    echo "FAIL: files left in /dev/shm: $leaked" >&2
    exit 1
  fi
  exit "$status"
}
trap cleanup EXIT

# jq-free assertions: json_get FILE EXPR (a Python expression over `d`)
json_get() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
check() { # check DESCRIPTION ACTUAL EXPECTED
  if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', want '$3'" >&2; exit 1; fi
  echo "ok: $1"
}

"$PY" "$(dirname "$0")/make-red-blue.py" "$work/red-blue.mp4" >/dev/null

"$MMCTL" stub-worker --port 0 --json >"$work/ready.json" 2>"$work/stub.log" &
stub_pid=$!
for _ in $(seq 100); do [ -s "$work/ready.json" ] && break; sleep 0.1; done
[ -s "$work/ready.json" ] || { echo "FAIL: stub worker did not start" >&2; cat "$work/stub.log" >&2; exit 1; }
target=$(json_get "$work/ready.json" 'd["address"]')
echo "stub worker at $target"

"$MMCTL" health --target "$target" --json >"$work/health.json"
check "health" "$(json_get "$work/health.json" 'd["healthy"]')" "True"

"$MMCTL" info --target "$target" --json >"$work/info.json"
check "info: /dev/shm shared" "$(json_get "$work/info.json" 'd["shm"]["shared"]')" "True"
check "info: modality field" "$(json_get "$work/info.json" 'd["capabilities"]["modality_field"]')" "True"

"$MMCTL" preprocess "$work/red-blue.mp4" --json >"$work/pre.json"
check "preprocess grid" "$(json_get "$work/pre.json" 'd["grid_thw"]')" "[4, 6, 8]"

"$MMCTL" inspect-tokens "$work/red-blue.mp4" -p "Which colours?" --json >"$work/tokens.json"
check "mrope walk" "$(json_get "$work/tokens.json" 'd["check"]["ok"]')" "True"

"$MMCTL" build "$work/red-blue.mp4" -p "Which colours appear, in order?" -o "$work/offline.pb" --json >"$work/offline.json"
check "build modality" "$(json_get "$work/offline.json" 'd["request"]["batches"][0]["modality"]')" "VIDEO"
check "build: a default worker's pixels" "$(json_get "$work/offline.json" 'd["decisions"]["pixel_dtype"]["value"]')" "uint8"

"$MMCTL" build "$work/red-blue.mp4" -p "Which colours appear, in order?" -o "$work/req.pb" \
  --target "$target" --json >"$work/build.json"
check "build --target: the worker's pixels" "$(json_get "$work/build.json" 'd["decisions"]["pixel_dtype"]["value"]')" "uint8"

for transport in inline shm auto; do
  "$MMCTL" send "$work/red-blue.mp4" -p "Which colours appear, in order?" \
    --target "$target" --transport "$transport" --json >"$work/send-$transport.json"
  check "send --transport $transport" "$(json_get "$work/send-$transport.json" 'd["answer"]')" "red, blue"
done
check "auto chose shm" "$(json_get "$work/send-auto.json" 'd["decisions"]["transport"]["value"]')" "shm"

"$MMCTL" send --request "$work/req.pb" --target "$target" --shm --json >"$work/replay.json"
check "replay" "$(json_get "$work/replay.json" 'd["answer"]')" "red, blue"

# The default stub is a default `vllm serve --grpc`: an offline build replays on it.
"$MMCTL" send --request "$work/offline.pb" --target "$target" --json >"$work/replay-offline.json"
check "offline build replayed" "$(json_get "$work/replay-offline.json" 'd["answer"]')" "red, blue"

# stdout is the answer alone; a reader that stops early is no error.
answer=$("$MMCTL" send "$work/red-blue.mp4" -p "Which colours appear, in order?" --target "$target" 2>/dev/null)
check "\$(mmctl send) is the answer" "$answer" "red, blue"
"$MMCTL" send "$work/red-blue.mp4" --target "$target" --json 2>"$work/head.err" | head -c 10 >/dev/null
check "send --json | head -c 10: stderr" "$(cat "$work/head.err")" ""

"$MMCTL" bench --target "$target" --video "$work/red-blue.mp4" --num-prompts 8 --no-floors \
  --save-result "$work/bench-result.json" --json >"$work/bench.json"
check "bench: every request answered" "$(json_get "$work/bench.json" 'd["runs"][0]["completed"]')" "8"
check "bench: both arms" "$(json_get "$work/bench.json" 'sorted(d["runs"][0]["arms"])')" "['inline/uint8', 'shm/uint8']"
check "bench: vLLM's result fields" "$(json_get "$work/bench-result.json" '"median_ttft_ms" in d and "p99_e2el_ms" in d')" "True"

set +e
"$MMCTL" send "$work/red-blue.mp4" --target 127.0.0.1:1 --timeout 3 >/dev/null 2>"$work/down.err"
code=$?
set -e
check "unreachable worker exit code" "$code" "5"

set +e
"$MMCTL" health --target 127.0.0.1:1 --timeout 2 --json >"$work/down.json" 2>/dev/null
code=$?
set -e
check "health --json on a dead worker: exit code" "$code" "5"
check "health --json on a dead worker: document" "$(json_get "$work/down.json" 'd["healthy"]')" "False"

set +e
"$MMCTL" send "$work/red-blue.mp4" --top-p 5 --target 127.0.0.1:1 2>"$work/usage.err"
code=$?
set -e
check "bad value: exit code" "$code" "2"
check "bad value: one line" "$(head -n1 "$work/usage.err")" "Error: top-p must be in (0, 1], got 5.0"

echo "smoke: all checks passed"
