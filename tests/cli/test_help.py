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


# ---- help text that names what the code holds (kept from drifting apart) ----


def _page(cli, *path: str) -> str:
    r = cli(*path, "--help")
    assert r.code == 0, r.err
    return " ".join(r.out.split())


def test_family_help_names_the_registry_families_once_each(cli):
    from mmctl.models import registry

    for path, command in COMMANDS:
        for param in command.params:
            if "--family" in param.opts:
                listed = param.help.split("Model family: ")[1].split(".  [default")[0]
                names = [n.strip() for n in listed.replace(" or ", ", ").split(",")]
                assert names == registry.canonical_names(), (path, param.help)


def test_every_layout_check_is_named_where_the_checks_are_described(cli):
    from mmctl.models import registry

    checks = {family.prompt.check_name.replace("_", " ") for family in registry.FAMILIES}
    for command in ("build", "inspect-tokens"):
        page = _page(cli, command)
        missing = [c for c in sorted(checks) if c not in page]
        assert not missing, f"mmctl {command} --help never names {missing}"


def test_usage_lines_show_each_argument_once_and_plainly(cli):
    for path, command in COMMANDS:
        if hasattr(command, "commands"):
            continue
        usage = cli(*path[1:], "--help").out.splitlines()[0]
        assert usage.startswith(f"Usage: {' '.join(path)} [OPTIONS]"), usage
        rest = usage.split("[OPTIONS]", 1)[1].split()
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        assert len(rest) == len(arguments), usage
        for shown, param in zip(rest, arguments, strict=True):
            bare = shown.removesuffix("...").strip("[]{}")
            assert bare == param.metavar and "[" not in bare and "{" not in bare, usage
        page = cli(*path[1:], "--help").out.split("\n", 1)[1]
        for param in arguments:
            assert param.metavar in page, f"{usage}: {param.metavar} is not explained"


#: Where a command's model files come from when --model-dir is left out.
MODEL_FILES = {
    "send": "the worker's, from its GetTokenizer bundle",
    "batch": "the worker's, from its GetTokenizer bundle",
    "bench": "the worker's, from its GetTokenizer bundle",
    "build": "the worker's with --target, else the built-in Qwen3-VL set",
    "preprocess": "the built-in Qwen3-VL set",
    "inspect-tokens": "the built-in Qwen3-VL set",
    "stub-worker": "the built-in Qwen3-VL set",
}


def test_model_dir_default_is_each_commands_own(cli):
    shown = {}
    for path, command in COMMANDS:
        for param in command.params:
            if "--model-dir" in param.opts:
                shown[path[-1]] = param.help.split("[default: ")[1].rstrip("]")
    assert shown == MODEL_FILES
