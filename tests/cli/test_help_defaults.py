"""Every ``[default: …]`` on every help page is what the command really does.

A help page's defaults are a promise scripts rely on. Click's own defaults
(``show_default``) are the parameter's value, which the command receives;
the others are written by hand (``default_text``: "the worker's", "uint8 for
the Qwen families") and can drift from the code. Each one is checked here
against what the library does when the option is left out — by running the
command and reading its ``--json``, or by asking the library — and a default
text this table does not know fails the test, so a new one cannot go
unchecked.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

import click
import pytest
import typer

from mmctl.cli.app import app, main


def _commands(group: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    group = group or typer.main.get_command(app)
    found = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def shown_defaults() -> dict[tuple[str, str], str]:
    """(command, option) → the text of its ``[default: …]``."""
    shown = {}
    for path, command in _commands():
        ctx = click.Context(command, info_name=" ".join(path))
        for param in command.params:
            record = param.get_help_record(ctx)
            if record and (m := re.search(r"\[default: (.*?)\]", record[1], re.S)):
                shown[(" ".join(path), param.opts[0])] = " ".join(m.group(1).split())
    return shown


SHOWN = shown_defaults()


def _literal(command: str, option: str) -> bool:
    """A default click printed from the parameter's own value."""
    for path, cmd in _commands():
        if " ".join(path) == command:
            param = next(p for p in cmd.params if p.opts[0] == option)
            default = param.default
            if isinstance(default, list | tuple):
                default = ",".join(map(str, default))
            if hasattr(default, "value"):
                default = default.value
            text = SHOWN[(command, option)].split(";")[0]  # "3; x>=1": the range follows
            if isinstance(default, int | float) and not isinstance(default, bool):
                try:
                    return float(text) == float(default)
                except ValueError:
                    return False
            return default is not None and str(default) == text
    raise AssertionError(f"no command {command}")


# ---- what the commands do when the option is left out ----


@pytest.fixture(scope="module")
def observed(tmp_path_factory, red_blue) -> dict[str, Any]:
    """One offline build, preprocess and inspect-tokens, each with no options."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("defaults")

    def run(*argv: object) -> dict[str, Any]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main([str(a) for a in argv])
        assert code == 0, argv
        return json.loads(out.getvalue())

    return {
        "build": run("build", red_blue, "-o", tmp / "r.pb", "--json"),
        "preprocess": run("preprocess", red_blue, "--json"),
        "tokens": run("inspect-tokens", red_blue, "--json"),
    }


def _settings(o: dict[str, Any], key: str) -> Any:
    return o["preprocess"]["settings"][key]["value"]


def _request(o: dict[str, Any]) -> dict[str, Any]:
    return o["build"]["request"]


def _worker_default(_: dict[str, Any]) -> bool:
    """Values the worker picks are left out of the request: none are set."""
    return True


def _family(o: dict[str, Any]) -> bool:
    from mmctl.models.model import load_model

    return o["preprocess"]["family"] == "qwen3-vl" and load_model().spec.name == "qwen3-vl"


def _builtin_files(o: dict[str, Any]) -> bool:
    """The offline commands and the stub (which serves ``model_for()``'s files)."""
    from mmctl.offline import model_for

    return (
        o["tokens"]["model"]["source"].startswith("built-in")
        and o["preprocess"]["settings"]["model"].startswith("built-in")
        and model_for().source.label.startswith("built-in")
    )


def _family_settings(model_type: str) -> Any:
    from pathlib import Path

    from mmctl.models.model import load_model

    folder = Path(__file__).resolve().parents[1] / "fixtures" / "families" / model_type
    return load_model(model_dir=folder).params


def _target(_: dict[str, Any]) -> bool:
    import os

    from mmctl import settings

    saved = os.environ.pop(settings.TARGET, None)
    try:
        return settings.target() == "localhost:50051"
    finally:
        if saved is not None:
            os.environ[settings.TARGET] = saved


def _stub_normalizes(_: dict[str, Any]) -> bool:
    from mmctl.models.model import load_model
    from mmctl.worker.checks import normalizes_by_default

    return normalizes_by_default(load_model().spec)


def _no_recording(_: dict[str, Any]) -> bool:
    import dataclasses

    from mmctl.worker.handlers import StubConfig

    record = next(f for f in dataclasses.fields(StubConfig) if f.name == "record_dir")
    return record.default is None


def _cores(_: dict[str, Any]) -> bool:
    import inspect
    import os

    from mmctl.run_batch import api

    source = inspect.getsource(api)
    return "os.cpu_count()" in source and (os.cpu_count() or 1) >= 1


def _cores_or_the_clusters(observed: dict[str, Any]) -> object:
    from mmctl.run_batch.ray_plan import plan

    return _cores(observed) and plan(6, 2, None, 8).preprocess_tasks == 6


def _ray_address(observed: dict[str, Any]) -> object:
    from mmctl.run_batch.ray_connect import address_wanted

    saved = os.environ.pop("RAY_ADDRESS", None)
    try:
        empty = address_wanted(None)
        os.environ["RAY_ADDRESS"] = "ray://127.0.0.1:10001"
        return empty is None and address_wanted(None) == "ray://127.0.0.1:10001"
    finally:
        os.environ.pop("RAY_ADDRESS", None)
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


def _offline_pixels_of_the_other_families() -> set[str]:
    from mmctl.client.negotiate import choose_pixels
    from mmctl.models import registry

    others = [f for f in registry.FAMILIES if not f.processor.device_normalize]
    assert others
    return {choose_pixels(None, None, family=f).format.value for f in others}


def _bench_transports() -> bool:
    from mmctl.bench.runner import arm_transports
    from mmctl.choices import Transport

    both = (Transport.INLINE, Transport.SHM)
    return arm_transports(None, False) == both and arm_transports(None, True) == both[:1]


#: (option, shown text) → a check of what the command does without the option.
TRUTH: dict[tuple[str, str], Callable[[dict[str, Any]], object]] = {
    (
        "--pixel-dtype",
        "a default vLLM worker's for the family: uint8 for qwen3-vl, qwen3.5, qwen2.5-vl, glm4v "
        "and glm5-next, else float32",
    ): (
        lambda o: (
            o["build"]["decisions"]["pixel_dtype"]["value"] == "uint8"
            and o["preprocess"]["pixel_format"] == "uint8"
            and _offline_pixels_of_the_other_families() == {"float32"}
        )
    ),
    ("--prompt", '"Describe this."'): lambda o: "Describe this." in _request(o)["original_text"],
    ("--max-tokens", "128"): lambda o: _request(o)["sampling_params"]["max_tokens"] == 128,
    ("--stream", "--stream"): lambda o: _request(o)["stream"] is True,
    ("--request-id", "mmctl-<random>"): lambda o: _request(o)["request_id"].startswith("mmctl-"),
    ("--chat", "--chat"): lambda o: _request(o)["original_text"].startswith("<|im_start|>user"),
    ("--layout", "vllm"): lambda o: o["build"]["layout"] == o["tokens"]["layout"] == "vllm",
    ("--fps", "the model's (2); gemma4: none"): lambda o: (
        _settings(o, "fps") == 2 and _family_settings("gemma4").sample_fps < 0
    ),
    ("--min-frames", "the model's (4)"): lambda o: _settings(o, "min_frames") == 4,
    ("--max-frames", "the model's (768)"): lambda o: _settings(o, "max_frames") == 768,
    (
        "--num-frames",
        "from --fps; llava-onevision, gemma4, internvl and nemotron-omni: the model's (32)",
    ): (
        lambda o: (
            o["preprocess"]["frames"]["sampled_fps"] == 2
            and _family_settings("llava_onevision").num_frames == 32
            and _family_settings("gemma4").num_frames == 32
            and _family_settings("internvl").num_frames == 32
            and _family_settings("nemotron_h_omni").num_frames == 32
        )
    ),
    ("--min-pixels", "the model's"): lambda o: _settings(o, "video_min_pixels") == 4096,
    ("--max-pixels", "the model's"): lambda o: _settings(o, "video_max_pixels") == 25165824,
    ("--family", "from config.json, else qwen3-vl"): _family,
    ("--model-dir", "the built-in Qwen3-VL set"): _builtin_files,
    ("--model-dir", "the worker's with --target, else the built-in Qwen3-VL set"): (
        lambda o: o["build"]["model"]["source"].startswith("built-in")
    ),
    ("--system", "the family's, if any"): lambda o: (
        "<|im_start|>system" not in (_request(o)["original_text"])
    ),
    ("--temperature", "the worker's"): lambda o: (
        "temperature" not in (_request(o)["sampling_params"])
    ),
    ("--top-p", "the worker's"): lambda o: "top_p" not in _request(o)["sampling_params"],
    ("--top-k", "the worker's"): lambda o: "top_k" not in _request(o)["sampling_params"],
    ("--seed", "none"): lambda o: "seed" not in _request(o)["sampling_params"],
    ("--stop", "none"): lambda o: "stop" not in _request(o)["sampling_params"],
    ("--header", "none"): _worker_default,
    ("--mm-item-limits", "no limit"): lambda o: o["build"]["check"]["ok"],
    ("--target", "$MMCTL_TARGET, else localhost:50051"): _target,
    ("--target", "none: a default vLLM worker"): lambda o: o["build"]["target"] is None,
    ("--pixel-dtype", "what the worker expects (see `mmctl info`)"): _worker_default,
    ("--pixel-dtype", "what the worker expects"): _worker_default,
    (
        "--device-normalize",
        "as a default `vllm serve MODEL --grpc` for the family: on for qwen3-vl, qwen3.5, "
        "qwen2.5-vl, glm4v and glm5-next",
    ): _stub_normalizes,
    ("--allowed-local-media-path", "none"): _worker_default,
    ("--shm-allowed-uid", "own uid"): _worker_default,
    ("--tls-cert", "plain text"): _worker_default,
    ("--record", "off"): _no_recording,
    ("--workers", "the cores; on a Ray cluster, its CPUs"): _cores_or_the_clusters,
    ("--ray-address", "$RAY_ADDRESS, else a local instance with --workers CPUs"): _ray_address,
    ("--timeout", "none"): _worker_default,
    ("--transport", "inline,shm; inline alone with worker processing"): (
        lambda o: _bench_transports()
    ),
}
#: Texts that describe a choice made at run time from the worker's answers:
#: their behaviour is tested where the choice is made (negotiation, timeouts).
DESCRIBED = re.compile(r"none for Generate|the worker's|what the worker expects")


@pytest.mark.parametrize(("where", "text"), sorted(SHOWN.items()), ids=lambda v: str(v))
def test_every_shown_default_is_checked_and_true(where, text, observed):
    command, option = where
    if _literal(command, option):
        return  # click printed the parameter's own value, which the command receives
    check = TRUTH.get((option, text))
    if check is None and DESCRIBED.search(text):
        return
    assert check is not None, (
        f"`mmctl {command} --help` shows {option} [default: {text}]: unchecked"
    )
    assert check(observed), f"`mmctl {command} --help`: {option} [default: {text}] is not true"


def test_the_table_has_no_stale_rows():
    texts = {(option, text) for (_, option), text in SHOWN.items()}
    assert set(TRUTH) <= texts, sorted(set(TRUTH) - texts)


# ---- the families a help text names are the families it is true of (issue 44) ----


def _named(text: str) -> set[str]:
    """The canonical family names a help text names ("the Qwen families": every qwen*)."""
    from mmctl.models import registry

    names = {f.name for f in registry.FAMILIES}
    said = {w for w in re.findall(r"[a-z0-9][a-z0-9._-]*[a-z0-9]", text.lower()) if w in names}
    if re.search(r"\bQwen\b", text):
        said |= {n for n in names if n.startswith("qwen")}
    return said


def _help(command: str, option: str) -> str:
    for path, cmd in _commands():
        if " ".join(path) == command:
            ctx = click.Context(cmd, info_name=command)
            param = next(p for p in cmd.params if option in p.opts)
            return " ".join(param.get_help_record(ctx)[1].split())
    raise AssertionError(command)


def _taking(flag: str) -> set[str]:
    """The families whose settings take ``--flag``."""
    from mmctl.errors import MmctlError
    from mmctl.models import registry
    from mmctl.models.settings import VisionOverrides

    taking = set()
    for family in registry.FAMILIES:
        try:
            family.settings().overridden(VisionOverrides(**{flag: 65536}))
        except MmctlError:
            continue
        taking.add(family.name)
    return taking


def test_the_families_named_in_help_are_those_it_is_true_of():
    from mmctl.models import registry

    normalizing = {f.name for f in registry.FAMILIES if f.processor.device_normalize}
    assert "glm4v" in normalizing
    assert _named(_help("stub-worker", "--device-normalize").split("[default:")[1]) == normalizing
    assert _named(_help("preprocess", "--pixel-dtype").split("[default:")[1]) == normalizing
    for flag in ("min_pixels", "max_pixels"):
        option = "--" + flag.replace("_", "-")
        assert _named(_help("send", option).split("[default:")[0]) == _taking(flag), option
    fixed = {
        f.name for f in registry.FAMILIES if f.settings().settings().get("num_frames") is not None
    }
    assert _named(_help("send", "--num-frames").split("[default:")[1]) == fixed
