"""Write tests/fixtures/sound_tokens.json: how many tokens each sound length becomes,
by transformers' own feature extractors and length rules, called as vLLM 0.33 calls them.

Needs transformers (never run by CI):

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/make_sound_fixtures.py
    "$(bash scripts/reference/install_env.sh --transformers 5.24.0)/bin/python" \
        scripts/make_sound_fixtures.py --append

For each length (samples at 16 kHz, around every hop and chunk boundary):

* Qwen2-Audio: WhisperFeatureExtractor (the published 128-bin/80-bin values do not
  change the frame count) called with Qwen2AudioProcessor's own ``audio_kwargs``
  defaults plus what vLLM adds (``truncation=True``); the mask's sum is the frame
  count; ``Qwen2AudioEncoder._get_feat_extract_output_lengths`` the tokens.
* Qwen2.5-Omni: the extractor with Qwen2_5OmniProcessor's ``audio_kwargs`` defaults
  (vLLM adds nothing); ``Qwen2_5OmniAudioEncoder._get_feat_extract_output_lengths``.
* Qwen3-Omni: the waveform padded to a multiple of the hop first (vLLM's
  ``_get_hf_mm_inputs``), the extractor with Qwen3OmniMoeProcessor's defaults; the
  frame count as vLLM's ``_postprocess_hf_mm_data`` sets it from the padded length;
  transformers' ``qwen3_omni_moe`` ``_get_feat_extract_output_lengths``.
* Gemma 4: the fixture folder's own processor (tests/fixtures/families/gemma4),
  called on one audio placeholder; the run of audio tokens it writes.

mmctl's rules (mmctl/models/sound.py) are checked against this file by
tests/unit/models/test_sound_tokens.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "sound_tokens.json"
RATE = 16000
HOP = 160
LENGTHS = [
    1, 159, 160, 161, 319, 320, 321, 400, 401, 1599, 1600, 1601, 8000, 16000, 16001, 24000,
    159_999, 160_000, 160_001, 479_999, 480_000, 480_001, 500_000, 960_000, 1_000_003,
]  # fmt: skip


def _wave(n: int) -> np.ndarray:
    return (np.random.default_rng(n).standard_normal(n) * 0.1).astype(np.float32)


def _frames(extractor, audio: np.ndarray, kwargs: dict) -> int:
    out = extractor([audio], return_tensors="np", **kwargs)
    return int(np.asarray(out["attention_mask"]).sum())


def _kwargs(kwargs_class) -> dict:
    kw = dict(kwargs_class._defaults.get("audio_kwargs", {}))
    kw["return_attention_mask"] = True
    return kw


def qwen2_audio(n: int) -> dict:
    import torch
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_audio.modeling_qwen2_audio import Qwen2AudioEncoder
    from transformers.models.qwen2_audio.processing_qwen2_audio import Qwen2AudioProcessorKwargs

    kw = {**_kwargs(Qwen2AudioProcessorKwargs), "truncation": True, "sampling_rate": RATE}
    frames = _frames(WhisperFeatureExtractor(feature_size=128), _wave(n), kw)
    _, tokens = Qwen2AudioEncoder._get_feat_extract_output_lengths(None, torch.tensor(frames))
    return {"samples": n, "frames": frames, "tokens": int(tokens), "run": int(tokens)}


def qwen2_5_omni(n: int) -> dict:
    import torch
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import Qwen2_5OmniAudioEncoder
    from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import (
        Qwen2_5OmniProcessorKwargs,
    )

    kw = {**_kwargs(Qwen2_5OmniProcessorKwargs), "padding": "max_length"}
    frames = _frames(WhisperFeatureExtractor(feature_size=128), _wave(n), kw)
    _, tokens = Qwen2_5OmniAudioEncoder._get_feat_extract_output_lengths(None, torch.tensor(frames))
    return {"samples": n, "frames": frames, "tokens": int(tokens), "run": int(tokens)}


def qwen3_omni_moe(n: int) -> dict:
    import torch
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as modeling
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import (
        Qwen3OmniMoeProcessorKwargs,
    )

    audio = _wave(n)
    if n % HOP:
        audio = np.pad(audio, (0, HOP - n % HOP))  # vLLM's _get_hf_mm_inputs
    kw = _kwargs(Qwen3OmniMoeProcessorKwargs)
    kw.pop("n_window", None)
    hf_frames = _frames(WhisperFeatureExtractor(feature_size=128), audio, kw)
    # vLLM's _postprocess_hf_mm_data: from the (padded) length, no truncation by default
    length = len(audio)
    frames = length // HOP if length % HOP == 0 else length // HOP - 1
    tokens = modeling._get_feat_extract_output_lengths(torch.tensor(frames))
    return {
        "samples": n,
        "frames": frames,
        "hf_frames": hf_frames,
        "tokens": int(tokens),
        "run": int(tokens),
    }


def gemma4(n: int) -> dict:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(ROOT / "tests" / "fixtures" / "families" / "gemma4")
    out = processor(text=processor.audio_token, audio=[_wave(n)], return_tensors="np")
    ids = np.asarray(out["input_ids"])[0].tolist()
    audio_id = processor.tokenizer.convert_tokens_to_ids(processor.audio_token)
    tokens = ids.count(audio_id)
    return {
        "samples": n,
        "tokens": tokens,
        "run": tokens + 2,
        "processor_formula": processor._compute_audio_num_tokens(_wave(n), RATE),
    }


def _case(fn, n: int) -> dict:
    """One length; a length the processor itself cannot take is recorded as its error."""
    try:
        return fn(n)
    except Exception as err:  # e.g. a waveform shorter than the STFT's reflect padding
        return {"samples": n, "error": f"{type(err).__name__}: {str(err)[:120]}"}


def main() -> None:
    import transformers

    doc = json.loads(OUT.read_text()) if "--append" in sys.argv and OUT.exists() else {}
    cases = {}
    for name, fn in (
        ("qwen2_audio", qwen2_audio),
        ("qwen2_5_omni", qwen2_5_omni),
        ("qwen3_omni_moe", qwen3_omni_moe),
        ("gemma4", gemma4),
    ):
        cases[name] = [_case(fn, n) for n in LENGTHS]
        print(
            name, [(c["samples"], c.get("tokens")) for c in cases[name][:8]], "…", file=sys.stderr
        )
    doc.setdefault("transformers", {})[transformers.__version__] = {
        "sample_rate": RATE,
        "cases": cases,
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} (transformers {transformers.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
