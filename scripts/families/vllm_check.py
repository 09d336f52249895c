"""Run vLLM's own multimodal processor on every family golden and compare.

Needs a Python with vLLM (CPU build is enough: no model weights are loaded, only
the model folder's configs and tokenizer), e.g. the environment scripts/engine-check
caches under ~/.cache/mmctl/engine-env-*/:

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/vllm_check.py

For each tests/fixtures/families/goldens/<family>-<case>.npz it loads the same
committed media with vLLM's loaders (``ImageMediaIO``; ``VideoMediaIO`` with its
default 32 frames and the loader vLLM registers for the folder's video processor —
``qwen3_vl`` for Qwen3.5 — else the default OpenCV backend), builds the processor with
``MULTIMODAL_REGISTRY.create_processor`` for the folder, applies it to the
golden's ``template_ids`` and reports whether vLLM's ``prompt_token_ids`` (against
``vllm_input_ids``), the placeholder ranges and every tensor of ``mm_kwargs`` (sha256
of the float32 bytes, or of the uint8 bytes for raw pixels) equal the golden's. A
family whose worker normalizes on the device by default (Qwen3.5) is checked twice:
as configured by default against the goldens' ``<key>_raw`` tensors, and with
``mm_device_do_normalize=False`` against the normalized ones. Prints one line per
golden and check and a summary; writes nothing. Exit 1 if anything differs.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "tests" / "fixtures" / "families"
MEDIA = ROOT / "tests" / "fixtures" / "media"


def _processor(family: str, device_normalize: bool | None = None):
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    folder = str(FAMILIES / family)
    config = ModelConfig(
        model=folder,
        tokenizer=folder,
        dtype="float32",
        seed=0,
        mm_device_do_normalize=device_normalize,
    )
    return MULTIMODAL_REGISTRY.create_processor(config)


def _video_backend(proc) -> str | None:
    """The loader vLLM's media connector picks for the model's video processor
    (connector.fetch_video: get_video_loader_backend_for_processor), else None."""
    from vllm.multimodal.video import get_video_loader_backend_for_processor

    video_processor = getattr(proc.info.get_hf_processor(), "video_processor", None)
    if video_processor is None:
        return None
    return get_video_loader_backend_for_processor(type(video_processor).__name__)


def _load(name: str, backend: str | None) -> tuple[str, object]:
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO

    data = (MEDIA / name).read_bytes()
    if name.endswith((".png", ".jpg")):
        return "image", ImageMediaIO().load_bytes(data).media
    kwargs = {"video_backend": backend} if backend else {}
    video = VideoMediaIO(ImageMediaIO(), num_frames=32, **kwargs).load_bytes(data).media
    return "video", video


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


def check(path: Path, processors: dict, device_normalize: bool | None = None) -> list[str]:
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    family = path.name.split("-", 1)[0]
    golden = np.load(path)
    if (family, device_normalize) not in processors:
        processors[family, device_normalize] = _processor(family, device_normalize)
    proc = processors[family, device_normalize]
    raw = _raw_checked(golden) and device_normalize is None
    backend = _video_backend(proc)
    data: dict[str, list] = {}
    for name in golden["media"].tolist():
        modality, item = _load(str(name), backend)
        data.setdefault(modality, []).append(item)
    items = proc.info.parse_mm_data(data)
    prompt = [int(i) for i in golden["template_ids"]]
    result = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
    problems = []
    ids = list(result["prompt_token_ids"])
    if ids != golden["vllm_input_ids"].tolist():
        problems.append(f"prompt ids differ ({len(ids)} vs {len(golden['vllm_input_ids'])})")
    kwargs = result["mm_kwargs"]
    for modality in kwargs:
        fields: dict[str, list] = {}
        for item in kwargs[modality]:
            for key, elem in item.items():
                fields.setdefault(key, []).append(elem.data)
        for key, values in fields.items():
            if key == "timestamps":  # Qwen3-VL's per-video frame times (batched lists)
                for index, value in enumerate(values):
                    want = golden[f"video{index}_timestamps"].tolist()
                    if [float(t) for t in value] != want:
                        problems.append(f"{modality}.timestamps[{index}]: {value} != {want}")
                continue
            name = f"{key}_raw" if raw and f"{key}_raw_sha256" in golden.files else key
            ref = f"{name}_sha256"
            if key in golden.files:  # Llama 4's aspect_ratios / patches_per_image, whole
                got = np.stack([v.numpy() for v in values]).astype(np.int64)
                if not np.array_equal(got, golden[key]):
                    problems.append(f"{modality}.{key}: {got.tolist()} != {golden[key].tolist()}")
                continue
            if ref not in golden.files:
                problems.append(f"{modality}.{key}: not in the golden")
                continue
            got = _joined(key, values, golden, name)
            if got is None:
                problems.append(f"{modality}.{key}: shapes {[tuple(v.shape) for v in values]}")
            elif _sha(got, str(golden[f"{name}_dtype"])) != str(golden[ref]):
                problems.append(f"{modality}.{name}: values differ")
    return problems


def _joined(key: str, values: list, golden, name: str):
    """vLLM holds one tensor per item; the golden holds HF's batch."""
    import torch

    shape = tuple(int(x) for x in golden[f"{name}_shape"])
    if key == "pixel_values" and len(shape) == 4 and values[0].dim() == 4:
        joined = torch.cat(values)  # Llama 4: flat tiles
    elif len(shape) == 2 and values[0].dim() == 2 and key.startswith("pixel_values"):
        joined = torch.cat(values)  # Qwen: patch rows, flat per item
    else:
        joined = torch.stack(values) if len({tuple(v.shape) for v in values}) == 1 else None
    if joined is None or tuple(joined.shape) != shape:
        return None
    return joined


def main() -> int:
    families = set(sys.argv[1:])  # optional: only these families' goldens
    processors: dict = {}
    failures = checks = 0
    files = sorted((FAMILIES / "goldens").glob("*.npz"))
    files = [p for p in files if not families or p.name.split("-", 1)[0] in families]
    for path in files:
        modes: list[bool | None] = [None]
        if _raw_checked(np.load(path)):
            modes.append(False)
        for mode in modes:
            label = "" if mode is None else " (mm_device_do_normalize=False)"
            try:
                problems = check(path, processors, mode)
            except Exception as err:  # report and go on: one line per golden
                problems = [f"{type(err).__name__}: {err}"]
            checks += 1
            failures += bool(problems)
            mark = "ok  " if not problems else "DIFF"
            print(f"{mark} {path.name}{label} {'; '.join(problems)}", flush=True)
    print(f"{checks - failures} equal, {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
