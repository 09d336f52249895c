"""``mmctl build``'s requests for the LLaVA families, Llama 4, GLM-4.1V/4.6V, GLM-5-Next, Gemma 4, Qwen3.5, InternVL, Qwen3-Omni, MiniMax-M3-VL and Inkling against the goldens.

Each golden (``scripts/make_family_fixtures.py``: transformers 5.20.2's fast
processors, vLLM 0.33's expansion; ``scripts/families/vllm_check.py`` ran vLLM's
own processor on all of them) is rebuilt through mmctl's request path —
the family chosen from the folder's ``config.json`` — and the request must
carry the golden's prompt ids and every tensor bit for bit: float32 pixels
as HF batches them, ``image_sizes``, ``aspect_ratios``, ``patches_per_image``, the grids,
Gemma 4's patch positions and frame counts,
with one placeholder per item covering exactly its embedding tokens. Goldens of a
family whose default worker normalizes on the device (Qwen3.5) hold the raw pixels
too (``<key>_raw``): uint8 requests are checked against those, float32 ones against
the normalized values.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mmctl.checkpoint.source import ModelSource
from mmctl.choices import PixelFormat
from mmctl.models.model import load_model
from mmctl.request import tensors
from mmctl.request.compose import compose
from mmctl.request.view import read_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAMILIES = FIXTURES / "families"
THINKING_TEMPLATE = (
    FIXTURES.parents[1] / "scripts" / "families" / "qwen3_5_thinking_chat_template.jinja"
)
MODEL_TYPES = (
    "llava",
    "llava_next",
    "llama4",
    "llava_onevision",
    "glm4v",
    "glm46v",
    "glm5_next",
    "gemma4",
    "qwen3_5",
    "internvl",
    "minimax_m3_vl",
    "inkling",
    "qwen3_omni_moe",
)
# The families mmctl serves; goldens of families still being wired wait.
GOLDENS = sorted(
    p for p in (FAMILIES / "goldens").glob("*.npz") if p.stem.split("-", 1)[0] in MODEL_TYPES
)


def _raw_keys(golden: Path) -> set[str]:
    """The tensors a golden also holds raw (uint8, before normalization)."""
    with np.load(golden) as data:
        return {k.removesuffix("_raw_sha256") for k in data.files if k.endswith("_raw_sha256")}


#: Each golden as float32 pixels, and as the raw uint8 a device-normalizing worker takes
#: where the golden holds them.
REQUESTS = [(g, PixelFormat.FLOAT32) for g in GOLDENS] + [
    (g, PixelFormat.UINT8) for g in GOLDENS if _raw_keys(g)
]
#: Per golden tensor: the batch (by modality) and key it travels under.
WIRE = {
    "pixel_values": ("IMAGE", "pixel_values"),
    "image_sizes": ("IMAGE", "image_sizes"),
    "pixel_values_videos": ("VIDEO", "pixel_values"),
    "image_grid_thw": ("IMAGE", "image_grid_thw"),
    "video_grid_thw": ("VIDEO", "video_grid_thw"),
    "pixel_position_ids": ("IMAGE", "pixel_position_ids"),
    "pixel_position_ids_videos": ("VIDEO", "pixel_position_ids_videos"),
    "video_frame_counts": ("VIDEO", "video_frame_counts"),
    "num_patches": ("IMAGE", "num_patches"),
    "second_per_grid_ts": ("VIDEO", "second_per_grid_ts"),
}
#: Per golden tensor held whole (InternVL's): the batch and key it travels under.
WHOLE = {
    "image_num_patches": ("IMAGE", "image_num_patches"),
    "video_num_patches": ("VIDEO", "video_num_patches"),
    "image_token_id": ("IMAGE", "image_token_id"),
    "video_token_id": ("VIDEO", "video_token_id"),
}


def _record(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def _family(golden: Path) -> str:
    return golden.stem.split("-", 1)[0]


def _model(golden: Path, models: dict):
    return models.get(golden.stem) or models[_family(golden)]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    loaded = {t: load_model(model_dir=FAMILIES / t) for t in MODEL_TYPES}
    # Qwen3.5's 4B-and-larger checkpoints: the same files but the template, which
    # leaves "<think>\n" open (the golden "qwen3_5-thinking_template").
    template = tmp_path_factory.mktemp("thinking")
    shutil.copy(THINKING_TEMPLATE, template / "chat_template.jinja")
    source = ModelSource("Qwen3.5-4B", (template, FAMILIES / "qwen3_5"))
    loaded["qwen3_5-thinking_template"] = load_model(source=source)
    return loaded


def test_every_family_has_goldens():
    assert {_family(g) for g in GOLDENS} == set(MODEL_TYPES)
    assert len(GOLDENS) == 250
    assert len(REQUESTS) == 274  # Qwen3.5's 24 twice


def test_the_family_comes_from_config_json(models):
    names = {t: models[t].spec.name for t in MODEL_TYPES}
    assert names == {
        "llava": "llava",
        "llava_next": "llava-next",
        "llama4": "llama4",
        "llava_onevision": "llava-onevision",
        # vLLM's processor class, not the model type, picks GLM's processing.
        "glm4v": "glm4v",
        "glm46v": "glm4v",
        "glm5_next": "glm5-next",
        "gemma4": "gemma4",
        "internvl": "internvl",
        "minimax_m3_vl": "minimax-m3-vl",
        "inkling": "inkling",
        # Qwen3-VL's processing under its own name, with its folder's ids.
        "qwen3_5": "qwen3.5",
        # Qwen2.5-VL's parts, its own video budget, its ids from the tokenizer.
        "qwen3_omni_moe": "qwen3-omni",
    }
    assert models["qwen3_5"].token_ids.as_dict() == {
        "vision_start_token_id": 248053,
        "vision_end_token_id": 248054,
        "image_token_id": 248056,
        "video_token_id": 248057,
    }
    variants = {t: models[t].params.variant for t in ("glm4v", "glm46v")}
    assert variants == {"glm4v": "glm4v", "glm46v": "glm46v"}


@pytest.mark.parametrize(
    ("golden", "fmt"), REQUESTS, ids=[f"{g.stem}-{f.value}" for g, f in REQUESTS]
)
def test_request_equals_the_golden(golden, fmt, models):
    record = _record(golden)
    model = _model(golden, models)
    media = [FIXTURES / "media" / name for name in record["media"].tolist()]
    composed = compose(media, str(record["prompt"]), model, pixel_format=fmt)
    req = composed.plan.to_proto()
    assert composed.rendered.text == str(record["text"])
    assert list(req.tokenized.input_ids) == record["vllm_input_ids"].tolist()
    assert composed.check.ok, composed.check.reason

    batches = {b.modality: b for b in [req.mm_inputs, *req.extra_mm_inputs]}
    names = {1: "IMAGE", 3: "VIDEO"}
    by_kind = {names[m]: b for m, b in batches.items()}
    raw = _raw_keys(golden) if fmt is PixelFormat.UINT8 else set()
    for key, (kind, wire_key) in WIRE.items():
        if f"{key}_sha256" not in record:
            continue
        batch = by_kind[kind]
        td = batch.pixel_values if wire_key == "pixel_values" else batch.model_specific_tensors[key]
        name = f"{key}_raw" if key in raw else key
        assert list(td.shape) == record[f"{name}_shape"].tolist(), name
        assert td.dtype == str(record[f"{name}_dtype"]), name
        assert hashlib.sha256(td.inline).hexdigest() == str(record[f"{name}_sha256"]), name
    if "VIDEO" in by_kind and {"video_grid_thw_sha256", "video0_timestamps"} <= set(record):
        # Qwen3-VL's per-video times, sent where the batch's videos share t (Gemma 4's
        # frame times travel in the prompt, not as a tensor).
        video = by_kind["VIDEO"]
        sent = video.model_specific_tensors.get("timestamps")
        want = [record[f"video{n}_timestamps"] for n in range(len(video.mm_placeholders))]
        if len({len(w) for w in want}) == 1:
            assert sent is not None
            got = tensors.from_bytes(sent.inline, sent.shape, sent.dtype)
            assert np.array_equal(got, np.asarray(want, dtype=np.float32))
        else:
            assert sent is None
    for key, (kind, wire_key) in WHOLE.items():
        if key not in record:
            continue
        td = by_kind[kind].model_specific_tensors[wire_key]
        got = tensors.from_bytes(td.inline, td.shape, td.dtype)
        # vLLM's token ids are 0-d, which the wire cannot carry: [1] on the wire.
        assert got.reshape(record[key].shape).tolist() == record[key].tolist(), key
        assert td.dtype == "int64", key
    for kind in ("IMAGE", "VIDEO"):  # the spans vLLM's processor reports (InternVL's)
        if f"{kind.lower()}_placeholders" in record:
            spans = [[p.offset, p.length] for p in by_kind[kind].mm_placeholders]
            assert spans == record[f"{kind.lower()}_placeholders"].tolist(), kind
    if "aspect_ratios" in record:
        image = by_kind["IMAGE"]
        for key in ("aspect_ratios", "patches_per_image"):
            td = image.model_specific_tensors[key]
            got = tensors.from_bytes(td.inline, td.shape, td.dtype)
            assert got.tolist() == record[key].tolist(), key
        assert image.flat_keys["pixel_values"] == "patches_per_image"

    ids = np.asarray(req.tokenized.input_ids)
    embeds = 0
    for batch, item_kind in ((b, names[m]) for m, b in batches.items()):
        want = [it.pre.num_tokens for it in composed.items if it.kind.value.upper() == item_kind]
        got = [
            int(np.count_nonzero(ids[p.offset : p.offset + p.length] == batch.im_token_id))
            for p in batch.mm_placeholders
        ]
        assert got == want  # one placeholder per item, covering its embedding tokens
        embeds += sum(got)
    # Every embedding token of the prompt lies in one of the spans (GLM's two
    # batches share one: a video's frames are <|image|> runs).
    tokens = {b.im_token_id for b in batches.values()}
    assert embeds == int(np.count_nonzero(np.isin(ids, list(tokens))))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_mmctl_build_writes_the_request(model_type, tmp_path, models):
    """The command as a script runs it: the family from the folder, float32 pixels."""
    golden = _record(FAMILIES / "goldens" / f"{model_type}-image-rgb_odd.npz")
    out = tmp_path / "req.pb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mmctl",
            "build",
            str(FIXTURES / "media" / "rgb_odd.png"),
            "-p",
            "Describe what you see.",
            "--model-dir",
            str(FAMILIES / model_type),
            "-o",
            str(out),
            "--pixel-dtype",
            "float32",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["check"]["ok"] is True
    req = read_request(out)
    assert list(req.tokenized.input_ids) == golden["vllm_input_ids"].tolist()
    assert hashlib.sha256(req.mm_inputs.pixel_values.inline).hexdigest() == str(
        golden["pixel_values_sha256"]
    )
    # The written file read back by the family: its layout passes vLLM's check.
    check = subprocess.run(
        [sys.executable, "-m", "mmctl", "inspect-tokens", "--request", str(out), "--model-dir",
         str(FAMILIES / model_type), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    name = models[model_type].spec.prompt.check_name
    assert report["check"] == {**report["check"], "ok": True, "name": name}
    assert [i["num_tokens"] for i in report["items"]] == [doc["items"][0]["num_tokens"]]


def test_mmctl_preprocess_saves_a_onevision_video_as_the_golden(tmp_path):
    golden = _record(FAMILIES / "goldens" / "llava_onevision-video-odd_count.npz")
    out = tmp_path / "video.npz"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mmctl",
            "preprocess",
            str(FIXTURES / "media" / "odd_count.mp4"),
            "--model-dir",
            str(FAMILIES / "llava_onevision"),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["family"] == "llava-onevision" and doc["grid_thw"] is None
    assert doc["frames"]["indices"] == golden["video0_indices"].tolist()
    with np.load(out) as saved:
        pixels = np.ascontiguousarray(saved["pixel_values"][None])  # HF's [1, frames, 3, S, S]
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == str(golden["pixel_values_videos_sha256"])


def test_mmctl_build_gives_a_qwen3_5_video_raw_pixels_by_default(tmp_path):
    """No --pixel-dtype: a default Qwen3.5 worker normalizes on the device, so the
    request carries the uint8 patches (the golden's ``_raw``), its ids from the folder."""
    golden = _record(FAMILIES / "goldens" / "qwen3_5-video-odd_count.npz")
    out = tmp_path / "req.pb"
    done = subprocess.run(
        [sys.executable, "-m", "mmctl", "build", str(FIXTURES / "media" / "odd_count.mp4"),
         "-p", str(golden["prompt"]), "--model-dir", str(FAMILIES / "qwen3_5"), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    req = read_request(out)
    assert list(req.tokenized.input_ids) == golden["vllm_input_ids"].tolist()
    td = req.mm_inputs.pixel_values
    assert td.dtype == "uint8"
    assert hashlib.sha256(td.inline).hexdigest() == str(golden["pixel_values_videos_raw_sha256"])
    assert req.mm_inputs.im_token_id == 248057  # <|video_pad|>: only the pads take embeddings
