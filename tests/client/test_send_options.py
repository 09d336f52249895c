"""`mmctl send` options as a new user meets them: timings that add up, local
inputs before the network, one validation per value, prompts from anywhere,
replays that say what they cannot apply, damaged media said out loud."""

from __future__ import annotations

import io
import json
import re

import pytest

from mmctl.transport.shm import own_files

PROMPT = "Which colours appear, in order?"
DEAD = "127.0.0.1:1"  # nothing listens there: any network call fails with exit 5


# ---- timings that add up ----


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_json_timing_rows_sum_to_total(send_json, cli, stub, red_blue, transport):
    doc = send_json(stub, red_blue, "-p", PROMPT, "--transport", transport).json()
    timings = dict(doc["timings_s"])
    total = timings.pop("total_s")
    assert list(timings) == [
        "inputs_s",
        "probe_s",
        "model_files_s",
        "tokenizer_s",
        "hash_s",
        "decode_s",
        "tokenize_s",
        "handoff_s",
        "ttft_s",
        "generation_s",
    ]
    assert sum(timings.values()) == pytest.approx(total, abs=1e-5)  # rounding to 1 µs only
    assert doc["overlapped_s"]["preprocess_s"] <= timings["decode_s"]


def test_human_timing_table_adds_up(cli, stub, red_blue):
    r = cli("send", red_blue, "-p", PROMPT, "--target", stub.running.address)
    assert r.code == 0, r.err
    rows = dict(
        (m.group(1).strip(), float(m.group(2).replace(",", "")))
        for m in re.finditer(r"^([a-z][a-z +-]*?)\s+([\d,]+\.\d) ms", r.err, re.M)
    )
    total = rows.pop("total")
    for setup in ("connect + probe", "model files", "tokenizer load"):
        assert setup in rows, r.err
    assert sum(rows.values()) == pytest.approx(total, rel=0.05, abs=0.1 * len(rows))


def test_demo_pays_set_up_once_and_compares_medians(cli):
    r = cli("demo", "--json", "--rounds", "3")
    assert r.code == 0, r.err
    doc = r.json()
    assert set(doc["setup_s"]) == {"probe_s", "model_files_s", "tokenizer_s", "total_s"}
    for mode in ("inline", "shm"):
        timings = dict(doc[mode]["timings_s"])
        total = timings.pop("total_s")
        assert "tokenizer_s" not in timings and "probe_s" not in timings  # not per column
        assert sum(timings.values()) == pytest.approx(total, abs=1e-5)
        assert len(doc["totals_s"][mode]) == 3
        assert total == pytest.approx(sorted(doc["totals_s"][mode])[1], abs=1e-6)  # the median


# ---- local inputs before the network ----


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.mp4"], "no such file"),
        (["--request", "missing.pb"], "cannot read missing.pb"),
        (["CLIP", "-p", "@missing.txt"], "cannot read prompt file missing.txt"),
        (["CLIP", "--model-dir", "missing-dir"], "missing-dir"),
        (["TEXT"], "cannot decode"),
    ],
    ids=["media", "request", "prompt-file", "model-dir", "not-a-video"],
)
def test_local_inputs_are_checked_before_the_worker(cli, red_blue, tmp_path, argv, message):
    text = _write(tmp_path / "text.mp4", "hello, not a video\n" * 50)
    argv = [{"CLIP": str(red_blue), "TEXT": str(text)}.get(a, a) for a in argv]
    r = cli("send", *argv, "--target", DEAD)
    assert r.code == 3, r.err
    assert r.err.startswith("Error: ") and message in r.err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--temperature", "-1", "temperature must be 0 (greedy) or more, got -1.0"),
        ("--top-p", "5", "top-p must be in (0, 1], got 5.0"),
        ("--top-p", "0", "top-p must be in (0, 1], got 0.0"),
        ("--top-k", "-3", "top-k must be 0 (no limit) or more, got -3"),
        ("--max-tokens", "0", "max-tokens must be 1 to 4,294,967,295, got 0"),
        ("--seed", str(2**40), "seed must be a 32-bit signed integer"),
        ("--fps", "0", "fps must be positive"),
        ("--num-frames", "0", "num-frames must be at least 1"),
        ("--timeout", "0", "--timeout must be positive"),
        ("--shm-min-bytes", "-1", "--shm-min-bytes must not be negative"),
    ],
)
def test_bad_values_are_usage_errors_before_the_worker(cli, red_blue, flag, value, message):
    r = cli("send", red_blue, flag, value, "--target", DEAD)
    assert r.code == 2, r.err
    assert r.err.startswith("Error: ") and message in r.err


def test_min_frames_above_max_frames(cli, red_blue):
    r = cli("send", red_blue, "--min-frames", "9", "--max-frames", "3", "--target", DEAD)
    assert r.code == 2 and "min-frames (9) is larger than max-frames (3)" in r.err


# ---- one default prompt ----


def test_send_build_and_inspect_tokens_share_the_default_prompt(
    send_json, cli, stub, red_blue, tmp_path
):
    sent = send_json(stub, red_blue, "--no-stream").json()
    shown = cli("inspect-tokens", red_blue, "--json", "--ids").json()
    built = cli("build", red_blue, "-o", tmp_path / "r.pb", "--json").json()
    assert sent["prompt_tokens"] == shown["num_tokens"] == built["request"]["num_input_ids"]
    text = "".join(r.get("text", "") for r in shown["rows"] if r["kind"] == "text")
    assert "Describe this." in text


# ---- prompts from anywhere ----


def _ids(cli, *args) -> list[int]:
    r = cli("inspect-tokens", *args, "--json", "--ids")
    assert r.code == 0, r.err
    return r.json()["input_ids"]


def test_prompt_from_file_stdin_and_escaped_at(cli, red_blue, tmp_path, monkeypatch):
    big = "Describe every frame. " * 50_000  # ~1 MB: too long for an argument list
    (tmp_path / "big.txt").write_text(big)
    expected = _ids(cli, red_blue, "-p", big)
    assert _ids(cli, red_blue, "-p", f"@{tmp_path / 'big.txt'}") == expected
    assert _ids(cli, red_blue, "--prompt-file", tmp_path / "big.txt") == expected
    monkeypatch.setattr("sys.stdin", io.StringIO(big))
    assert _ids(cli, red_blue, "-p", "-") == expected
    literal = _write(tmp_path / "at.txt", "@home")
    assert _ids(cli, red_blue, "-p", "@@home") == _ids(cli, red_blue, "--prompt-file", literal)


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("argv", "stdin", "code", "said"),
    [
        (["-p", ""], None, 2, "the prompt (-p) is empty"),
        (["-p", "  \n"], None, 2, "the prompt (-p) is empty"),
        (["-p", "@EMPTY"], None, 3, "prompt file EMPTY is empty"),
        (["--prompt-file", "EMPTY"], None, 3, "prompt file EMPTY is empty"),
        (["-p", "-"], "", 3, "the prompt read from stdin (-p -) is empty"),
    ],
    ids=["argument", "blank", "at-file", "prompt-file", "stdin"],
)
def test_an_empty_prompt_is_refused_before_the_worker(
    cli, red_blue, tmp_path, monkeypatch, argv, stdin, code, said
):
    # Issue 44: `git log … | mmctl send clip.mp4 -p -` with nothing logged
    # sent the media with no question at all.
    empty = _write(tmp_path / "empty.txt", "")
    argv = [a.replace("EMPTY", str(empty)) for a in argv]
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    commands = {
        "send": ["--target", DEAD],
        "build": ["-o", tmp_path / "r.pb"],
        "inspect-tokens": [],
    }
    for command, more in commands.items():
        r = cli(command, red_blue, *argv, *more)
        assert r.code == code, (command, r.err)
        assert r.err.startswith(f"Error: {said.replace('EMPTY', str(empty))}"), r.err
        assert "Hint: give the text to send" in r.err
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))


def test_the_library_refuses_an_empty_prompt_too():
    from mmctl.client.options import SendOptions
    from mmctl.errors import UsageError

    with pytest.raises(UsageError, match="the prompt is empty"):
        SendOptions(prompt=" ")


def test_prompt_and_prompt_file_together_is_usage(cli, red_blue, tmp_path):
    r = cli("send", red_blue, "-p", "x", "--prompt-file", _write(tmp_path / "p", "y"))
    assert r.code == 2 and "alternatives" in r.err


def test_a_big_prompt_reaches_the_worker(send_json, cli, stub, red_blue, tmp_path):
    path = _write(tmp_path / "big.txt", "Name the colours. " * 60_000)  # ~1 MB
    r = send_json(stub, red_blue, "-p", f"@{path}", "--no-stream")
    assert r.code == 0, r.err
    assert r.json()["prompt_tokens"] > 100_000


def test_a_prompt_too_long_for_the_context_is_refused_from_its_length(send_json, stub, red_blue,
                                                                     tmp_path, monkeypatch):  # fmt: skip
    # 36 MB: at least 281,250 tokens (the longest token is 128 bytes), over 262,144.
    path = _write(tmp_path / "huge.txt", "hello world " * 3_000_000)
    encoded = []
    monkeypatch.setattr("mmctl.prompt.tokenizer.Tokenizer.encode",
                        lambda self, text: encoded.append(len(text)) or [])  # fmt: skip
    r = send_json(stub, red_blue, "-p", f"@{path}")
    assert r.code == 6, r.err
    assert r.err.splitlines()[0].startswith(
        "Error: the prompt is too long for the worker's max_context_length 262,144: its text "
        "alone is at least"
    )
    assert all(n < 1000 for n in encoded)  # the prompt itself was never tokenized


def test_special_token_text_is_refused_with_its_position(cli, stub, red_blue):
    r = cli("send", red_blue, "-p", "See <|vision_start|> here", "--target", stub.running.address)
    assert r.code == 2, r.err
    assert r.err.splitlines()[0] == (
        "Error: the prompt holds the special token <|vision_start|> at character 4; "
        "it would become that control token, not text"
    )
    assert "--allow-special-tokens" in r.err
    system = cli("inspect-tokens", red_blue, "--system", "x <|im_end|>")
    assert system.code == 2 and "the system text holds the special token <|im_end|>" in system.err


def test_allowed_special_tokens_and_the_placeholder_count(cli, red_blue):
    ok = cli("inspect-tokens", red_blue, "-p", "<|im_end|>", "--allow-special-tokens", "--json")
    assert ok.code == 0, ok.err
    extra = cli("inspect-tokens", red_blue, "-p", "a <|video_pad|>", "--allow-special-tokens")
    assert extra.code == 3
    assert "2 media placeholder(s) for 1 media item(s): 1 of them written in the prompt" in (
        extra.err
    )


# ---- replay: what applies, and what is refused by name ----


@pytest.fixture
def request_file(cli, stub, red_blue, tmp_path):
    path = tmp_path / "req.pb"
    assert cli("build", red_blue, "-p", PROMPT, "-o", path, "-t", stub.running.address).code == 0
    return path


def test_replay_applies_sampling_and_streaming(send_json, cli, stub, request_file):
    doc = send_json(stub, "--request", request_file, "--max-tokens", "2", "--no-stream").json()
    assert doc["finish_reason"] == "length" and doc["completion_tokens"] == 2
    assert doc["decisions"]["replay"]["value"] == "changed max_tokens, stream"
    recorded = send_json(stub, "--request", request_file).json()
    assert recorded["answer"] == "red, blue"
    assert recorded["decisions"]["replay"]["value"] == "as recorded"


def test_replay_refuses_what_it_cannot_apply(cli, request_file, red_blue):
    r = cli(
        "send",
        "--request",
        request_file,
        "-p",
        "other",
        "--num-frames",
        "4",
        "--pixel-dtype",
        "uint8",
        "--target",
        DEAD,
    )
    assert r.code == 2, r.err
    assert r.err.splitlines()[0] == (
        "Error: --request replays a recorded request; it cannot apply --prompt, "
        "--pixel-dtype, --num-frames"
    )
    both = cli("send", red_blue, "--request", request_file, "--target", DEAD)
    assert both.code == 2 and "one of the two" in both.err


def test_worker_processing_refuses_client_side_options(cli, red_blue):
    r = cli("send", red_blue, "--processing", "worker", "--fps", "1", "--target", DEAD)
    assert r.code == 2 and "cannot apply --fps" in r.err


# ---- truncated and damaged media ----


def test_truncated_video_warns_and_strict_refuses(
    send_json, cli, stub, tmp_path, fixtures, no_leaks
):
    data = (fixtures / "clips" / "faststart.mp4").read_bytes()
    cut = _write_bytes(tmp_path / "cut.mp4", data[: len(data) // 2])
    r = send_json(stub, cut, "-p", PROMPT, "--shm")
    assert r.code == 0, r.err
    doc = r.json()
    (warning,) = doc["warnings"]
    assert re.fullmatch(
        rf"{re.escape(str(cut))}: only \d+ of the 60 frames the header announces decode "
        r"\(truncated or damaged file\); sampled from those \d+",
        warning,
    ), warning
    assert r.err.startswith("Warning: " + warning)
    assert "the worker did not read" not in r.err  # the first pass's file was ours
    strict = send_json(stub, cut, "--strict")
    assert strict.code == 3 and strict.err.startswith("Error: " + warning)
    pre = cli("preprocess", cut, "--json")
    assert pre.code == 0 and pre.json()["warnings"] == [warning]
    assert cli("preprocess", cut, "--strict").code == 3


def test_mp4_without_moov_is_named(cli, tmp_path, fixtures):
    data = (fixtures / "media" / "ties.mp4").read_bytes()  # index (moov) at the end
    cut = _write_bytes(tmp_path / "cut.mp4", data[: len(data) // 2])
    r = cli("send", cut, "--target", DEAD)
    assert r.code == 3
    assert r.err.splitlines()[0] == (
        f"Error: cannot decode {cut}: truncated or incomplete MP4 (no moov atom)"
    )


def _write_bytes(path, data):
    path.write_bytes(data)
    return path


def test_first_pass_files_are_not_reported_as_the_workers(cli, stub, tmp_path, fixtures):
    data = (fixtures / "clips" / "faststart.mp4").read_bytes()
    cut = _write_bytes(tmp_path / "cut.mp4", data[: len(data) // 2])
    r = cli("send", cut, "--target", stub.running.address, "--shm")
    assert r.code == 0
    assert "shm file" not in r.err
    assert own_files() == []


def test_health_json_on_a_dead_worker(cli):
    r = cli("health", "--target", DEAD, "--timeout", "2", "--json")
    assert r.code == 5
    doc = json.loads(r.out)
    assert doc["healthy"] is False and doc["target"] == DEAD and "unavailable" in doc["error"]
    assert r.err.startswith("Error: HealthCheck: worker at 127.0.0.1:1 unavailable")
