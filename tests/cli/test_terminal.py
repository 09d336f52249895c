"""What a person sees: commands run in a pseudo-terminal, rendered by pyte.

stdout and stderr share one screen in an interactive shell, so a progress
bar on stderr that redraws and clears its line can erase what stdout wrote.
These tests look at the rendered screen, not only at the bytes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

PROMPT = "Which colours appear, in order?"
SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def _colours(raw: bytes) -> list[bytes]:
    """SGR sequences that set a colour (NO_COLOR allows bold and dim, not colour)."""
    colour = {*range(30, 39), *range(40, 49), *range(90, 98), *range(100, 108)}
    return [m for m in SGR.findall(raw) if colour & {int(p) for p in m.split(b";") if p}]


def test_streamed_answer_stays_on_screen(terminal, stub, red_blue):
    shown = terminal("send", red_blue, "-p", PROMPT, "--target", stub.running.address, "--shm")
    assert shown.code == 0, shown.text
    assert b"frames" in shown.raw  # the progress bar ran in this terminal...
    lines = [line.rstrip() for line in shown.lines]
    assert "red, blue" in lines, shown.text  # ...and the answer is still on screen
    assert lines.index("red, blue") < next(i for i, x in enumerate(lines) if x.startswith("total"))
    assert "frames" not in shown.text  # the bar cleared itself


def test_a_status_line_shows_the_set_up_and_leaves_no_trace(terminal, stub, red_blue):
    # The tokenizer takes seconds to load: the screen says so, then clears it.
    shown = terminal("send", red_blue, "--target", stub.running.address)
    assert shown.code == 0, shown.text
    # A status is drawn about 12 times a second, so which phases show depends on
    # their speed; the set-up (imports, connecting, the tokenizer) lasts longer.
    from mmctl.cli._render import NEXT_STATUS

    assert any(text.encode() in shown.raw for text in NEXT_STATUS.values()), shown.raw
    assert "…" not in shown.text, shown.text  # no status line left on the screen
    assert shown.text.splitlines()[0] == "red, blue", shown.text


@pytest.mark.parametrize("command", ["build", "inspect-tokens"])
def test_offline_commands_show_a_status_while_loading(terminal, red_blue, tmp_path, command):
    argv = [command, red_blue] + (["-o", tmp_path / "r.pb"] if command == "build" else [])
    shown = terminal(*argv)
    assert shown.code == 0, shown.text
    assert b"loading the model files" in shown.raw
    assert "loading the model files" not in shown.text, shown.text


def test_image_answer_stays_on_screen(terminal, stub, picture):
    shown = terminal("send", picture, "-p", "Colour?", "--target", stub.running.address)
    assert shown.code == 0, shown.text
    first = shown.text.splitlines()[0]
    assert first and not first.startswith(("transport", "Warning", "Error")), shown.text


def test_no_stream_answer_stays_on_screen(terminal, stub, red_blue):
    shown = terminal("send", red_blue, "--target", stub.running.address, "--no-stream")
    assert shown.code == 0, shown.text
    assert "red, blue" in shown.text.splitlines()


def test_demo_on_screen(terminal):
    shown = terminal("demo", "--rounds", "1")
    assert shown.code == 0, shown.text
    answer = next(line for line in shown.text.splitlines() if line.startswith("answer"))
    assert answer.split()[1:] == ["red,", "blue", "red,", "blue"]
    assert "set-up, once" in shown.text and "total" in shown.text


def test_preprocess_summary_on_screen(terminal, red_blue):
    shown = terminal("preprocess", red_blue)
    assert shown.code == 0, shown.text
    assert re.search(r"^grid_thw +\[4, 6, 8\]", shown.text, re.M), shown.text
    assert re.search(r"^timestamps +0\.25, 1\.375, 2\.5, 3\.625", shown.text, re.M), shown.text
    assert shown.text.startswith("source "), shown.text  # no bar left above the table


def test_no_color_means_no_colour_codes(terminal, stub, red_blue):
    shown = terminal("send", red_blue, "--target", stub.running.address, env={"NO_COLOR": "1"})
    assert shown.code == 0, shown.text
    assert "red, blue" in shown.text
    assert b"frames" in shown.raw  # the bar ran, uncoloured
    assert _colours(shown.raw) == []


def test_colours_without_no_color(terminal, stub, red_blue):
    shown = terminal("send", red_blue, "--target", stub.running.address)
    assert _colours(shown.raw)  # the check above can fail


def test_piped_output_has_no_escape_codes(stub, red_blue, tmp_path):
    env_cache = {"MMCTL_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "mmctl", "send", red_blue, "--target", stub.running.address],
        capture_output=True,
        env={**os.environ, **env_cache},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"red, blue\n")
    assert b"\x1b" not in done.stdout and b"\x1b" not in done.stderr
