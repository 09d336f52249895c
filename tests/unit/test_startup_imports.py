"""`import mmctl.cli.app` must not pay for the heavy libraries."""

import json
import subprocess
import sys

HEAVY = (
    "av",
    "grpc",
    "numpy",
    "transformers",
    "tokenizers",
    "PIL",
    "google.protobuf",
    "mmctl.wire._gen",
)


def test_cli_import_loads_no_heavy_module():
    code = "import json, sys, mmctl.cli.app; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    offenders = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert offenders == []
    assert "typer" in loaded  # the probe really imported the app
