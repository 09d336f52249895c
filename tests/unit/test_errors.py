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
    }


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


def test_readme_table_matches_the_enum():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` |" in readme, code
