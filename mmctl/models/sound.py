"""How many tokens a worker expands one sound to, for the model types mmctl knows.

mmctl never preprocesses sound (``mmctl.media.audio``), but ``inspect-tokens``
says what a request will cost before a GPU sees it: vLLM 0.33 resamples each
sound to the feature extractor's rate (``MultiModalDataParser``'s
``AudioResampler``, torchaudio's by default: ``ceil(n * target / rate)``
samples), mixes it to mono, and its prompt update replaces the placeholder by
a run whose length is the model's own arithmetic over that sample count:

* **Qwen2-Audio** (``qwen2_audio.py``): the HF processor with
  ``truncation=True`` and ``padding="max_length"`` (WhisperFeatureExtractor,
  30 s chunks, hop 160): ``frames = ceil(min(n, 480000) / 160)``; then
  ``_get_feat_extract_output_lengths``: ``((frames - 1) // 2 + 1 - 2) // 2 + 1``
  ``<|AUDIO|>`` tokens.
* **Qwen2.5-Omni** (``qwen2_5_omni_thinker.py``): the same extractor call (its
  processor pads to max_length and truncates at 30 s, vLLM passes nothing
  else) and the same length rule.
* **Qwen3-Omni** (``qwen3_omni_moe_thinker.py``): vLLM pads the waveform to a
  multiple of the hop and counts ``frames = ceil(n / 160)`` with no 30 s cap
  (``truncation`` defaults to False there); the audio tower's rule is
  ``((f % 100 - 1) // 2 + 1 - 1) // 2 + 1`` (over the frames past the last
  full 100, in two halvings) ``+ (f // 100) * 13``.
* **Gemma 4** (``gemma4_mm.py``, ``_compute_audio_num_tokens``): mel framing
  (20 ms windows of ``rate * 0.02 + 1`` samples, 10 ms hop, half a window of
  left padding) then two stride-2 convolutions, capped at the processor's
  ``audio_seq_length``; the run is ``<boa>`` + that many ``<|audio|>`` + ``<eoa>``.

Anything else: the worker decides, and mmctl says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: WhisperFeatureExtractor's published values (Qwen2-Audio, Qwen-Omni).
WHISPER_RATE = 16000
WHISPER_HOP = 160
WHISPER_CHUNK_SAMPLES = 30 * WHISPER_RATE
#: Gemma 4's published processor values (processor_config.json).
GEMMA4_RATE = 16000
GEMMA4_AUDIO_SEQ_LENGTH = 750


def resampled(samples: int, rate: int, target: int) -> int:
    """Samples after vLLM's default resampling (torchaudio: ``ceil(n * target / rate)``)."""
    if rate == target:
        return samples
    return math.ceil(samples * target / rate)


def whisper_frames(samples: int, truncate: bool) -> int:
    """The feature frames a WhisperFeatureExtractor mask counts (one per started hop)."""
    if truncate:
        samples = min(samples, WHISPER_CHUNK_SAMPLES)
    return -(-samples // WHISPER_HOP)


def qwen2_audio_tokens(frames: int) -> int:
    """Qwen2-Audio's (and Qwen2.5-Omni's) ``_get_feat_extract_output_lengths``."""
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def qwen3_omni_tokens(frames: int) -> int:
    """Qwen3-Omni's ``_get_feat_extract_output_lengths`` (Python's floor division, as torch's)."""
    leave = frames % 100
    feat = (leave - 1) // 2 + 1
    return ((feat - 1) // 2 + 1 - 1) // 2 + 1 + (frames // 100) * 13


def gemma4_tokens(samples: int, rate: int, audio_seq_length: int) -> int:
    """Gemma 4's ``_compute_audio_num_tokens`` (vLLM's copy of the encoder's arithmetic)."""
    frame_length = round(rate * 20.0 / 1000.0)
    hop_length = round(rate * 10.0 / 1000.0)
    padded = samples + frame_length // 2
    t = (padded - (frame_length + 1)) // hop_length + 1
    if t <= 0:
        return 0
    for _ in range(2):
        t = (t + 2 - 3) // 2 + 1
    return min(t, audio_seq_length)


@dataclass(frozen=True)
class SoundTokens:
    """One sound as the worker will lay it out."""

    samples: int  # at ``rate``, after resampling
    rate: int
    tokens: int  # the placeholder's audio tokens
    run: int  # the whole replacement (markers included)
    rule: str  # whose arithmetic

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples_at_model_rate": self.samples,
            "model_rate": self.rate,
            "audio_tokens": self.tokens,
            "placeholder_run": self.run,
            "rule": self.rule,
        }


@dataclass(frozen=True)
class _Rule:
    rate: Callable[[Mapping[str, Any]], int]
    count: Callable[[int, Mapping[str, Any]], tuple[int, int]]  # samples -> (tokens, run)
    rule: str


def _gemma4_count(samples: int, processor: Mapping[str, Any]) -> tuple[int, int]:
    tokens = gemma4_tokens(
        samples,
        _gemma4_rate(processor),
        int(processor.get("audio_seq_length") or GEMMA4_AUDIO_SEQ_LENGTH),
    )
    return tokens, tokens + 2  # <boa> … <eoa>


def _gemma4_rate(processor: Mapping[str, Any]) -> int:
    extractor = processor.get("feature_extractor")
    rate = extractor.get("sampling_rate") if isinstance(extractor, Mapping) else None
    return int(rate) if isinstance(rate, int) and rate > 0 else GEMMA4_RATE


def _whisper(truncate: bool, tokens: Callable[[int], int]) -> Callable[..., tuple[int, int]]:
    def count(samples: int, processor: Mapping[str, Any]) -> tuple[int, int]:
        n = tokens(whisper_frames(samples, truncate))
        return n, n

    return count


RULES: dict[str, _Rule] = {
    "qwen2_audio": _Rule(
        lambda p: WHISPER_RATE,
        _whisper(True, qwen2_audio_tokens),
        "vLLM qwen2_audio: Whisper frames (30 s cap), two halvings",
    ),
    "qwen2_5_omni": _Rule(
        lambda p: WHISPER_RATE,
        _whisper(True, qwen2_audio_tokens),
        "vLLM qwen2_5_omni_thinker: Whisper frames (30 s cap), two halvings",
    ),
    "qwen3_omni_moe": _Rule(
        lambda p: WHISPER_RATE,
        _whisper(False, qwen3_omni_tokens),
        "vLLM qwen3_omni_moe_thinker: Whisper frames (no cap), 13 tokens per 100 frames",
    ),
    "gemma4": _Rule(
        _gemma4_rate, _gemma4_count, "vLLM gemma4_mm: mel frames, two stride-2 convolutions"
    ),
}


def sound_tokens(
    model_type: str, samples: int, rate: int, processor: Mapping[str, Any] | None = None
) -> SoundTokens | None:
    """The worker's layout of one sound of ``samples`` at ``rate`` (``None``: a model
    type whose arithmetic mmctl does not know — the worker decides).
    ``processor``: the checkpoint's processor_config.json (Gemma 4 reads its values)."""
    rule = RULES.get(model_type)
    if rule is None:
        return None
    values = processor or {}
    target = rule.rate(values)
    at_model_rate = resampled(samples, rate, target)
    tokens, run = rule.count(at_model_rate, values)
    return SoundTokens(at_model_rate, target, tokens, run, rule.rule)
