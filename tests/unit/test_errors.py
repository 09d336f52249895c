import pytest

from mmctl.errors import (
    CheckFailed,
    ExitCode,
    InputError,
    Interrupted,
    MmctlError,
    UsageError,
    WorkerRejected,
    WorkerUnavailable,
)


def test_exit_codes_are_the_documented_ones():
    # A public interface for scripts: these numbers must never change.
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "UNEXPECTED": 1,
        "USAGE": 2,
        "BAD_INPUT": 3,
        "REJECTED": 4,
        "UNAVAILABLE": 5,
        "CHECK_FAILED": 6,
        "SOME_FAILED": 7,
        "ALL_FAILED": 8,
        "INCOMPLETE": 9,
        "OUTPUT_FAILED": 10,
        "INTERRUPTED": 130,
        "OUTPUT_CLOSED": 141,
    }


def test_every_exit_code_is_documented_in_the_root_help_and_the_docs():
    from pathlib import Path

    from mmctl.cli.app import HELP

    docs = (Path(__file__).resolve().parents[2] / "docs" / "commands" / "index.md").read_text()
    codes = " ".join(HELP.split("Exit codes:")[1].split())
    for code in ExitCode:
        assert f" {int(code)} " in f" {codes} ", f"{code.name} missing from `mmctl --help`"
        assert f"| {int(code)} | `{code.name}` |" in docs, f"{code.name} missing from the docs"


def test_each_error_kind_has_its_exit_code():
    assert MmctlError("x").exit_code is ExitCode.UNEXPECTED
    assert UsageError("x").exit_code is ExitCode.USAGE
    assert InputError("x").exit_code is ExitCode.BAD_INPUT
    assert WorkerRejected("x").exit_code is ExitCode.REJECTED
    assert WorkerUnavailable("x").exit_code is ExitCode.UNAVAILABLE
    assert CheckFailed("x").exit_code is ExitCode.CHECK_FAILED
    assert Interrupted("SIGTERM").exit_code is ExitCode.INTERRUPTED


def test_no_except_exception_swallows_an_interruption():
    try:
        try:
            raise Interrupted("SIGINT")
        except Exception:  # what a loader's fallback does
            pytest.fail("swallowed")
    except Interrupted as err:
        assert err.message == "interrupted by SIGINT" and not isinstance(err, Exception)


def test_error_carries_message_and_hint():
    err = InputError("no such file: a.mp4", hint="check the path")
    assert (err.message, err.hint, str(err)) == (
        "no such file: a.mp4",
        "check the path",
        "no such file: a.mp4",
    )


def test_docs_table_matches_the_enum():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "commands" / "index.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` |" in docs, code


def test_an_interruption_wrapped_by_python_is_still_exit_130(capsys, monkeypatch):
    # SIGINT during an import can surface as "RuntimeError: Error calling
    # __set_name__ …" whose cause is the interruption (seen while numpy loads).
    from mmctl.cli import app

    def wrapped(**_kw):
        try:
            raise Interrupted("SIGINT")
        except Interrupted as stop:
            raise RuntimeError("Error calling __set_name__") from stop

    monkeypatch.setattr(app, "app", wrapped)
    assert app.main(["send", "x.mp4"]) == 130
    assert capsys.readouterr().err == "Error: interrupted by SIGINT\n"
