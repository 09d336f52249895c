"""``--json`` as a public interface (issue 44): every document names its schema
and version, every schema is a file in ``mmctl/schemas/`` (shipped with the
package), every command's document validates against it, and a failure in
``--json`` mode prints an error document on stdout too.

Every ``cli(…, "--json")`` of the suite is validated as well
(``tests/conftest.py``: ``check_documents``); the tests below make sure each
command is run at least once, and that a schema can fail.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from mmctl import schemas
from tests.conftest import check_documents, validator

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def test_every_document_has_its_schema_file_and_nothing_else():
    files = {p.stem for p in (ROOT / "mmctl" / "schemas").glob("*.json")}
    assert files == set(schemas.VERSIONS)
    for name in schemas.VERSIONS:
        schema = schemas.load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == f"urn:mmctl:schema:{name}", name
        assert schema["properties"]["schema"] == {"const": schemas.schema_id(name)}
        assert schema["required"][0] == "schema" and schema["type"] == "object"
        assert schema.get("title") and schema.get("description"), name


def test_the_schemas_ship_with_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["package-data"]["mmctl.schemas"] == ["*.json"]


def test_preprocess_is_version_2_and_says_why_in_the_changelog(cli, red_blue):
    doc = cli("preprocess", red_blue, "--json").json()
    assert doc["schema"] == "mmctl.preprocess/2"
    assert "video_budget" not in doc["params"] and "video_max_pixels" in doc["params"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "mmctl.preprocess/2" in changelog and "params.video_budget" in changelog


def test_a_renamed_or_removed_key_fails_validation(cli, stub, red_blue):
    doc = check_documents(cli("send", red_blue, "-t", stub.running.address, "--json").out)[0]
    for change in ("rename", "remove"):
        broken = copy.deepcopy(doc)
        answer = broken.pop("answer")
        if change == "rename":
            broken["text"] = answer
        with pytest.raises(jsonschema.ValidationError, match="'answer' is a required property"):
            validator(doc["schema"]).validate(broken)
    nested = copy.deepcopy(doc)
    del nested["timings_s"]["ttft_s"]
    with pytest.raises(jsonschema.ValidationError):
        validator(doc["schema"]).validate(nested)


def _one(cli, *argv) -> dict:
    r = cli(*argv, "--json")
    assert r.code in (0, 7), r.err
    (doc,) = check_documents(r.out)
    return doc


def test_every_command_prints_a_valid_document(cli, stub, red_blue, picture, tmp_path):
    target = stub.running.address
    seen = set()
    for media in (red_blue, picture):
        seen.add(_one(cli, "preprocess", media)["schema"])
        seen.add(_one(cli, "inspect-tokens", media, "--ids")["schema"])
        seen.add(_one(cli, "build", media, "-o", tmp_path / "offline.pb")["schema"])
        _one(cli, "build", media, "-o", tmp_path / "worker.pb", "-t", target)
        seen.add(_one(cli, "send", media, "-t", target)["schema"])
    for family in ("gemma4", "internvl", "llama4", "llava_onevision", "glm4v"):
        folder = FIXTURES / "families" / family
        for media in (FIXTURES / "media" / "tok64.mp4", picture):
            if family == "llama4" and media != picture:
                continue
            _one(cli, "preprocess", media, "--model-dir", folder)
            _one(cli, "inspect-tokens", media, "--model-dir", folder)
            _one(cli, "build", media, "-o", tmp_path / "f.pb", "--model-dir", folder)
    # sound: a worker-processed request, and its layout as the worker will make it
    from mmctl.media import synth

    tone = synth.write_sound(tmp_path / "tone.wav", synth.tones([440], 0.5, 16000), 16000)
    gemma4 = FIXTURES / "families" / "gemma4"
    seen.add(_one(cli, "inspect-tokens", tone, picture, "--model-dir", gemma4)["schema"])
    seen.add(_one(cli, "build", tone, "-o", tmp_path / "s.pb", "--model-dir", gemma4)["schema"])
    _one(cli, "inspect-tokens", "--request", tmp_path / "worker.pb")
    _one(cli, "inspect-tokens", red_blue, "--diff", "vllm,hf-legacy")
    _one(cli, "send", "--request", tmp_path / "worker.pb", "-t", target, "--shm")
    seen.add(_one(cli, "send", red_blue, "-t", target, "--compare-processing")["schema"])
    seen.add(_one(cli, "health", "-t", target)["schema"])
    seen.add(_one(cli, "info", "-t", target)["schema"])
    seen.add(_one(cli, "shm", "gc", "--dry-run")["schema"])
    seen.add(_one(cli, "demo", "--rounds", "1")["schema"])
    seen.add(_one(cli, "bench", "-t", target, "--sizes", "1MB", "--num-prompts", "2",
                  "--no-floors")["schema"])  # fmt: skip
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "media": [str(red_blue)]}) + "\n"
                    + json.dumps({"id": "b", "media": ["nowhere.mp4"]}) + "\n")  # fmt: skip
    seen.add(_one(cli, "batch", data, "-o", tmp_path / "out.jsonl", "-t", target,
                  "--workers", "1")["schema"])  # fmt: skip
    seen.add(check_documents(cli("send", "nowhere.mp4", "--json").out)[0]["schema"])
    ready = subprocess.Popen([sys.executable, "-m", "mmctl", "stub-worker", "--port", "0",
                              "--json"], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = ready.stdout.readline()
    finally:
        ready.terminate()
        ready.wait(30)
    seen.add(check_documents(line)[0]["schema"])
    assert seen == {schemas.schema_id(name) for name in schemas.VERSIONS}


@pytest.mark.parametrize(
    ("argv", "code", "kind"),
    [
        (["send", "nowhere.mp4"], 3, "bad_input"),
        (["send", "CLIP", "--bogus"], 2, "usage"),
        (["send", "CLIP", "-t", "127.0.0.1:1", "--timeout", "2"], 5, "unavailable"),
        (["shm", "gc", "--bogus"], 2, "usage"),
        (["preprocess", "CLIP", "--fps", "0"], 2, "usage"),
    ],
)
def test_a_failure_in_json_mode_prints_one_error_document(cli, red_blue, argv, code, kind):
    # Issue 44: `send --json` printed nothing on stdout when it failed.
    argv = [str(red_blue) if a == "CLIP" else a for a in argv]
    r = cli(*argv, "--json")
    assert r.code == code, r.err
    (doc,) = check_documents(r.out)
    assert doc["schema"] == "mmctl.error/1" and doc["exit_code"] == code
    assert doc["command"] == ("shm gc" if argv[0] == "shm" else argv[0])
    assert doc["error"]["kind"] == kind
    assert r.err.startswith("Error: " + doc["error"]["message"])


def test_a_command_that_printed_its_document_prints_no_error_document(cli):
    r = cli("health", "-t", "127.0.0.1:1", "--timeout", "1", "--json")
    assert r.code == 5
    (doc,) = check_documents(r.out)
    assert doc["schema"] == "mmctl.health/1" and doc["healthy"] is False


def test_without_json_stdout_stays_empty_on_failure(cli):
    r = cli("send", "nowhere.mp4")
    assert r.code == 3 and r.out == ""
