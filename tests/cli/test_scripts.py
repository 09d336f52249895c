"""What a shell script sees: `$(…)`, pipes that close early, one line per error.

Each command runs as a real process (``python -m mmctl``) against a stub
worker on 127.0.0.1, so stdout, stderr and the exit code are the ones a
script gets — including the gRPC C core's own log lines, which an in-process
run would not show.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MMCTL = f"{sys.executable} -m mmctl"


def sh(script: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def into_closed_pipe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run mmctl with stdout on a pipe whose reader is already gone: every
    write meets EPIPE, as after `| head -1` has read its line. ``.pid``: the
    process's, whose name its shm files carry."""
    read, write = os.pipe()
    os.close(read)
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "mmctl", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as proc:
            _, stderr = proc.communicate(timeout=120)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, None, stderr)
        done.pid = proc.pid
        return done
    finally:
        os.close(write)


def test_command_substitution_is_the_answer(stub, red_blue, env):
    r = sh(f'ANSWER=$({MMCTL} send {red_blue} -t {stub.running.address}) && echo "[$ANSWER]"', env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[red, blue]\n"
    assert "time to first token" in r.stderr  # the report is still there, for a person


def test_a_pipe_closed_early_ends_quietly(stub, red_blue, env):
    r = sh(f"{MMCTL} send {red_blue} -t {stub.running.address} --json | head -c 10", env)
    assert r.stdout == '{"schema":' and r.stderr == ""
    assert r.returncode in (0, 141)  # 141 only when the write lost the race with head's exit


@pytest.mark.parametrize(
    "args",
    [
        ["send", "{clip}", "-t", "{target}"],
        ["send", "{clip}", "-t", "{target}", "--json"],
        ["inspect-tokens", "{clip}"],
        ["--help"],
    ],
    ids=["send", "send-json", "inspect-tokens", "help"],
)
def test_a_closed_stdout_is_exit_141_with_nothing_on_stderr(stub, red_blue, env, args):
    argv = [a.format(clip=red_blue, target=stub.running.address) for a in args]
    r = into_closed_pipe(argv, env)
    assert r.returncode == 141, r.stderr
    assert r.stderr == ""


def test_a_closed_stdout_leaves_no_shm_files(stub, red_blue, env, tmp_path, monkeypatch):
    # A folder of this test's own (the stub here reads it too): another
    # process's files come and go in /dev/shm meanwhile.
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("MMCTL_SHM_DIR", str(folder))
    env = {**env, "MMCTL_SHM_DIR": str(folder)}
    r = into_closed_pipe(["send", str(red_blue), "-t", stub.running.address, "--shm"], env)
    assert r.returncode == 141, r.stderr
    # The pixels did travel in a file (else there was nothing to leave behind) …
    # The stub logs a Generate as it ends: here once it sees the client gone,
    # which can be after the client's exit.
    deadline = time.monotonic() + 30
    while "via shm" not in stub.log.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "via shm" in stub.log.getvalue(), (r.stderr, stub.log.getvalue())
    # … and none is left.
    assert list(folder.iterdir()) == []


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert lines and lines[0].startswith("Error: "), stderr
    assert all(line.startswith(("Error: ", "Hint: ")) for line in lines), stderr
    assert len([line for line in lines if line.startswith("Error: ")]) == 1, stderr
    return lines[0]


def test_a_bad_header_is_a_usage_error_before_any_call(stub, red_blue, env):
    r = sh(f"{MMCTL} send {red_blue} -t {stub.running.address} -H 'Bad Key: v'", env)
    assert r.returncode == 2 and r.stdout == ""
    assert "metadata key" in _one_error_line(r.stderr)


@pytest.mark.parametrize(
    "header", ["grpc-timeout: 1", "x-token: caf\u00e9", "x-blob-bin: abc", "no-colon"]
)
def test_headers_grpc_would_refuse_are_refused_here(header):
    from mmctl.client.channel import metadata
    from mmctl.errors import UsageError

    with pytest.raises(UsageError):
        metadata(header)


def test_good_headers_pass_through():
    from mmctl.client.channel import metadata

    assert metadata("Authorization: Bearer abc.def") == ("authorization", "Bearer abc.def")
    assert metadata("x-request-tag:  a b ") == ("x-request-tag", "a b")


@pytest.mark.parametrize("target", ["localhost:99999", "localhost:0", "localhost:http", "[::1]"])
def test_a_target_port_out_of_range_is_a_usage_error(red_blue, env, target):
    r = sh(f"{MMCTL} send {red_blue} -t '{target}'", env)
    assert r.returncode == 2, r.stderr
    assert "--target" in _one_error_line(r.stderr)


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_http_server_is_named_as_not_grpc(red_blue, env, http_server):
    r = sh(f"{MMCTL} send {red_blue} -t {http_server}", env)
    assert r.returncode == 5
    assert "but not gRPC" in _one_error_line(r.stderr)


def test_tls_to_a_plaintext_worker_says_so_without_grpc_log_lines(stub, red_blue, env):
    r = sh(f"{MMCTL} send {red_blue} -t {stub.running.address} --tls", env)
    assert r.returncode == 5
    assert "TLS handshake" in _one_error_line(r.stderr)


def test_debug_lets_grpc_log_again(stub, red_blue, env):
    r = sh(f"{MMCTL} --debug send {red_blue} -t {stub.running.address} --tls", env)
    assert r.returncode == 5
    assert any(not line.startswith(("Error: ", "Hint: ")) for line in r.stderr.splitlines())


def test_stub_worker_on_an_address_this_host_lacks(env):
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no host has it; binding sends nothing.
    r = sh(f"{MMCTL} stub-worker --host 192.0.2.1 --port 0", env, timeout=60)
    assert r.returncode == 2
    assert "no such address" in _one_error_line(r.stderr)


def test_stderr_of_a_script_is_empty_with_json_and_success(stub, red_blue, env, tmp_path: Path):
    r = sh(f"{MMCTL} send {red_blue} -t {stub.running.address} --json > {tmp_path / 'a.json'}", env)
    assert r.returncode == 0 and r.stderr == ""
