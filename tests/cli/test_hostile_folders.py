"""A hostile model folder, as a person or a script meets it: ``build``,
``stub-worker`` and ``send`` with such a folder (or a worker's bundle of it)
answer with one ``Error:`` line and exit 3, in seconds, within 1.5 GB.

One value of each class (zero, negative, huge, wrong type, non-finite, outside
the vocabulary) per command; ``tests/unit/models/test_hostile_folders.py``
has every family and value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "models"))

from test_hostile_folders import folder_with

MEDIA = Path(__file__).resolve().parents[1] / "fixtures" / "media"
#: The issue's bound for a refusal: seconds, and bytes of address space.
SECONDS = 10
MEMORY = 1536 * 2**20

#: One case of each class (folder, file, key, value).
CLASSES = {
    "zero": ("llava_next", "preprocessor_config.json", "image_grid_pinpoints", [[0, 0]]),
    "negative": ("llava", "config.json", "vision_config.image_size", -336),
    "huge": ("llama4", "preprocessor_config.json", "max_patches", 10**9),
    "huge-pinpoint": (
        "llava_next",
        "preprocessor_config.json",
        "image_grid_pinpoints",
        [[336000000, 336000000]],
    ),
    "wrong type": ("llava", "preprocessor_config.json", "crop_size", 1e9),
    "non-finite": ("llava", "preprocessor_config.json", "image_std", [0, 0, 0]),
    "out of vocabulary": ("llama4", "config.json", "image_token_index", 2**40),
}


#: The bound set by the child itself before mmctl loads: a preexec_fn would run
#: Python in the forked copy of this test process, where a collected gRPC object
#: of an earlier test calls into gRPC's forked state and aborts (SIGABRT, seen in CI).
LIMITED = (
    "import resource, runpy, sys;"
    f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY}, {MEMORY}));"
    "sys.argv[0] = 'mmctl';"
    "runpy.run_module('mmctl', run_name='__main__', alter_sys=True)"
)


def mmctl(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMCTL_")}
    env["MMCTL_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        [sys.executable, "-c", LIMITED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=SECONDS + 20,  # the process's own start; the refusal is timed below
    )


def _refused(done: subprocess.CompletedProcess) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_build_refuses_in_one_line(kind: str, tmp_path: Path) -> None:
    folder = folder_with(*CLASSES[kind], tmp_path)
    _refused(
        mmctl(
            ["build", str(MEDIA / "rgb_odd.png"), "--model-dir", str(folder), "-o", "x.pb"],
            tmp_path,
        )
    )
    assert not (tmp_path / "x.pb").exists()


@pytest.mark.parametrize("kind", ["zero", "huge", "out of vocabulary"])
def test_stub_worker_refuses_to_start(kind: str, tmp_path: Path) -> None:
    folder = folder_with(*CLASSES[kind], tmp_path)
    _refused(mmctl(["stub-worker", "--model-dir", str(folder), "--port", "0"], tmp_path))


def test_send_refuses_a_hostile_bundle_before_the_network(tmp_path: Path) -> None:
    """A worker's ``GetTokenizer`` bundle is read by the same resolver: a saved
    bundle (``--bundle``) of a hostile folder is refused before any connection."""
    from mmctl.checkpoint.source import build_bundle, from_dir

    folder = folder_with(*CLASSES["non-finite"], tmp_path)
    data, _ = build_bundle(from_dir(folder))
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(data)
    args = ["send", str(MEDIA / "rgb_odd.png"), "--bundle", str(bundle)]
    _refused(mmctl([*args, "--target", "127.0.0.1:9"], tmp_path))


def test_an_unknown_key_is_a_warning_on_stderr(tmp_path: Path) -> None:
    """A key no setting mirrors is named once on stderr; the build goes on."""
    folder = folder_with("llava", "preprocessor_config.json", "do_sharpen", True, tmp_path)
    out = tmp_path / "x.pb"
    args = ["build", str(MEDIA / "rgb_odd.png"), "--model-dir", str(folder), "-o", str(out)]
    done = mmctl(args, tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("Warning: ")]
    assert len(warnings) == 1 and "'do_sharpen'" in warnings[0], done.stderr
    assert out.is_file()
