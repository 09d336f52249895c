"""Nemotron-3-Nano-Omni: mmctl's functions against every golden vLLM's own processor made.

The ``nemotron_h_omni-*`` goldens of tests/fixtures/families/goldens/ are vLLM's
``NanoNemotronVLMultiModalProcessor`` applied to the committed media
(scripts/make_family_fixtures.py --only nemotron_h_omni). Here mmctl loads the same media
with its own loaders, and its grids, pixels (bfloat16 bits), frame stamps, prompt ids and
placeholder ranges must equal vLLM's bit for bit. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mmctl.checkpoint.source import from_dir
from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.probe import MediaKind
from mmctl.media.video import decode_sampled
from mmctl.models import nemotron_h_omni as nemo
from mmctl.models.llava_onevision import sample_indices
from mmctl.models.model import WorkerModel, load_any
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.request.refs import refs_plan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FOLDER = FIXTURES / "families" / "nemotron_h_omni"
MEDIA = FIXTURES / "media"
ALL = sorted((FIXTURES / "families" / "goldens").glob("nemotron_h_omni-*.npz"))
PRUNED = [g for g in ALL if "-pruned-" in g.name]
GOLDENS = [g for g in ALL if g not in PRUNED]
SETTINGS = nemo.OmniVision.from_config(json.loads((FOLDER / "config.json").read_text()))


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.load(from_dir(FOLDER))


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _frames(path: Path) -> tuple[np.ndarray, np.ndarray, float]:
    frames: dict[int, np.ndarray] = {}

    def sink(position: int, rgb: np.ndarray) -> None:
        frames[position] = rgb

    info, indices = decode_sampled(path, lambda total, fps: sample_indices(total), sink)
    return np.stack([frames[i] for i in range(len(indices))]), indices, info.source_fps


def test_the_published_folder_gives_the_published_settings() -> None:
    assert nemo.OmniVision() == SETTINGS
    assert len(GOLDENS) == 25 and len(PRUNED) == 2
    assert {str(_golden(g)["max_model_len"]) for g in GOLDENS} == {str(SETTINGS.max_model_len)}


def test_the_tokens_are_the_checkpoints(tokenizer: Tokenizer) -> None:
    assert nemo.Tokens.from_vocab(tokenizer.token_to_id) == nemo.Tokens()
    # <video> is not one token: vLLM matches its pieces, or falls back to text.
    assert len(tokenizer.encode(nemo.VIDEO)) == 3


@pytest.mark.parametrize("golden", GOLDENS + PRUNED, ids=[g.stem for g in GOLDENS + PRUNED])
def test_mmctl_equals_vllm(golden: Path, tokenizer: Tokenizer) -> None:
    record = _golden(golden)
    images: list[np.ndarray] = []
    videos: list[tuple[np.ndarray, np.ndarray, float]] = []
    kinds: list[str] = []
    for name in record["media"].tolist():
        path = MEDIA / str(name)
        if path.suffix in (".png", ".jpg"):
            images.append(load_image(path)[1])
            kinds.append("image")
        else:
            videos.append(_frames(path))
            kinds.append("video")
    # Images: one processor call holds every image (and the videos' "<video>" text).
    text = len(tokenizer.encode(nemo.VIDEO * len(videos))) if videos else 0
    grids = nemo.image_grids([im.shape[:2] for im in images], text, SETTINGS)
    if images:
        sizes = [[gh * 16, gw * 16] for gh, gw in grids]
        assert sizes == record["imgs_sizes"].tolist()
        counts = [nemo.tokens_of(g) for g in grids]
        assert counts == record["num_tokens_per_image"].tolist()
    for n, (rgb, grid) in enumerate(zip(images, grids, strict=True)):
        bits = nemo.image_pixels(rgb, grid, SETTINGS)
        assert list(bits.shape) == record[f"image{n}_pixels_shape"].tolist()
        assert _sha(bits) == str(record[f"image{n}_pixels_sha256"]), f"image {n} pixels"
    repls: list[list[int]] = []
    image_n = video_n = 0
    for kind in kinds:
        if kind == "image":
            repls.append(nemo.image_token_ids(nemo.tokens_of(grids[image_n])))
            image_n += 1
            continue
        frames, indices, fps = videos[video_n]
        assert indices.tolist() == record[f"video{video_n}_indices"].tolist()
        assert fps == float(record[f"video{video_n}_fps"])
        assert _sha(frames) == str(record[f"video{video_n}_frames_sha256"])
        duration = nemo.frame_duration_ms(fps)
        assert duration == int(record["frame_duration_ms"][video_n])
        bits = nemo.video_pixels(frames, SETTINGS)
        assert list(bits.shape) == record[f"video{video_n}_pixels_shape"].tolist()
        assert _sha(bits) == str(record[f"video{video_n}_pixels_sha256"]), "video pixels"
        per = nemo.tokens_of(nemo.video_grid(*frames.shape[1:3], SETTINGS))
        seps = nemo.frame_separators(indices.tolist(), duration, SETTINGS.video_temporal_patch_size)
        rate = float(record.get("video_pruning_rate", 0.0))
        counts = nemo.tubelet_tokens(per, len(seps), rate)
        repls.append(nemo.video_token_ids(seps, counts, tokenizer.encode))
        video_n += 1
    items = list(zip(kinds, repls, strict=True))
    ids, spans = nemo.expand(
        record["template_ids"].tolist(), items, tokenizer.encode, tokenizer.decode
    )
    assert ids == record["vllm_input_ids"].tolist()
    for kind in ("image", "video"):
        got = [[s.offset, s.length] for s, (k, _) in zip(spans, items, strict=True) if k == kind]
        want = record[f"{kind}_placeholders"].tolist() if f"{kind}_placeholders" in record else []
        assert got == want
    embeds = [sum(1 for t in repl if t == nemo.Tokens().context) for _, repl in items]
    assert [e for e, (k, _) in zip(embeds, items, strict=True) if k == "image"] == (
        record["image_embeds"].tolist() if "image_embeds" in record else []
    )


def test_the_budget_binds_when_max_model_len_is_small() -> None:
    # 2 images of 1600x1600 px (10000 patches each) in 5000 tokens: vLLM scales both down.
    small = nemo.OmniVision(max_model_len=5004)
    grids = nemo.image_grids([(1600, 1600), (1600, 1600)], 0, small)
    assert sum(h * w for h, w in grids) <= 20000
    assert all(h % 2 == 0 and w % 2 == 0 for h, w in grids)
    assert nemo.image_grids([(1600, 1600)], 0) == [(100, 100)]


def test_separators_pair_frames_into_tubelets() -> None:
    seps = nemo.frame_separators([0, 15, 30], 33, 2)
    assert seps == [
        "Frame 1 sampled at 0.00 seconds and frame 2 sampled at 0.49 seconds: ",
        "\nFrame 3 sampled at 0.99 seconds: ",
    ]


def test_a_config_without_dynamic_resolution_is_refused() -> None:
    config = json.loads((FOLDER / "config.json").read_text())
    del config["vision_config"]["args"]
    with pytest.raises(InputError, match="min_num_patches"):
        nemo.OmniVision.from_config(config)


RESIZES = FIXTURES / "resize" / "nemotron_h_omni_float_aa.npz"


def test_the_resize_is_torchs_bit_for_bit_shrinking_too() -> None:
    """torch's float32 antialiased bicubic (make_family_fixtures.py --only nemotron_h_omni):
    enlarging, shrinking, mixed and many-tap passes."""
    record = _golden(RESIZES)
    cases = sorted({k.split("_")[0] for k in record if k.startswith("case")})
    assert len(cases) == 6
    for case in cases:
        rgb = record[f"{case}_input"]
        height, width = record[f"{case}_output_shape"].tolist()[1:]
        got = nemo.resize_bicubic_aa(rgb, height, width)
        assert list(got.shape) == record[f"{case}_output_shape"].tolist()
        assert _sha(got) == str(record[f"{case}_output_sha256"]), case


def test_a_request_with_an_image_goes_to_the_worker_whole() -> None:
    """The family preprocesses video; vLLM 0.33's model refuses preprocessed images
    (nemotron_h_omni.md, "Over the gRPC wire"), so a request carrying an image is
    worker-processed as a whole — its video too — with the folder's own template
    writing the media, and the reason said."""
    from mmctl.request.refs import by_worker

    model = load_any(source=from_dir(FOLDER))
    assert not isinstance(model, WorkerModel)
    assert model.spec.name == "nemotron-omni"
    assert by_worker([MediaKind.VIDEO], model.spec) is None
    assert by_worker([MediaKind.VIDEO, MediaKind.IMAGE], model.spec) == nemo.IMAGES_BY_WORKER
    refs = [(MediaKind.IMAGE, "file:///a.png"), (MediaKind.VIDEO, "file:///v.mp4")]
    plan = refs_plan(refs, "Describe.", model)
    assert plan.batches == [] and plan.media_refs == refs
    assert "<image>\n<video>\nDescribe." in plan.text
    ids = plan.input_ids.tolist()
    assert ids.count(nemo.Tokens().context) == 1  # the worker expands it


def test_inspect_tokens_and_build_say_why_an_image_goes_to_the_worker(tmp_path) -> None:
    """The reason reaches ``--json`` as sound's does: ``processing`` worker, with why."""
    import json
    import subprocess
    import sys

    from mmctl.offline import inspect_tokens

    image = FOLDER.parents[1] / "media" / "rgb_odd.png"
    report = inspect_tokens(image, model_dir=FOLDER)
    doc = report.as_dict()
    assert doc["processing"] == {"value": "worker", "reason": nemo.IMAGES_BY_WORKER}
    assert doc["layout"] == "worker"
    out = tmp_path / "req.pb"
    done = subprocess.run(
        [sys.executable, "-m", "mmctl", "build", str(image), "--model-dir", str(FOLDER),
         "-o", str(out), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    assert built["decisions"]["processing"] == {
        "value": "worker",
        "reason": nemo.IMAGES_BY_WORKER,
    }
