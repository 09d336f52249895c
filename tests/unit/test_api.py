"""The public API: lazy, complete, and the docs' first example runs as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import mmctl

ROOT = Path(__file__).resolve().parents[2]


def test_all_lists_exactly_the_exports():
    assert set(mmctl.__all__) == {"__version__", *mmctl._EXPORTS}
    for name in mmctl._EXPORTS:
        assert getattr(mmctl, name) is not None


def test_import_mmctl_loads_nothing_heavy():
    code = "import json, sys, mmctl; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = json.loads(done.stdout)
    heavy = ("grpc", "numpy", "av", "PIL", "tokenizers", "transformers", "google.protobuf")
    assert [m for m in loaded if m.split(".")[0] in heavy or m.startswith("google.protobuf")] == []


def test_preprocess_is_the_function_not_the_package():
    import mmctl.preprocessing.resize

    assert callable(mmctl.preprocess) and mmctl.preprocess.__module__ == "mmctl.offline"


def test_cli_modules_import_no_grpc_or_numpy_at_module_level():
    import ast

    for path in sorted((ROOT / "mmctl" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: commands import inside their bodies
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] not in ("grpc", "numpy"), f"{path.name}: {name}"
                assert not name.startswith(("mmctl.client", "mmctl.wire")), f"{path.name}: {name}"


def _docs_example() -> str:
    text = (ROOT / "docs" / "python-api.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_docs_python_example_prints_what_its_comments_say(stub, red_blue, tmp_path):
    code = _docs_example()
    code = code.replace("localhost:50051", stub.running.address).replace(
        '"clip.mp4"', repr(str(red_blue))
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "MMCTL_CACHE_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["red, blue", "True False", "True"]
