"""Help pages and usage errors, for every command.

Every page has a description, examples and an exit-code paragraph; every
option a help line and a metavar instead of a Python type; every usage error
is one ``Error: …`` line (plus a hint) and exit 2.
"""

from __future__ import annotations

import re

import pytest
import typer

from mmctl.cli.app import app


def _commands(group=None, path=("mmctl",)):
    group = group or typer.main.get_command(app)
    for name, command in sorted(group.commands.items()):
        full = (*path, name)
        if hasattr(command, "commands"):
            yield full, command
            yield from _commands(command, full)
        else:
            yield full, command


COMMANDS = list(_commands())
IDS = [" ".join(path[1:]) for path, _ in COMMANDS]
TYPE_NAMES = re.compile(r"<(bool|int|float|str|path|list\[[^>]*\]|Path|text)>", re.IGNORECASE)


def test_every_command_is_listed():
    names = {" ".join(path[1:]) for path, _ in COMMANDS}
    assert {"send", "demo", "preprocess", "inspect-tokens", "build", "stub-worker"} <= names
    assert {"health", "info", "shm", "shm gc", "bench", "batch"} <= names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_help_page(cli, path, command):
    r = cli(*path[1:], "--help")
    assert r.code == 0 and r.err == ""
    page = r.out
    assert "Examples:" in page and "Exit codes:" in page, page
    assert not TYPE_NAMES.search(page), TYPE_NAMES.search(page).group(0)
    assert "[default: (" not in page  # defaults read like values, not click's "(…)"
    assert "\\b" not in page  # click's no-rewrap marker, escaped, runs examples together
    examples = page.split("Examples:")[1].split("Exit codes:")[0]
    commands = [line for line in examples.splitlines() if line.strip().startswith("mmctl ")]
    assert len(commands) >= 2, examples  # one example a line, not one paragraph
    for param in command.params:
        if param.hidden or param.name == "help":
            continue
        assert param.help, f"{' '.join(path)}: {param.opts} has no help"
        assert param.opts[0] in page


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_usage_errors_are_one_line(cli, path, command):
    r = cli(*path[1:], "--xyzzy")
    assert r.code == 2
    assert r.out == ""
    lines = r.err.splitlines()
    assert lines[0] == "Error: no such option: --xyzzy", r.err
    assert lines[1:] == [f"Hint: {' '.join(path)} --help shows the options"]


@pytest.mark.parametrize(
    "argv",
    [
        ("inspect-tokens", "x.mp4", "--layout", "bogus"),
        ("build", "x.mp4", "-o", "y.pb", "--layout", "bogus"),
        ("send", "x.mp4", "--transport", "carrier-pigeon"),
        ("preprocess", "x.mp4", "--pixel-dtype", "int4"),
        ("stub-worker", "--port", "many"),
        ("demo", "--rounds", "0"),
    ],
)
def test_bad_values_are_one_line(cli, argv):
    r = cli(*argv)
    assert r.code == 2
    assert r.out == ""
    assert len(r.err.splitlines()) == 2 and r.err.startswith("Error: invalid value for '"), r.err


def test_one_pixel_dtype_option_everywhere():
    values = {}
    for path, command in COMMANDS:
        for param in command.params:
            if "--pixel-dtype" in param.opts:
                values[path[-1]] = param.metavar
            assert "--pixel-format" not in param.opts
            assert "--limit-mm" not in param.opts
    assert set(values) == {"preprocess", "build", "send", "bench", "batch"}
    lists = values.pop("bench")  # a list there: each value is an arm
    assert len(set(values.values())) == 1 and lists == values["send"] + "[,…]"


def test_root_help(cli):
    r = cli("--help")
    assert r.code == 0
    assert "Examples:" in r.out and "Exit codes:" in r.out
    assert not TYPE_NAMES.search(r.out)


@pytest.mark.parametrize("group", [(), ("shm",)], ids=["mmctl", "mmctl shm"])
def test_a_bare_group_prints_its_help_page(cli, group):
    r = cli(*group)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith(f"Usage: {' '.join(('mmctl', *group))} [OPTIONS] COMMAND")
    assert "Error:" not in r.err and "Commands:" in r.err
