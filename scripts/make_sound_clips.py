"""Write the engine check's sound clips under tests/fixtures/media/ and record their sums.

Committed, like the other parity media (an encoder's bytes may differ between
machines and versions; the check compares what two paths make of the same
file, so every machine must send the same file):

    .venv/bin/python scripts/make_sound_clips.py

16 kHz mono, the rate Gemma 4's feature extractor (and Qwen's) reads, so
vLLM does not resample them (its default resampler, torchaudio, has no CPU
build to install beside the engine's torch):

``sound_tone.wav``: 0.25 s of a 440 Hz sine, 16-bit PCM WAV (8 KB; 6 audio
tokens on Gemma 4). ``sound_tone_880.wav``: the same at 880 Hz — the negative
control sends it in place of the first: the same length, so the same prompt
ids, and only the sound differs. ``sound_two_tone.flac``: 0.5 s, a 660 Hz
sine then a 990 Hz one, FLAC (12 audio tokens: two items of different lengths
in one request).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmctl.media.synth import tones, write_sound  # noqa: E402

MEDIA = ROOT / "tests" / "fixtures" / "media"
SUMS = MEDIA / "SHA256SUMS"
RATE = 16000
CLIPS = {  # name: the tones one after another, seconds each
    "sound_tone.wav": ((440,), 0.25),
    "sound_tone_880.wav": ((880,), 0.25),
    "sound_two_tone.flac": ((660, 990), 0.25),
}


def record_sums(paths: list[Path]) -> None:
    """Add (or update) the files' lines in SHA256SUMS, which lists every media file."""
    sums = {}
    for line in SUMS.read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    for path in paths:
        sums[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    SUMS.write_text("".join(f"{sums[name]}  {name}\n" for name in sorted(sums)))


def main() -> int:
    paths = [write_sound(MEDIA / name, tones(f, s, RATE), RATE) for name, (f, s) in CLIPS.items()]
    record_sums(paths)
    for path in paths:
        print(f"{path.stat().st_size:,}  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
