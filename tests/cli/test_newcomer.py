"""What a newcomer meets first (issue 35), each seen as a shell sees it.

Every command runs as a real process (``python -m mmctl``): the help that
names the families, hints that lead somewhere, one way to write a size,
frames shown as rows for every family that reads video, the build summary
naming the family's own check, a stub log line of what was sent, and a
``--resume`` of a finished output that needs no worker and no Ray.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from mmctl.media.probe import MediaKind
from mmctl.models import registry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MEDIA = FIXTURES / "media"
FAMILIES = FIXTURES / "families"


def mmctl(*args: object, env: dict[str, str], cwd: Path | None = None, timeout: float = 180):
    return subprocess.run(
        [sys.executable, "-m", "mmctl", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def one_error(stderr: str) -> tuple[str, str]:
    """The ``Error:`` line and its ``Hint:`` line, the only two lines."""
    lines = stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: "), stderr
    assert lines[1].startswith("Hint: "), stderr
    return lines[0][len("Error: ") :], lines[1][len("Hint: ") :]


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9._-]*[a-z0-9]", text.lower())


def aliases() -> set[str]:
    return {a for family in registry.FAMILIES for a in family.aliases}


def canonical() -> list[str]:
    return [family.name for family in registry.FAMILIES]


# ---- 1, 2: the families, named once each ----


def test_root_help_names_every_family_once(env):
    r = mmctl("--help", env=env)
    assert r.returncode == 0, r.stderr
    intro = " ".join(r.stdout.split("stdout carries")[0].split())
    said = [w for w in words(intro) if w in set(canonical()) | aliases()]
    assert sorted(said) == sorted(canonical()), intro
    assert "Qwen-VL expects" not in intro


def test_an_unknown_model_type_names_the_families_and_the_way_around(tmp_path, env):
    folder = tmp_path / "paligemma"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {"model_type": "paligemma", "architectures": ["PaliGemmaForConditionalGeneration"]}
        )
    )
    r = mmctl("inspect-tokens", MEDIA / "rgb_odd.png", "--model-dir", folder, env=env)
    assert r.returncode == 3
    message, hint = one_error(r.stderr)
    assert "paligemma" in message
    assert hint.startswith("mmctl preprocesses ")
    named = [w for w in words(hint) if w in set(canonical()) | aliases()]
    assert named == canonical()  # once each, no alias
    assert "--processing worker" in hint


def test_an_unknown_family_name_lists_the_families_once(env):
    r = mmctl("preprocess", MEDIA / "rgb_odd.png", "--family", "paligemma", env=env)
    assert r.returncode == 2
    line = r.stderr.splitlines()[0]
    named = [w for w in words(line) if w in set(canonical()) | aliases()]
    assert named == canonical(), line


@pytest.mark.parametrize("how", ["config.json", "--family"])
def test_kimi_k25_is_refused_with_the_reason_not_the_worker_way(how, tmp_path, env):
    # vLLM's own processing refuses a Kimi-K2.5 image reference, so the general
    # hint (--processing worker) would lead nowhere: the refusal says why instead.
    folder = tmp_path / "kimi"
    folder.mkdir()
    config = {"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"]}
    (folder / "config.json").write_text(json.dumps(config))
    args = ("--model-dir", folder) if how == "config.json" else ("--family", "kimi-k2.5")
    out = tmp_path / "request.pb"
    r = mmctl("build", MEDIA / "rgb_odd.png", "-o", out, *args, env=env)
    assert r.returncode == (3 if how == "config.json" else 2)
    message, hint = one_error(r.stderr)
    assert "mmctl cannot serve it" in message or "which mmctl cannot serve" in message
    assert "vision_chunk" in message and "refuses image references" in message
    named = [w for w in words(hint) if w in set(canonical()) | aliases()]
    assert named == canonical()
    assert "--processing worker" not in hint and 'README "Model families"' in hint
    assert not out.exists()


# ---- 3, 4: hints that lead somewhere ----


@pytest.mark.parametrize("family", ["llava", "llava-next", "llava-onevision", "llama4"])
def test_a_family_forced_on_the_builtin_files_says_to_pass_its_folder(family, env):
    r = mmctl("inspect-tokens", MEDIA / "rgb_odd.png", "--family", family, env=env)
    assert r.returncode == 3
    message, hint = one_error(r.stderr)
    assert f"--family {family}" in hint and "--model-dir DIR" in hint
    # The mismatch leads (issue 44), with what the files are instead.
    assert message.startswith(f"--family {family} does not fit built-in qwen3-vl, which holds "
                              "a qwen3-vl model's files (")  # fmt: skip
    ok = mmctl("inspect-tokens", MEDIA / "rgb_odd.png", "--family", family, "--model-dir",
               FAMILIES / family.replace("-", "_"), env=env)  # fmt: skip
    assert ok.returncode == 0, ok.stderr  # where the hint leads works


def test_a_video_for_an_image_family_names_the_families_that_read_video(env):
    r = mmctl("inspect-tokens", MEDIA / "tiny.mp4", "--model-dir", FAMILIES / "llava", env=env)
    assert r.returncode == 3
    message, hint = one_error(r.stderr)
    assert message == "llava models read image, not video"
    readers = registry.reading(MediaKind.VIDEO)
    assert readers == [
        "qwen3-vl",
        "qwen3.5",
        "qwen2.5-vl",
        "qwen3-omni",
        "llava-onevision",
        "glm4v",
        "glm5-next",
        "gemma4",
        "internvl",
        "minimax-m3-vl",
        "nemotron-omni",
    ]
    assert hint == (
        "qwen3-vl, qwen3.5, qwen2.5-vl, qwen3-omni, llava-onevision, glm4v, glm5-next, gemma4, "
        "internvl, minimax-m3-vl and nemotron-omni models read video"
    )
    ok = mmctl("inspect-tokens", MEDIA / "tiny.mp4", "--model-dir", FAMILIES / "llava_onevision",
               env=env)  # fmt: skip
    assert ok.returncode == 0, ok.stderr


# ---- 5: width x height, as PIL and ffprobe write it ----


def _pil_size(path: Path) -> str:
    with Image.open(path) as image:
        width, height = image.size
    return f"{width}x{height}"


def test_sizes_are_width_by_height_everywhere(env):
    image = MEDIA / "rgb_odd.png"
    size = _pil_size(image)
    assert size == "97x61"
    shown = mmctl("inspect-tokens", image, "--model-dir", FAMILIES / "llava_next", env=env)
    assert shown.returncode == 0, shown.stderr
    (heading,) = [line for line in shown.stdout.splitlines() if "┌ image 1" in line]
    assert f"size {size} " in heading
    pre = mmctl("preprocess", image, "--model-dir", FAMILIES / "llava_next", env=env)
    (source,) = [line for line in pre.stdout.splitlines() if line.startswith("source")]
    assert source.endswith(f"  {size}")
    # Llama 4's tiles too: columns x rows, the way the picture lies.
    large = MEDIA / "large.png"
    doc = json.loads(mmctl("inspect-tokens", large, "--model-dir", FAMILIES / "llama4", "--json",
                           env=env).stdout)  # fmt: skip
    rows, cols = doc["items"][0]["aspect_ratio"]
    assert cols > rows  # the picture is wider than tall
    text = mmctl("inspect-tokens", large, "--model-dir", FAMILIES / "llama4", env=env).stdout
    assert f"tiles {cols}x{rows} " in text and _pil_size(large) == "1400x900"


def test_a_video_size_is_width_by_height(env):
    import av

    clip = MEDIA / "portrait.mp4"  # stored landscape, shown portrait (display rotation)
    with av.open(str(clip)) as container:
        codec = container.streams.video[0].codec_context
        stored = (codec.width, codec.height)
    doc = json.loads(mmctl("preprocess", clip, "--json", env=env).stdout)
    width, height = doc["source"]["width"], doc["source"]["height"]
    assert (width, height) in (stored, stored[::-1])
    human = mmctl("preprocess", clip, env=env).stdout
    (source,) = [line for line in human.splitlines() if line.startswith("source")]
    assert f"  {width}x{height}" in source
    (resized,) = [line for line in human.splitlines() if line.startswith("resized")]
    assert resized.split()[-1] == f"{doc['resized']['width']}x{doc['resized']['height']}"
    assert doc["resized"]["height"] > doc["resized"]["width"]  # a portrait clip stays tall
    assert all(_depth(line) <= 1 for line in human.splitlines()), human


@pytest.mark.parametrize(
    ("media", "folder"),
    [
        ("rgb_odd.png", "llava"),
        ("rgb_odd.png", None),
        ("tok4.mp4", "llava_onevision"),
        ("tok4.mp4", None),
    ],
)
def test_preprocess_times_add_up(media, folder, env):
    args = ["--model-dir", FAMILIES / folder] if folder else []
    r = mmctl("preprocess", MEDIA / media, *args, env=env)
    assert r.returncode == 0, r.stderr
    (time_row,) = [line for line in r.stdout.splitlines() if line.startswith("time ")]
    parts = re.match(
        r"time +total ([\d.]+) ms = decode ([\d.]+) ms \+ resize \+ normalize ([\d.]+) ms",
        time_row,
    )
    assert parts, time_row
    total, load, work = (float(x) for x in parts.groups())
    assert round(load + work, 1) == total
    assert all(_depth(line) <= 1 for line in r.stdout.splitlines()), r.stdout


# ---- 9: build names the family's check, one level of parentheses ----


def _depth(line: str) -> int:
    deepest = level = 0
    for ch in line:
        level += {"(": 1, ")": -1}.get(ch, 0)
        deepest = max(deepest, level)
    return deepest


@pytest.mark.parametrize(
    ("folder", "check"), [("llava_next", "placeholder spans"), (None, "mrope walk")]
)
def test_build_names_the_familys_check(folder, check, tmp_path, env):
    args = ["--model-dir", FAMILIES / folder] if folder else []
    r = mmctl("build", MEDIA / "rgb_odd.png", *args, "-o", tmp_path / "r.pb", env=env)
    assert r.returncode == 0, r.stderr
    (prompt,) = [line for line in r.stderr.splitlines() if line.startswith("prompt ")]
    assert prompt.endswith(f"layout vllm, {check} pass")
    assert ("mrope" in r.stderr) == (check == "mrope walk")
    (decision,) = [line for line in r.stderr.splitlines() if line.startswith("pixel dtype ")]
    assert " — no worker asked: " in decision
    assert all(_depth(line) <= 1 for line in r.stderr.splitlines()), r.stderr


# ---- 10: a OneVision video's frames as rows ----


def test_onevision_video_frames_are_rows(env):
    clip = MEDIA / "tok64.mp4"
    args = ("inspect-tokens", clip, "--model-dir", FAMILIES / "llava_onevision")
    doc = json.loads(mmctl(*args, "--json", env=env).stdout)
    (item,) = doc["items"]
    frames, span = item["frames"], item["span"]
    assert frames == 32 and span["length"] == 196 * frames + 1
    inside = [r for r in doc["rows"] if r.get("item") == 1 and r["kind"] == "pads"]
    assert [(r.get("frame"), r["count"]) for r in inside] == [
        *((n, 196) for n in range(1, frames + 1)),
        (None, 1),  # the newline after the last frame
    ]
    assert [r["at"] for r in inside] == [span["offset"] + 196 * n for n in range(frames + 1)]
    text = mmctl(*args, "--all", env=env).stdout
    shown = re.findall(r"│ frame (\d+) +<video>×(\d+)", text)
    assert [(int(n), int(c)) for n, c in shown] == [(n, 196) for n in range(1, frames + 1)]
    lines = text.splitlines()
    last = max(i for i, line in enumerate(lines) if "│ frame 32 " in line)
    assert lines[last + 1].split() == [str(span["offset"] + span["length"] - 1), "│",
                                       "<video>×1", "after", "the", "last", "frame"]  # fmt: skip
    short = mmctl(*args, env=env).stdout
    assert "… 26 more frame(s) like these (--all shows them)" in short


def test_qwen25_video_frames_are_rows(env):
    doc = json.loads(mmctl("inspect-tokens", MEDIA / "tok4.mp4", "--family", "qwen2.5-vl",
                           "--json", env=env).stdout)  # fmt: skip
    (item,) = doc["items"]
    t, h, w = item["grid_thw"]
    inside = [r for r in doc["rows"] if r.get("item") == 1 and r["kind"] == "pads"]
    assert [(r["frame"], r["count"]) for r in inside] == [(n, h * w // 4) for n in range(1, t + 1)]
    assert sum(r["count"] for r in inside) == item["span"]["length"]


# ---- 12: the stub logs what it sent ----


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def echo_stub(env) -> Iterator[tuple[str, subprocess.Popen]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json", "--answer", "echo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        yield ready["address"], proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_stub_logs_the_answer_it_sent(echo_stub, env):
    address, proc = echo_stub
    cut = mmctl("send", MEDIA / "tok4.mp4", "-t", address, "--max-tokens", "5", "--json", env=env)
    whole = mmctl("send", MEDIA / "tok4.mp4", "-t", address, "--json", env=env)
    assert cut.returncode == whole.returncode == 0, cut.stderr + whole.stderr
    sent, full = json.loads(cut.stdout), json.loads(whole.stdout)
    assert sent["finish_reason"] == "length" and len(full["answer"]) > len(sent["answer"])
    proc.terminate()
    _, log = proc.communicate(timeout=30)
    outcomes = re.findall(r"-> ok (.*) \((\d+) tokens, (\w+)\) \(\d+ ms\)$", log, re.M)
    assert outcomes == [(repr(sent["answer"]), "5", "length"),
                        (repr(full["answer"]), str(full["completion_tokens"]), "stop")], log  # fmt: skip


# ---- 6, 7: a finished output, and which failures a retry fixes ----


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A port bound on 127.0.0.1 that nothing listens on: a connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def _dataset(folder: Path, *extra: str) -> Path:
    for name in ("tok4.mp4", "rgb_odd.png"):
        (folder / name).write_bytes((MEDIA / name).read_bytes())
    lines = [
        json.dumps({"id": "clip", "prompt": "Which colours?", "media": ["tok4.mp4"]}),
        json.dumps({"id": "picture", "prompt": "Which colour?", "media": ["rgb_odd.png"]}),
        *extra,
    ]
    data = folder / "in.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return data


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_resume_of_a_finished_output_needs_no_worker_and_no_ray(
    engine, stub, tmp_path, env, dead_port
):
    if engine == "ray":
        pytest.importorskip("ray")
    data = _dataset(tmp_path, "not json")
    out = tmp_path / "out.jsonl"
    first = mmctl("batch", data, "-o", out, "-t", stub.running.address, "--workers", "1", env=env)
    assert first.returncode == 7, first.stderr  # the line that is not JSON
    before = out.read_bytes()
    # Nothing answers at the target, nor a Ray cluster at the address: a run
    # that probed one or started Ray would end in exit 5.
    where = (
        ["--engine", "ray", "--ray-address", f"127.0.0.1:{dead_port}"] if engine == "ray" else []
    )
    again = mmctl("batch", data, "-o", out, "-t", f"127.0.0.1:{dead_port}", "--resume", "--json",
                  *where, env=env)  # fmt: skip
    assert again.returncode == 7, again.stderr
    counts = json.loads(again.stdout)
    assert (counts["total"], counts["skipped"], counts["succeeded"], counts["failed"]) == (
        3,
        2,
        0,
        1,
    )
    assert counts["engine"] == engine and counts["startup_s"] == 0 and counts["by_target"] == {}
    assert counts["in_output"] == {"answered": 2, "failed": 1}

    def answered(raw: bytes) -> list[bytes]:
        return [line for line in raw.splitlines() if json.loads(line)["error"] is None]

    after = out.read_bytes()
    assert len(after.splitlines()) == 3  # the invalid line's error line, written again
    assert answered(after) == answered(before) and len(answered(after)) == 2


def test_resume_sends_what_is_left(stub, tmp_path, env, dead_port):
    """A line the output does not answer is sent: the run needs its worker."""
    data = _dataset(tmp_path)
    out = tmp_path / "out.jsonl"
    assert mmctl("batch", data, "-o", out, "-t", stub.running.address, "--workers", "1",
                 env=env).returncode == 0  # fmt: skip
    with data.open("a") as f:
        f.write(json.dumps({"id": "more", "prompt": "Again?", "media": ["tok4.mp4"]}) + "\n")
    r = mmctl("batch", data, "-o", out, "-t", f"127.0.0.1:{dead_port}", "--resume", env=env)
    assert r.returncode == 5 and "no target answers" in r.stderr
    ok = mmctl("batch", data, "-o", out, "-t", stub.running.address, "--resume", "--json",
               "--workers", "1", env=env)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["succeeded"] == 1 and json.loads(ok.stdout)["skipped"] == 2


def test_the_hint_says_which_failures_a_retry_fixes(stub, tmp_path, env):
    missing = json.dumps({"id": "gone", "prompt": "?", "media": ["missing.mp4"]})
    data = _dataset(tmp_path, "not json", missing)
    r = mmctl("batch", data, "-o", tmp_path / "out.jsonl", "-t", stub.running.address,
              "--workers", "1", env=env)  # fmt: skip
    assert r.returncode == 7
    message, hint = one_error(r.stderr.split("\n", 1)[1])  # after the summary line
    assert message.startswith("2 of 4 items failed")
    assert hint == (
        "the 2 refused for their input line or media (1 invalid_line, 1 invalid_input) fail "
        "again until fixed; --resume then tries them"
    )
    assert "--resume tries again" not in hint


def test_the_hint_tells_worker_failures_from_input_ones():
    from mmctl.cli.batch import _retry_hint
    from mmctl.run_batch.api import BatchCounts

    counts = BatchCounts(total=6, succeeded=1, failed=5, skipped=0, engine="local", wall_s=1.0,
                         errors={"unavailable": 2, "deadline_exceeded": 1, "invalid_line": 1,
                                 "invalid_argument": 1})  # fmt: skip
    assert counts.split_errors() == (
        {"unavailable": 2, "deadline_exceeded": 1},
        {"invalid_line": 1, "invalid_argument": 1},
    )
    assert _retry_hint(counts) == (
        "--resume tries again the 3 the worker failed (2 unavailable, 1 deadline_exceeded); "
        "the 2 refused for their input line or media (1 invalid_line, 1 invalid_argument) "
        "fail again until fixed; --resume then tries them"
    )
