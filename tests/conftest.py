"""Shared fixtures: the CLI runner, generated media, the built-in model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmctl.cli.app import main
from mmctl.media import synth


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """Run ``mmctl ARGS`` in-process; returns code, stdout, stderr."""

    def run(*argv) -> CliResult:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def red_blue(media_dir) -> Path:
    """2 s red then 2 s blue, 8 fps, 128x96 (4 temporal patches at 2 fps)."""
    return synth.color_clip(media_dir / "red-blue.mp4")


@pytest.fixture(scope="session")
def picture(media_dir) -> Path:
    return synth.write_image(media_dir / "picture.png", synth.pattern_frame(3, 100, 140))


@pytest.fixture(scope="session")
def builtin_model():
    from mmctl.models.model import load_model

    return load_model()
