"""The root command and the error boundary, driven as a user drives them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mmctl import __version__
from mmctl.cli.app import app, main
from mmctl.errors import InputError


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def extra_command():
    """Register a throwaway command on the root app for one test."""
    added = []

    def register(fn):
        app.command(name=fn.__name__.replace("_", "-"))(fn)
        added.append(app.registered_commands[-1])
        return fn

    yield register
    for info in added:
        app.registered_commands.remove(info)


def test_help_lists_the_conventions(capsys):
    code, out, err = _run(capsys, "--help")
    assert code == 0
    assert "Usage: mmctl" in out
    assert "130 interrupted" in " ".join(out.split())
    assert err == ""


def test_version(capsys):
    assert _run(capsys, "--version") == (0, f"mmctl {__version__}\n", "")


def test_unknown_option_is_a_usage_error(capsys):
    code, out, err = _run(capsys, "--bogus")
    assert code == 2
    assert out == ""
    assert err == "Error: no such option: --bogus\nHint: mmctl --help shows the options\n"


def test_typed_error_is_one_line_with_its_exit_code(capsys, extra_command):
    @extra_command
    def fails() -> None:
        raise InputError("cannot decode clip.mp4: no video stream", hint="is it an audio file?")

    code, out, err = _run(capsys, "fails")
    assert code == 3
    assert out == ""
    assert err == "Error: cannot decode clip.mp4: no video stream\nHint: is it an audio file?\n"


def test_unexpected_error_has_no_traceback_unless_debug(capsys, extra_command, monkeypatch):
    monkeypatch.delenv("MMCTL_DEBUG", raising=False)

    @extra_command
    def bug() -> None:
        raise ZeroDivisionError("boom")

    code, out, err = _run(capsys, "bug")
    assert code == 1
    assert out == ""
    assert err.splitlines()[0] == "Error: unexpected ZeroDivisionError: boom"
    assert "Traceback" not in err

    code, _, err = _run(capsys, "--debug", "bug")
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1] == "Error: unexpected ZeroDivisionError: boom"

    monkeypatch.setenv("MMCTL_DEBUG", "1")
    assert "Traceback" in _run(capsys, "bug")[2]


def test_json_output_is_one_document(capsys):
    from mmctl.cli._output import Output

    Output(json_mode=True).result({"answer": "red, blue", "tokens": 3}, human=print)
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {"answer": "red, blue", "tokens": 3}


def test_sigint_exits_130_and_runs_cleanup(tmp_path):
    marker = tmp_path / "cleaned"
    script = f"""
import sys, time
from mmctl.cli.app import app, main

@app.command()
def wait() -> None:
    try:
        print("ready", flush=True)
        time.sleep(30)
    finally:
        open({str(marker)!r}, "w").close()

sys.exit(main(["wait"]))
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MMCTL_DEBUG": ""},
    )
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err == "Error: interrupted by SIGINT\n"
    assert marker.exists()


def test_python_dash_m_works():
    done = subprocess.run(
        [sys.executable, "-m", "mmctl", "--version"], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, f"mmctl {__version__}\n")
