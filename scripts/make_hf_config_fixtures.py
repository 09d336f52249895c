"""Record how Hugging Face transformers resolves each model folder of
tests/fixtures/hf_config_cases.py, into tests/fixtures/hf_config/<version>.json.

Needs torch and torchvision besides transformers (never run by CI); run it once
per transformers version worth pinning (the newest, and the one vLLM pins):

    "$(bash scripts/reference/install_env.sh --transformers 5.24.0)/bin/python" scripts/make_hf_config_fixtures.py
    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/make_hf_config_fixtures.py

For each case it writes the folder, builds ``AutoImageProcessor`` and
``AutoVideoProcessor`` from it exactly as a worker does (``from_pretrained``
on the folder), and records the resolved settings, the class, the grid HF
computes for fixed frame and image shapes and the frames it samples for fixed
clip lengths — or the error when HF cannot build the processor.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures")]

import hf_config_cases as cases  # noqa: E402

from mmctl.models import processor_config  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "hf_config"
# The settings mmctl resolves, plus two only HF has.
COMMON = processor_config.SHARED
VIDEO_ONLY = (*processor_config.VIDEO_ONLY, "num_frames", "do_sample_frames")


def _plain(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def _settings(processor, keys) -> dict:
    out = {"class": type(processor).__name__, "size": _plain(processor.size)}
    for key in keys:
        out[key] = _plain(getattr(processor, key, None))
    return out


def _image(folder: Path) -> dict:
    from transformers import AutoImageProcessor

    try:
        processor = AutoImageProcessor.from_pretrained(str(folder))
    except Exception as err:
        return {"error": type(err).__name__}
    record = _settings(processor, COMMON)
    record["grids"] = []
    for h, w in cases.IMAGE_SHAPES:
        try:
            out = processor(images=[np.zeros((h, w, 3), np.uint8)], return_tensors="np")
        except Exception as err:
            record["grids"].append([[h, w], type(err).__name__])
            continue
        record["grids"].append([[h, w], [int(v) for v in np.asarray(out["image_grid_thw"])[0]]])
    return record


def _video(folder: Path) -> dict:
    import torch
    from transformers import AutoVideoProcessor
    from transformers.video_utils import VideoMetadata

    try:
        processor = AutoVideoProcessor.from_pretrained(str(folder))
    except Exception as err:
        return {"error": type(err).__name__}
    record = _settings(processor, COMMON + VIDEO_ONLY)
    record["grids"] = []
    for t, h, w in cases.VIDEO_SHAPES:
        video = torch.zeros((t, 3, h, w), dtype=torch.uint8)
        try:
            out = processor(videos=[video], do_sample_frames=False, return_tensors="pt")
        except Exception as err:
            record["grids"].append([[t, h, w], type(err).__name__])
            continue
        record["grids"].append([[t, h, w], [int(v) for v in out["video_grid_thw"][0]]])
    # The frames HF keeps, called as preprocess() calls it: every setting of
    # the instance, fps falling back to 2 where the processor has none.
    record["samplings"] = []
    params = inspect.signature(processor.sample_frames).parameters
    kwargs = {k: getattr(processor, k, None) for k in params if k not in ("metadata", "kwargs")}
    if kwargs.get("fps") is None and kwargs.get("num_frames") is None:
        kwargs["fps"] = 2
    for total, fps in cases.SAMPLINGS:
        meta = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps)
        try:
            indices = processor.sample_frames(meta, **kwargs)
            record["samplings"].append([[total, fps], [int(i) for i in np.asarray(indices)]])
        except Exception as err:
            record["samplings"].append([[total, fps], f"{type(err).__name__}"])
    return record


def main() -> None:
    import transformers

    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    results = {"transformers": transformers.__version__, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases.CASES:
            folder = case.write(Path(tmp) / case.name)
            results["cases"][case.name] = {"image": _image(folder), "video": _video(folder)}
            print(case.name, json.dumps(results["cases"][case.name])[:300])
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"transformers-{transformers.__version__}.json"
    # One line per case: the sampled index lists make an indented file 20,000 lines long.
    body = ",\n".join(
        f"{json.dumps(name)}: {json.dumps(record, sort_keys=True)}"
        for name, record in sorted(results["cases"].items())
    )
    head = json.dumps({"transformers": results["transformers"]})[:-1]
    path.write_text(f'{head}, "cases": {{\n{body}\n}}}}\n')
    print("wrote", path)


if __name__ == "__main__":
    main()
