"""`mmctl batch` with sound: OpenAI ``input_audio`` and ``audio_url`` parts and
short-form sound files, beside picture lines, on the local and the Ray engine.

A line with sound is worker-processed as a whole (media_refs); the other lines
keep mmctl's own preprocessing. The stub serves the Gemma 4 fixture folder (its
config names an audio token) and answers each sound with its pitches.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from mmctl.media import synth
from tests.conftest import _stub

GEMMA4 = Path(__file__).resolve().parents[1] / "fixtures" / "families" / "gemma4"


@pytest.fixture(scope="module")
def sound_stub():
    from mmctl.checkpoint.source import from_dir
    from mmctl.models.model import load_any

    s = _stub(load_any(source=from_dir(GEMMA4)))
    yield s
    s.close()


def _user(*content):
    return {"role": "user", "content": list(content)}


@pytest.fixture
def dataset(tmp_path, picture):
    a440 = synth.write_sound(tmp_path / "a440.wav", synth.tones([440], 1.0, 16000), 16000)
    synth.write_sound(tmp_path / "rising.flac", synth.tones([440, 880], 1.0, 16000), 16000)
    (tmp_path / "photo.png").write_bytes(picture.read_bytes())
    (tmp_path / "noise.wav").write_text("not a sound")
    inline = base64.b64encode(a440.read_bytes()).decode()
    text = {"type": "text", "text": "Which pitches?"}
    lines = [
        {"custom_id": "input-audio", "body": {"messages": [_user(
            {"type": "input_audio", "input_audio": {"data": inline, "format": "wav"}}, text)]}},
        {"custom_id": "audio-url", "body": {"messages": [_user(
            {"type": "audio_url", "audio_url": {"url": "rising.flac"}}, text)]}},
        {"id": "short", "prompt": "Which pitches?", "media": ["rising.flac", "a440.wav"]},
        {"id": "picture-and-sound", "media": ["photo.png", "a440.wav"]},
        {"id": "picture", "media": ["photo.png"]},
        {"id": "not-sound", "media": ["noise.wav"]},
        {"custom_id": "bad-input-audio", "body": {"messages": [_user(
            {"type": "input_audio", "input_audio": {"data": "%%%", "format": "wav"}})]}},
    ]  # fmt: skip
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _answers(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        if doc["error"] is None:
            out[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
        else:
            out[doc["custom_id"]] = "error:" + doc["error"]["code"]
    return out


def test_sound_lines_on_both_engines(cli, sound_stub, dataset, tmp_path, no_leaks):
    args = ("-t", sound_stub.running.address, "--model-dir", GEMMA4, "--workers", "1", "--json")
    local, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    res = cli("batch", dataset, "-o", local, *args)
    assert res.code == 7, res.err  # some lines failed: exactly the bad ones
    answers = _answers(local)
    assert answers["input-audio"] == "440 Hz"
    assert answers["audio-url"] == "440 Hz, 880 Hz"
    assert answers["short"] == "440 Hz, 880 Hz; 440 Hz"
    picture_and_sound = answers["picture-and-sound"].split("; ")
    assert picture_and_sound[1] == "440 Hz" and "Hz" not in picture_and_sound[0]
    assert "Hz" not in answers["picture"] and not answers["picture"].startswith("error")
    assert answers["not-sound"] == "error:invalid_input"
    assert answers["bad-input-audio"] == "error:invalid_line"
    res = cli("batch", dataset, "-o", ray_out, "--engine", "ray", *args)
    assert res.code == 7, res.err
    assert _answers(ray_out) == answers
