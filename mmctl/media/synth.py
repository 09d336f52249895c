"""Synthetic media for tests, examples, benchmarks and `mmctl demo`.

Frames are pure functions of their index, so a clip regenerated anywhere
with the same PyAV build decodes to the same pixels. Nothing here is used
on a user's media.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

#: container suffix -> (codec, pixel format)
CODECS = {
    ".mp4": ("libx264", "yuv420p"),
    ".mkv": ("libx264", "yuv420p"),
    ".mov": ("libx264", "yuv420p"),
    ".webm": ("libvpx-vp9", "yuv420p"),
    ".gif": ("gif", "rgb8"),
    ".ts": ("libx264", "yuv420p"),
}

COLORS = {
    "red": (230, 25, 25),
    "green": (25, 200, 40),
    "blue": (25, 40, 230),
    "yellow": (240, 220, 30),
    "white": (245, 245, 245),
    "black": (10, 10, 10),
}


def pattern_frame(index: int, height: int, width: int) -> np.ndarray:
    """A gradient with a moving square; the index shows in the colours."""
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :]
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[..., 0] = (x + index * 7) % 256
    frame[..., 1] = (y + index * 3) % 256
    frame[..., 2] = (x * 0.5 + y * 0.5 + index * 11) % 256
    side = max(2, min(height, width) // 4)
    top = (index * 3) % max(1, height - side)
    left = (index * 5) % max(1, width - side)
    frame[top : top + side, left : left + side] = (255 - index * 13 % 256, 40, 200)
    return frame


def color_frame(rgb: Sequence[int], height: int, width: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(rgb, dtype=np.uint8), (height, width, 3)).copy()


def write_video(
    path: Path,
    frame_at: Callable[[int], np.ndarray],
    count: int,
    fps: float,
    *,
    rotation: int | None = None,
    pts: Sequence[int] | None = None,
    time_base: Fraction | None = None,
    crf: int = 18,
    faststart: bool = False,
    codec: str | None = None,
    encoder_options: Mapping[str, str] | None = None,
) -> Path:
    """Encode ``count`` frames; codec from the suffix unless given. ``pts`` (in
    ``time_base`` units) makes a variable-frame-rate clip; ``faststart`` puts
    an MP4's index (moov) before the frames, as streaming files have it;
    ``encoder_options`` add to (or replace) the encoder's options here."""
    import av

    default_codec, pix_fmt = CODECS[path.suffix.lower()]
    codec = codec or default_codec
    first = frame_at(0)
    height, width = first.shape[:2]
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        rate = Fraction(fps).limit_denominator(1000)
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if codec == "libx264":
            stream.options = {"crf": str(crf), "preset": "veryfast", "threads": "1"}
        elif codec == "libx265":
            stream.options = {"crf": str(crf), "preset": "veryfast", "x265-params": "log-level=0"}
        elif codec == "libvpx-vp9":
            stream.options = {"crf": "30", "b:v": "0", "deadline": "realtime", "threads": "1"}
        if encoder_options:
            stream.options = {**stream.options, **encoder_options}
        if time_base is not None:
            stream.codec_context.time_base = time_base
            stream.time_base = time_base
        if rotation:
            stream.set_display_rotation(rotation)
        for i in range(count):
            frame = av.VideoFrame.from_ndarray(frame_at(i) if i else first, format="rgb24")
            if pts is not None:
                frame.pts = int(pts[i])
                frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def pattern_clip(path: Path, count: int, fps: float, height: int, width: int, **kw: Any) -> Path:
    return write_video(path, lambda i: pattern_frame(i, height, width), count, fps, **kw)


def color_clip(
    path: Path,
    segments: Sequence[tuple[str, float]] = (("red", 2.0), ("blue", 2.0)),
    *,
    fps: float = 8.0,
    height: int = 96,
    width: int = 128,
) -> Path:
    """Solid colour segments, e.g. the demo's red-blue clip (2 s red, 2 s blue)."""
    starts: list[int] = []
    names: list[str] = []
    for name, seconds in segments:
        starts.append(len(names))
        names.extend([name] * round(seconds * fps))
    frames = {name: color_frame(COLORS[name], height, width) for name, _ in segments}
    return write_video(path, lambda i: frames[names[i]], len(names), fps)


def write_image(path: Path, array: np.ndarray, **save_kw: Any) -> Path:
    from PIL import Image

    Image.fromarray(array).save(path, **save_kw)
    return path


#: sound suffix -> (PyAV codec, the sample format it takes)
SOUND_CODECS = {
    ".wav": ("pcm_s16le", "s16"),
    ".flac": ("flac", "s16"),
    ".mp3": ("libmp3lame", "s16p"),
    ".m4a": ("aac", "fltp"),
    ".ogg": ("libopus", "flt"),
    ".opus": ("libopus", "flt"),
}


def tones(freqs: Sequence[float], seconds: float, rate: int) -> np.ndarray:
    """Sine tones one after another, ``seconds`` each, at half scale: float32 in [-1, 1]."""
    n = round(seconds * rate)
    t = np.arange(n, dtype=np.float64) / rate
    return np.concatenate([0.5 * np.sin(2 * np.pi * f * t) for f in freqs]).astype(np.float32)


def write_sound(
    path: Path, samples: np.ndarray, rate: int, channels: int = 1, codec: str | None = None
) -> Path:
    """Encode a mono waveform (copied to every channel) with PyAV; the codec from
    the suffix unless given. WAV through the standard library's ``wave`` (exact PCM:
    the same bytes on every machine)."""
    data = np.repeat(samples[None, :], channels, axis=0)
    if path.suffix.lower() == ".wav" and codec is None:
        import wave

        pcm = (np.clip(data, -1, 1) * 32767).round().astype("<i2").T.reshape(-1)
        with wave.open(str(path), "wb") as out:
            out.setnchannels(channels)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(pcm.tobytes())
        return path
    import av

    name = SOUND_CODECS[path.suffix.lower()][0] if codec is None else codec
    layout = {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")
    with av.open(str(path), "w") as out:
        mux_sound(out, out.add_stream(name, rate=rate, layout=layout), data, rate)
    return path


def mux_sound(out: Any, stream: Any, data: np.ndarray, rate: int) -> None:
    """Encode ``data`` (channels × samples, float in [-1, 1]) into an audio ``stream``
    of the open container ``out``, in the sample format its encoder takes."""
    import av

    fmt = stream.codec_context.format.name  # s16, s16p, flt, fltp, …
    layout = stream.codec_context.layout.name
    frame_size = stream.codec_context.frame_size or 1024
    for start in range(0, data.shape[1], frame_size):
        chunk = data[:, start : start + frame_size].astype(np.float32)
        if fmt.startswith(("s16", "s32")):
            kind = np.int16 if fmt.startswith("s16") else np.int32
            chunk = (np.clip(chunk, -1, 1) * np.iinfo(kind).max).round().astype(kind)
        if not fmt.endswith("p"):  # interleaved formats take (1, samples * channels)
            chunk = chunk.T.reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format=fmt, layout=layout)
        frame.sample_rate, frame.pts = rate, start
        for packet in stream.encode(frame):
            out.mux(packet)
    for packet in stream.encode(None):
        out.mux(packet)
