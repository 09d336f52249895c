"""Run vLLM's own multimodal processor on every family golden and compare.

Needs a Python with vLLM (CPU build is enough: no model weights are loaded, only
the model folder's configs and tokenizer), e.g. the environment scripts/engine-check
caches under ~/.cache/mmctl/engine-env-*/:

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/vllm_check.py [GOLDEN.npz ...]

For each tests/fixtures/families/goldens/<family>-<case>.npz it loads the same
committed media with vLLM's loaders (``ImageMediaIO``; ``VideoMediaIO`` with its
default 32 frames, the default OpenCV backend), builds the processor with
``MULTIMODAL_REGISTRY.create_processor`` for the folder, applies it to the
golden's ``template_ids`` and reports whether vLLM's ``prompt_token_ids``, the
placeholder ranges and every tensor of ``mm_kwargs`` (sha256 of the float32
bytes) equal the golden's. Prints one line per golden and a summary; writes
nothing. Exit 1 if anything differs.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "tests" / "fixtures" / "families"
MEDIA = ROOT / "tests" / "fixtures" / "media"


def _processor(family: str):
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    folder = str(FAMILIES / family)
    config = ModelConfig(model=folder, tokenizer=folder, dtype="float32", seed=0)
    return MULTIMODAL_REGISTRY.create_processor(config)


def _load(name: str, golden) -> tuple[str, object]:
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO

    data = (MEDIA / name).read_bytes()
    if name.endswith((".png", ".jpg")):
        return "image", ImageMediaIO().load_bytes(data).media
    video = VideoMediaIO(ImageMediaIO(), num_frames=32).load_bytes(data).media
    return "video", video


def _sha(value) -> str:
    import torch

    array = value.to(torch.float32).numpy() if value.is_floating_point() else value.numpy()
    if array.dtype == np.int64 or not value.is_floating_point():
        array = array.astype(np.int64)
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def check(path: Path, processors: dict) -> list[str]:
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    family = path.name.split("-", 1)[0]
    golden = np.load(path)
    if family not in processors:
        processors[family] = _processor(family)
    proc = processors[family]
    data: dict[str, list] = {}
    for name in golden["media"].tolist():
        modality, item = _load(str(name), golden)
        data.setdefault(modality, []).append(item)
    items = proc.info.parse_mm_data(data)
    prompt = [int(i) for i in golden["template_ids"]]
    result = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
    problems = []
    ids = list(result["prompt_token_ids"])
    expected = golden["vllm_input_ids"].tolist()
    if ids != expected:
        problems.append(f"prompt ids differ ({len(ids)} vs {len(expected)})")
    kwargs = result["mm_kwargs"]
    for modality in kwargs:
        fields: dict[str, list] = {}
        for item in kwargs[modality]:
            for key, elem in item.items():
                fields.setdefault(key, []).append(elem.data)
        for key, values in fields.items():
            ref = f"{key}_sha256"
            if key in PER_VIDEO:  # Gemma 4's lists, kept per video: video<k>_<name>
                for k, value in enumerate(values):
                    want = golden[f"video{k}_{PER_VIDEO[key]}"].tolist()
                    if list(value) != want:
                        problems.append(f"{modality}.{key}[{k}]: {list(value)} != {want}")
                continue
            if key in golden.files:  # Llama 4's aspect_ratios / patches_per_image, whole
                got = np.stack([v.numpy() for v in values]).astype(np.int64)
                if not np.array_equal(got, golden[key]):
                    problems.append(f"{modality}.{key}: {got.tolist()} != {golden[key].tolist()}")
                continue
            if ref not in golden.files:
                problems.append(f"{modality}.{key}: not in the golden")
                continue
            got = _joined(key, values, golden)
            if got is None:
                problems.append(f"{modality}.{key}: shapes {[tuple(v.shape) for v in values]}")
            elif _sha(got) != str(golden[ref]):
                problems.append(f"{modality}.{key}: values differ")
    return problems


#: vLLM fields that are plain lists per video (gemma4_mm.py) → the golden's per-video key.
PER_VIDEO = {"video_timestamps": "timestamps", "video_num_soft_tokens": "num_soft_tokens"}
#: Flat fields (``flat_from_sizes``): one tensor per video, frames joined on axis 0.
FLAT = ("pixel_values_videos", "pixel_position_ids_videos")


def _joined(key: str, values: list, golden):
    """vLLM holds one tensor per item; the golden holds HF's batch."""
    import torch

    shape = tuple(int(x) for x in golden[f"{key}_shape"])
    if key == "pixel_values" and len(shape) == 4 and values[0].dim() == 4:
        joined = torch.cat(values)  # Llama 4: flat tiles
    elif key in FLAT and values[0].dim() == len(shape):
        joined = torch.cat(values)  # Gemma 4: frames of every video
    else:
        joined = torch.stack(values) if len({tuple(v.shape) for v in values}) == 1 else None
    if joined is None or tuple(joined.shape) != shape:
        return None
    return joined


def main() -> int:
    processors: dict = {}
    failures = 0
    # Goldens named on the command line (e.g. a copy with one digest changed, to see the
    # check fail), else every committed one.
    files = [Path(a) for a in sys.argv[1:]] or sorted((FAMILIES / "goldens").glob("*.npz"))
    for path in files:
        try:
            problems = check(path, processors)
        except Exception as err:  # report and go on: one line per golden
            problems = [f"{type(err).__name__}: {err}"]
        failures += bool(problems)
        print(f"{'ok  ' if not problems else 'DIFF'} {path.name} {'; '.join(problems)}", flush=True)
    print(f"{len(files) - failures} equal, {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
