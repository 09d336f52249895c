"""Run vLLM's own multimodal processor on every family golden and compare.

Needs a Python with vLLM (CPU build is enough: no model weights are loaded, only
the model folder's configs and tokenizer), e.g. the environment scripts/engine-check
caches under ~/.cache/mmctl/engine-env-*/:

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/vllm_check.py [--tamper] [PATTERN | GOLDEN.npz ...]

For each tests/fixtures/families/goldens/<family>-<case>.npz it loads the same
committed media with vLLM's loaders (``ImageMediaIO``; ``VideoMediaIO`` with its
default 32 frames and the loader vLLM registers for the folder's video processor —
``qwen3_vl`` for Qwen3.5 — else the default OpenCV backend), builds the processor with
``MULTIMODAL_REGISTRY.create_processor`` for the folder, applies it to the
golden's ``template_ids`` and reports whether vLLM's ``prompt_token_ids`` (the
golden's ``vllm_input_ids``: its expansion by vLLM's prompt updates, the same as
HF's ``input_ids`` for every family but InternVL's videos and GLM-4.6V's
timestamps), every tensor of ``mm_kwargs`` (sha256 of the float32 bytes, or of the
uint8 bytes for raw pixels; small integer ones whole) and, where the golden records
them (InternVL), each item's placeholder range and which of its positions take
embeddings (``is_embed``) equal the golden's. A family whose worker normalizes on the
device by default (Qwen3.5) is checked twice: as configured by default against the
goldens' ``<key>_raw`` tensors, and with ``mm_device_do_normalize=False`` against
the normalized ones. Prints one line per golden and check and a summary; writes
nothing. Exit 1 if anything differs.

Nemotron-3-Nano-Omni's goldens are vLLM's own processing already
(scripts/make_family_fixtures.py's ``nemotron_h_omni`` row): they are made again with that
row's code and this vLLM, every recorded key compared.

``--tamper`` changes one recorded value of every golden before comparing (the
first id, the first tensor digest): a check that can fail prints "0 equal".
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "tests" / "fixtures" / "families"
MEDIA = ROOT / "tests" / "fixtures" / "media"


def _processor(family: str, device_normalize: bool | None = False):
    # mm_device_do_normalize None: vLLM's default for the model (on for Qwen and GLM, which
    # then leave do_rescale/do_normalize off); False: HF's normalised values.
    return processor_for(str(FAMILIES / family), mm_device_do_normalize=device_normalize)


def processor_for(folder: str, **settings: object):
    """vLLM's multimodal processor for ``folder``, with ``ModelConfig`` ``settings``."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=folder, tokenizer=folder, dtype="float32", seed=0, **settings)
    return MULTIMODAL_REGISTRY.create_processor(config)


def _video_backend(family: str) -> dict:
    """The loader vLLM's serving path picks for the folder (``fetch_video``): the one
    registered for its ``video_processor_type``, else the default backend."""
    from vllm.multimodal.video import get_video_loader_backend_for_processor
    from vllm.transformers_utils.processor import get_video_processor_cls_name_from_config

    name = get_video_processor_cls_name_from_config(str(FAMILIES / family))
    backend = get_video_loader_backend_for_processor(name)
    return {"video_backend": backend} if backend else {}


def _load(name: str, family: str) -> tuple[str, object]:
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO

    data = (MEDIA / name).read_bytes()
    if name.endswith((".png", ".jpg")):
        return "image", ImageMediaIO().load_bytes(data).media
    io = VideoMediaIO(ImageMediaIO(), num_frames=32, **_video_backend(family))
    return "video", io.load_bytes(data).media


def _sha(value, dtype: str = "float32") -> str:
    import torch

    if dtype == "uint8":  # raw pixels: the bytes a device-normalizing worker reads
        array = value.to(torch.uint8).numpy()
    elif value.is_floating_point():
        array = value.to(torch.float32).numpy()
    else:
        array = value.numpy().astype(np.int64)
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _raw_checked(golden) -> bool:
    """Goldens of a family whose default worker normalizes on the device hold both."""
    return any(key.endswith("_raw_sha256") for key in golden.files)


def check(path: Path, processors: dict, device_normalize: bool | None = False) -> list[str]:
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    family = path.name.split("-", 1)[0]
    golden = np.load(path)
    if family == "nemotron_h_omni":
        return _nemotron(path, golden, processors)
    if (family, device_normalize) not in processors:
        processors[family, device_normalize] = _processor(family, device_normalize)
    proc = processors[family, device_normalize]
    raw = _raw_checked(golden) and device_normalize is None
    data: dict[str, list] = {}
    for name in golden["media"].tolist():
        modality, item = _load(str(name), family)
        data.setdefault(modality, []).append(item)
    problems = _loaded_video(golden, data.get("video", []))
    items = proc.info.parse_mm_data(data)
    prompt = [int(i) for i in golden["template_ids"]]
    result = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
    ids = list(result["prompt_token_ids"])
    # vllm_input_ids: the goldens' expansion by vLLM's prompt updates (equal to HF's
    # input_ids for every family but InternVL's videos and GLM-4.6V's video timestamps).
    expected = golden["vllm_input_ids"].tolist()
    if TAMPER:
        expected[0] += 1
    if ids != expected:
        problems.append(f"prompt ids differ ({len(ids)} vs {len(expected)})")
    problems += _placeholders(result, golden, ids)
    problems += _embed_masks(family, ids, result["mm_placeholders"])
    kwargs = result["mm_kwargs"]
    for modality in kwargs:
        fields: dict[str, list] = {}
        for item in kwargs[modality]:
            for key, elem in item.items():
                fields.setdefault(key, []).append(elem.data)
        for key, values in fields.items():
            if key in PER_VIDEO:  # Gemma 4's lists, kept per video: video<k>_<name>
                for k, value in enumerate(values):
                    want = golden[f"video{k}_{PER_VIDEO[key]}"].tolist()
                    if list(value) != want:
                        problems.append(f"{modality}.{key}[{k}]: {list(value)} != {want}")
                continue
            if key == "timestamps":  # Qwen3-VL's per-video frame times (batched lists)
                for index, value in enumerate(values):
                    want = golden[f"video{index}_timestamps"].tolist()
                    if [float(t) for t in value] != want:
                        problems.append(f"{modality}.timestamps[{index}]: {value} != {want}")
                continue
            name = f"{key}_raw" if raw and f"{key}_raw_sha256" in golden.files else key
            ref = f"{name}_sha256"
            if key in golden.files:  # small integer tensors, whole (Llama 4's, InternVL's)
                got = np.stack([v.numpy() for v in values]).astype(np.int64)
                want = golden[key]
                if want.ndim == 0:  # a shared field: every item holds the one value
                    want = np.full(len(values), want, dtype=np.int64)
                if not np.array_equal(got, want):
                    problems.append(f"{modality}.{key}: {got.tolist()} != {want.tolist()}")
                continue
            if ref not in golden.files:
                problems.append(f"{modality}.{key}: not in the golden")
                continue
            got = _joined(key, values, golden, name)
            want = str(golden[ref])
            if TAMPER:
                want = want[::-1]
            if got is None:
                problems.append(f"{modality}.{key}: shapes {[tuple(v.shape) for v in values]}")
            elif _sha(got, str(golden[f"{name}_dtype"])) != want:
                problems.append(f"{modality}.{name}: values differ")
    return problems


def _nemotron(path: Path, golden, processors: dict) -> list[str]:
    """Nemotron's goldens are vLLM's own processing (make_family_fixtures.py's
    ``nemotron_h_omni`` row): made again here by that row's code with this vLLM, every
    recorded key must be equal (ids, placeholders, geometry, loader output, the pixels'
    bits)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_family_fixtures as makers

    rate = float(golden["video_pruning_rate"]) if "video_pruning_rate" in golden.files else None
    if ("nemotron_h_omni", rate) not in processors:
        settings = {} if rate is None else {"video_pruning_rate": rate}
        processors["nemotron_h_omni", rate] = makers.nemotron_vllm_processor(**settings)
    proc, max_model_len = processors["nemotron_h_omni", rate]
    case = path.stem.split("-", 1)[1]
    media = dict(makers.NEMOTRON_CASES)[case]
    made = makers.nemotron_record(proc, max_model_len, media, "")
    problems = []
    for key in golden.files:
        if key in ("reference", "video_pruning_rate"):
            continue
        want = golden[key]
        if TAMPER and key == "vllm_input_ids":
            want = want + 1
        if key not in made:
            problems.append(f"{key}: not made")
        elif not np.array_equal(np.asarray(made[key]), want):
            problems.append(f"{key} differs")
    return problems


#: vLLM fields that are plain lists per video (gemma4_mm.py) → the golden's per-video key.
PER_VIDEO = {"video_timestamps": "timestamps", "video_num_soft_tokens": "num_soft_tokens"}
#: Flat fields (``flat_from_sizes``): one tensor per video, frames joined on axis 0.
FLAT = ("pixel_values_videos", "pixel_position_ids_videos")


def _placeholders(result, golden, ids: list[int]) -> list[str]:
    """Each item's (offset, length) and embed positions, where the golden records them:
    embeddings go exactly to the positions holding the modality's embed token."""
    problems = []
    for modality in ("image", "video"):
        key = f"{modality}_placeholders"
        if key not in golden.files:
            continue
        # InternVL's goldens hold the token id vLLM passes on; MiniMax-M3-VL's the embed id.
        embed = f"{modality}_token_id"
        token = int(golden[embed if embed in golden.files else f"{modality}_embed_id"])
        got = result["mm_placeholders"].get(modality, [])
        spans = [[p.offset, p.length] for p in got]
        if spans != golden[key].tolist():
            problems.append(f"{modality} placeholders {spans} != {golden[key].tolist()}")
            continue
        for p in got:
            want = np.asarray(ids[p.offset : p.offset + p.length]) == token
            mask = np.ones(p.length, bool) if p.is_embed is None else p.is_embed.numpy()
            if not np.array_equal(mask, want):
                problems.append(f"{modality} is_embed at {p.offset}: {int(mask.sum())} positions")
    return problems


def _loaded_video(golden, videos: list) -> list[str]:
    """The frames and metadata vLLM's loader produced against the golden's (GLM keeps them)."""
    problems = []
    for n, (frames, meta) in enumerate(videos):
        if f"video{n}_fps" not in golden.files:
            continue
        array = np.ascontiguousarray(frames)
        if hashlib.sha256(array.tobytes()).hexdigest() != str(golden[f"video{n}_frames_sha256"]):
            problems.append(f"video{n}: decoded frames differ {meta['frames_indices']}")
        if float(meta["fps"]) != float(golden[f"video{n}_fps"]):
            problems.append(f"video{n}: fps {meta['fps']} != {float(golden[f'video{n}_fps'])}")
        if int(meta["total_num_frames"]) != int(golden[f"video{n}_total_frames"]):
            problems.append(f"video{n}: {meta['total_num_frames']} frames")
        sample = f"video{n}_do_sample_frames"  # GLM's goldens keep it
        if sample in golden.files and bool(meta["do_sample_frames"]) != bool(golden[sample]):
            problems.append(f"video{n}: do_sample_frames {meta['do_sample_frames']}")
    return problems


def _embed_masks(family: str, ids: list[int], placeholders) -> list[str]:
    """GLM and Gemma 4: each placeholder range's embed positions are exactly its
    modality's token ids (what smg-grpc-servicer rebuilds from ``im_token_id``); None
    means all of them. GLM embeds at ``<|image|>`` for both modalities, Gemma 4 at
    ``<|image|>`` / ``<|video|>``."""
    if not family.startswith(("glm", "gemma4")):
        return []
    import json

    config = json.loads((FAMILIES / family / "config.json").read_text())
    video_key = "video_token_id" if family == "gemma4" else "image_token_id"
    token = {"image": config["image_token_id"], "video": config[video_key]}
    problems = []
    for modality, ranges in placeholders.items():
        for n, r in enumerate(ranges):
            span = np.asarray(ids[r.offset : r.offset + r.length])
            want = span == token[modality]
            got = np.ones(len(span), bool) if r.is_embed is None else r.is_embed.numpy()
            if not np.array_equal(want, got):
                problems.append(f"{modality}{n}: embed mask is not the {modality} token positions")
    return problems


def refused(family: str, clip: str) -> str:
    """vLLM's own processing of a clip it cannot take: the error, or "" if it took it."""
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    proc = _processor(family)
    try:
        _, video = _load(clip, family)
        items = proc.info.parse_mm_data({"video": [video]})
        tok = proc.info.get_tokenizer()
        prompt = tok.encode("<|begin_of_video|><|video|><|end_of_video|>", add_special_tokens=False)
        proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
    except Exception as err:  # the point: which error vLLM raises
        cause = err.__cause__ or err
        return f"{type(cause).__name__}: {str(cause).splitlines()[0][:120]}"
    return ""


def _joined(key: str, values: list, golden, name: str):
    """vLLM holds one tensor per item; the golden holds HF's batch."""
    import torch

    shape = tuple(int(x) for x in golden[f"{name}_shape"])
    if key == "pixel_values" and len(shape) == 4 and values[0].dim() == 4:
        joined = torch.cat(values)  # Llama 4: flat tiles
    elif key in FLAT and values[0].dim() == len(shape) == 3:
        joined = torch.cat(values)  # Gemma 4: frames of every video
    elif key.startswith("pixel_values") and len(shape) == 2 and values[0].dim() == 2:
        joined = torch.cat(values)  # GLM: patch rows of every item, flat
    elif values[0].dim() == len(shape):
        joined = torch.cat(values)  # InternVL: patches and frames of every item, flat
    else:
        joined = torch.stack(values) if len({tuple(v.shape) for v in values}) == 1 else None
    if joined is None or tuple(joined.shape) != shape:
        return None
    return joined


TAMPER = False


def main() -> int:
    global TAMPER
    args = sys.argv[1:]
    TAMPER = "--tamper" in args
    processors: dict = {}
    failures = checks = 0
    # Optional name patterns (e.g. "glm4v-*") or golden files (e.g. a copy with one digest
    # changed, to see the check fail); else every committed golden.
    files: set[Path] = set()
    for arg in [a for a in args if not a.startswith("--")] or ["*"]:
        path = Path(arg)
        found = [path] if path.suffix == ".npz" and path.is_file() else []
        files.update(found or (FAMILIES / "goldens").glob(f"{arg}.npz"))
    if not files:
        print(f"no golden matches {args} (a pattern is a file-name glob: 'qwen3_5-*')")
        return 2
    for path in sorted(files):
        # A family whose default worker normalizes on the device is checked both ways.
        modes: list[bool | None] = [None, False] if _raw_checked(np.load(path)) else [False]
        for mode in modes:
            label = "" if mode is False else " (device normalization, vLLM's default)"
            try:
                problems = check(path, processors, mode)
            except Exception as err:  # report and go on: one line per golden
                problems = [f"{type(err).__name__}: {err}"]
            checks += 1
            failures += bool(problems)
            mark = "ok  " if not problems else "DIFF"
            print(f"{mark} {path.name}{label} {'; '.join(problems)}", flush=True)
    print(f"{checks - failures} equal, {failures} differ")
    # GLM's loaders keep one frame of a clip under 1 s and its processor needs two:
    # vLLM refuses it, so no golden exists; this shows the refusal.
    for family in ("glm4v", "glm46v"):
        if not any(f.name.startswith(f"{family}-") for f in files):
            continue
        error = refused(family, "min_frames.mp4")
        failures += not error
        print(f"{'ok  ' if error else 'DIFF'} {family} min_frames.mp4 refused: {error or 'NO'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
