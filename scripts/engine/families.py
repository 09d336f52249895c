"""The model families scripts/engine-check proves mmctl against, as data.

A family is a tiny random-weight model (its transformers class and a small
config), the files a checkpoint of it ships beside the weights, the workers
to start for it and the cases to send to each. Adding a family is adding an
entry here (and mmctl learning the family): the driver, the model builder and
the reference scripts read only this.

Pure standard library: the driver (mmctl's torch-free venv) and the engine
environment's scripts both import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Token ids of the published Qwen-VL checkpoints (config.json image_token_id, …),
# which the Qwen tokenizer files the project uses assign.
QWEN_TOKEN_IDS = {
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
}
QWEN_VOCAB = 151936  # the published Qwen-VL vocabulary size (covers every special token)

# Small enough to build in seconds and run on two CPU cores; head_dim 32
# because vLLM's CPU attention has no kernel for 16 (the first request dies).
_TEXT = {
    "vocab_size": QWEN_VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 32768,
    # Wider than the class default (0.02), whose logits are so flat that greedy
    # output is one token repeated: at 0.3 the output varies with the input.
    "initializer_range": 0.3,
}


@dataclass(frozen=True)
class Worker:
    """One engine start: the model's dtype and vLLM's ``--mm-device-do-normalize``."""

    model_dtype: str  # "float32" | "bfloat16"
    device_normalize: bool

    @property
    def label(self) -> str:
        return f"{self.model_dtype}/{'norm-on' if self.device_normalize else 'norm-off'}"


@dataclass(frozen=True)
class Case:
    """One request: media files (paths under the repository) in prompt order.

    ``reverse``: the negative control — mmctl's request with the video's
    temporal patches in reverse order, compared with the reference of the
    clip as it is; it must differ (the check can fail).
    """

    name: str
    media: tuple[str, ...]
    transports: tuple[str, ...] = ("inline", "shm")
    reverse: bool = False


@dataclass(frozen=True)
class Family:
    name: str  # mmctl's --family name
    hf_class: str  # transformers class built with random weights
    config: dict[str, Any]
    # Files a checkpoint ships beside config.json (written as JSON).
    processor_files: dict[str, dict[str, Any]]
    workers: tuple[Worker, ...]
    cases: tuple[Case, ...]
    # The offline LLM.generate reference for these case names (first worker's
    # settings); it runs in the background while the next family starts.
    offline_cases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


VIDEO = "tests/fixtures/media/tok4.mp4"  # 96x64, 16 frames at 8 fps: 4 sampled, 2 temporal patches
ODD_VIDEO = "tests/fixtures/media/odd_count.mp4"  # 7 sampled frames: the last pair is padded
IMAGE = "tests/fixtures/media/rgb_odd.png"

_CASES = (
    Case("video", (VIDEO,)),
    Case("odd-video", (ODD_VIDEO,)),
    Case("image", (IMAGE,)),
    Case("image+video", (IMAGE, VIDEO)),
    Case("reversed-video", (VIDEO,), transports=("inline",), reverse=True),
)

QWEN3_VL = Family(
    name="qwen3-vl",
    hf_class="Qwen3VLForConditionalGeneration",
    config={
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        **QWEN_TOKEN_IDS,
        "tie_word_embeddings": True,
        "text_config": {
            **_TEXT,
            "head_dim": 32,
            # sums to head_dim / 2, as the published [24, 20, 20] does for 128
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5000000.0,
                "mrope_section": [6, 5, 5],
                "mrope_interleaved": True,
            },
        },
        "vision_config": {
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "patch_size": 16,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
            "out_hidden_size": 64,
            "deepstack_visual_indexes": [0],
            "initializer_range": 0.3,
        },
    },
    processor_files={
        # mmctl/models/data/qwen3-vl: the published checkpoints' values.
        "preprocessor_config.json": {
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "rescale_factor": 0.00392156862745098,
            "size": {"shortest_edge": 65536, "longest_edge": 16777216},
        },
        "video_preprocessor_config.json": {
            "video_processor_type": "Qwen3VLVideoProcessor",
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "rescale_factor": 0.00392156862745098,
            "fps": 2,
            "min_frames": 4,
            "max_frames": 768,
            "size": {"shortest_edge": 4096, "longest_edge": 25165824},
        },
    },
    workers=(Worker("bfloat16", True), Worker("float32", False)),
    cases=_CASES,
    offline_cases=("video", "image+video"),
)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

QWEN2_5_VL = Family(
    name="qwen2.5-vl",
    hf_class="Qwen2_5_VLForConditionalGeneration",
    config={
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        **QWEN_TOKEN_IDS,
        "tie_word_embeddings": True,
        "text_config": {
            **_TEXT,
            # head_dim = hidden / heads = 32; sections sum to 16 ([16, 24, 24] for 128)
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [4, 6, 6],
            },
        },
        "vision_config": {
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "patch_size": 14,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
            "out_hidden_size": 64,
            "tokens_per_second": 2,
            "initializer_range": 0.3,
        },
    },
    processor_files={
        # Qwen2.5-VL checkpoints ship no video file: transformers builds the
        # video processor from this one.
        "preprocessor_config.json": {
            "image_processor_type": "Qwen2VLImageProcessor",
            "patch_size": 14,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": CLIP_MEAN,
            "image_std": CLIP_STD,
            "rescale_factor": 0.00392156862745098,
            "min_pixels": 3136,
            "max_pixels": 12845056,
        },
    },
    workers=(Worker("float32", True), Worker("bfloat16", False)),
    cases=_CASES,
    # Empty: as the last family its offline run would add a whole engine start-up
    # to the check (Qwen3-VL's overlaps this family's start). ("video",) passed
    # when tried (fp32 model, uint8 pixels).
    offline_cases=(),
)

FAMILIES = {f.name: f for f in (QWEN3_VL, QWEN2_5_VL)}
