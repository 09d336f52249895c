"""Sound files: the local check before a request, and the decoded waveform.

mmctl never preprocesses sound: smg-grpc-servicer 0.14.1 names every
preprocessed tensor batch but video "image" (``mm_keys.modality_name``), so
audio features could not reach vLLM as audio. Sound travels as ``media_refs``
and vLLM decodes it (``vllm/multimodal/media/audio.py``: torchcodec, else
soundfile, else PyAV, all at the file's own rate, mixed to mono by the mean
of the channels). What this module does is what a person wants before a
request leaves: a file the worker would refuse is refused here, with the
reason, and the facts ``inspect-tokens`` shows (duration, rate, channels, and
the sample count the worker's feature extractor sees) come from a real decode.

The limits are vLLM's defaults for a worker's audio (``vllm/envs.py``): the
encoded file (``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB``), the decoded duration
(``VLLM_MAX_AUDIO_DECODE_DURATION_S``) and the decoded float32 PCM bytes
(``VLLM_MAX_AUDIO_DECODE_BYTES``, all channels at the native rate). The
check decodes at most that much: a header that lies about its length, a
3-hour file or a "sample-rate bomb" stops at the limit, never after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmctl.errors import InputError

#: ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB`` (25): the largest encoded file a worker fetches.
MAX_FILE_BYTES = 25 * 2**20
#: ``VLLM_MAX_AUDIO_DECODE_DURATION_S`` (600): the longest sound a worker decodes.
MAX_DURATION_S = 600.0
#: ``VLLM_MAX_AUDIO_DECODE_BYTES`` (256 MiB): float32 PCM a worker's decode may hold.
MAX_DECODE_BYTES = 268_435_456


@dataclass(frozen=True)
class AudioInfo:
    """A sound file as decoded (not as its header claims)."""

    path: str
    container: str
    codec: str
    sample_rate: int
    channels: int
    #: Samples per channel at ``sample_rate``, counted while decoding.
    samples: int

    @property
    def duration_s(self) -> float:
        return self.samples / self.sample_rate

    def as_dict(self) -> dict[str, Any]:
        return {
            "container": self.container,
            "codec": self.codec,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "samples": self.samples,
            "duration_s": round(self.duration_s, 6),
        }


def check_audio(path: Path) -> AudioInfo:
    """Decode the whole stream once, counting samples (nothing is kept); a typed
    error for what a worker would refuse. Bounded: it stops at the worker's limits."""
    _check_size(path)
    return _decode(path, None, video_ok=False)


def check_soundtrack(path: Path) -> AudioInfo:
    """A video's own sound, checked as :func:`check_audio` checks a sound file (the
    worker decodes the video file's first audio stream, and the file is what travels)."""
    _check_size(path, "sent as its soundtrack, the video file")
    return _decode(path, None, video_ok=True)


def load_audio(path: Path) -> tuple[np.ndarray, AudioInfo]:
    """The waveform as vLLM's PyAV loader makes it: float32, mono (the mean of the
    channels), at the file's own rate; a video file's first audio stream as vLLM
    reads it (its pictures ignored)."""
    chunks: list[np.ndarray] = []
    info = _decode(path, chunks.append, video_ok=True)
    audio = np.concatenate(chunks, axis=-1).astype(np.float32)
    if audio.ndim > 1:
        audio = audio.mean(axis=0)
    return audio, info


def _check_size(path: Path, what: str = "a sound file") -> None:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(
            f"{path}: {size / 2**20:.1f} MiB is over the worker's "
            f"{MAX_FILE_BYTES // 2**20} MiB limit for {what} "
            "(vLLM's VLLM_MAX_AUDIO_CLIP_FILESIZE_MB)",
            hint="send the sound alone: ffmpeg -i VIDEO -vn -c:a copy SOUND.m4a"
            if "video" in what
            else None,
        )


def _decode(path: Path, sink: Callable[[np.ndarray], None] | None, *, video_ok: bool) -> AudioInfo:
    """Decode the first audio stream, each frame's (channels, samples) to ``sink``;
    ``video_ok``: a picture stream beside it is read past, as vLLM's loader does."""
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError) as err:
        raise InputError(f"{path} is not a sound file PyAV can read ({_reason(err)})") from None
    with container:
        if not container.streams.audio:
            raise InputError(f"{path} holds no audio stream")
        video = [s for s in container.streams.video if not _attached_picture(s)]
        if video and not video_ok:
            raise InputError(
                f"{path} holds a video stream beside its sound: as a sound file only its "
                "audio would be read",
                hint="send it as a video (a video suffix such as .mp4), and --soundtrack for its "
                "sound",
            )
        stream = container.streams.audio[0]
        rate, channels = int(stream.rate or 0), int(stream.channels or 0)
        if rate <= 0 or channels <= 0:
            raise InputError(f"{path}: the audio stream names no sample rate or channel count")
        _check_claimed_duration(path, container, stream)
        max_samples = int(MAX_DURATION_S * rate)
        samples = decoded_bytes = 0
        codec = stream.codec_context.name
        try:
            for frame in container.decode(stream):
                data = frame.to_ndarray()
                if not frame.format.is_planar:  # interleaved: (1, samples * channels)
                    data = data.reshape(-1, channels).T
                n = data.shape[-1]
                samples += n
                decoded_bytes += n * channels * 4
                if samples > max_samples:
                    raise InputError(
                        f"{path} is longer than the worker's {MAX_DURATION_S:.0f} s limit for "
                        "sound (vLLM's VLLM_MAX_AUDIO_DECODE_DURATION_S)",
                        hint="cut it (ffmpeg -t 600) or raise the worker's limit",
                    )
                if decoded_bytes > MAX_DECODE_BYTES:
                    raise InputError(
                        f"{path} decodes to over the worker's {MAX_DECODE_BYTES // 2**20} MiB "
                        f"of PCM ({channels} channels at {rate} Hz; vLLM's "
                        "VLLM_MAX_AUDIO_DECODE_BYTES)",
                        hint="downmix or resample it (ffmpeg -ac 1 -ar 16000)",
                    )
                if sink is not None:
                    sink(data.astype(np.float32, copy=False))
        except av.error.FFmpegError as err:
            raise InputError(f"{path}: the sound does not decode ({_reason(err)})") from None
        if samples == 0:
            raise InputError(f"{path} holds no sound (0 samples)")
        return AudioInfo(str(path), container.format.name, codec, rate, channels, samples)


def _check_claimed_duration(path: Path, container: Any, stream: Any) -> None:
    """vLLM refuses from the header before decoding; so does mmctl (a 3-hour file
    costs nothing to refuse). A header that understates is caught while decoding."""
    claimed = None
    if stream.duration and stream.time_base:
        claimed = float(stream.duration * stream.time_base)
    elif container.duration:
        claimed = container.duration / 1_000_000
    if claimed is not None and claimed > MAX_DURATION_S + 1.0:
        raise InputError(
            f"{path} is {claimed:.0f} s long by its header, over the worker's "
            f"{MAX_DURATION_S:.0f} s limit for sound (vLLM's VLLM_MAX_AUDIO_DECODE_DURATION_S)",
            hint="cut it (ffmpeg -t 600) or raise the worker's limit",
        )


def _attached_picture(stream: Any) -> bool:
    # Cover art in an MP3/M4A/FLAC is a one-picture "video" stream; vLLM's loader
    # reads the audio stream and ignores it, and so does mmctl.
    try:
        import av

        return bool(stream.disposition & av.stream.Disposition.attached_pic)
    except (AttributeError, TypeError):
        return False


def _reason(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err).split(":")[0] or type(err).__name__
