"""Sound files: what the local check accepts and refuses, before any worker.

Every refusal is one typed error (exit 3) from a bounded decode: the worker's
limits (vLLM's defaults) stop a lying header, a long file or a decode bomb at
the limit. The WAV files are written with the standard library (exact PCM);
the compressed ones are only accepted or refused here, never compared sample by sample.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mmctl.errors import ExitCode, InputError
from mmctl.media import audio, synth
from mmctl.media.probe import MediaKind, check_media, media_kind


def wav(path: Path, freqs=(440.0,), seconds=0.5, rate=16000, channels=1) -> Path:
    return synth.write_sound(path, synth.tones(freqs, seconds, rate), rate, channels)


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".mp3", ".m4a", ".ogg", ".opus"])
def test_each_sound_format_is_a_sound_and_decodes(tmp_path, suffix):
    rate = 48000 if suffix in (".ogg", ".opus") else 16000  # Opus runs at 48 kHz
    path = synth.write_sound(tmp_path / f"a{suffix}", synth.tones([440], 0.5, rate), rate, 2)
    assert check_media(path) is MediaKind.AUDIO
    info = audio.check_audio(path)
    assert info.sample_rate == rate and info.channels == 2
    assert 0.45 < info.duration_s < 0.6  # codecs pad their last frame


def test_pcm_facts_are_exact(tmp_path):
    info = audio.check_audio(wav(tmp_path / "a.wav", seconds=1.25, rate=22050, channels=3))
    assert (info.samples, info.sample_rate, info.channels) == (27562, 22050, 3)
    waveform, _ = audio.load_audio(tmp_path / "a.wav")
    assert waveform.shape == (27562,) and waveform.dtype.name == "float32"


def test_kind_from_the_first_bytes_without_a_suffix(tmp_path):
    path = wav(tmp_path / "a.wav")
    bare = path.rename(tmp_path / "recording")
    assert media_kind(bare) is MediaKind.AUDIO


def refused(path: Path) -> InputError:
    with pytest.raises(InputError) as caught:
        check_media(path)
    err = caught.value
    assert err.exit_code is ExitCode.BAD_INPUT and "\n" not in err.message
    return err


def test_a_text_file_named_wav(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("this is not sound\n" * 10)
    assert "not a sound file PyAV can read" in refused(path).message


def test_zero_samples(tmp_path):
    import numpy as np

    path = synth.write_sound(tmp_path / "empty.wav", np.zeros(0, np.float32), 16000)
    assert "no sound (0 samples)" in refused(path).message


def test_an_empty_file(tmp_path):
    (tmp_path / "empty.flac").write_bytes(b"")
    assert "empty (0 bytes)" in refused(tmp_path / "empty.flac").message


def _lie_about_length(path: Path, data_bytes: int) -> None:
    """Rewrite the RIFF and data chunk sizes of a standard 44-byte-header WAV."""
    raw = bytearray(path.read_bytes())
    assert raw[36:40] == b"data"
    raw[4:8] = struct.pack("<I", 36 + data_bytes)
    raw[40:44] = struct.pack("<I", data_bytes)
    path.write_bytes(bytes(raw))


def test_a_header_that_lies_about_its_length(tmp_path):
    # 0.2 s of sound under a header claiming 3 hours: FFmpeg's WAV demuxer (vLLM's
    # PyAV loader's too) bounds the claim by the file's size, so what is there is read.
    path = wav(tmp_path / "liar.wav", seconds=0.2)
    _lie_about_length(path, 3 * 3600 * 16000 * 2)
    assert audio.check_audio(path).samples == 3200


def test_a_three_hour_file_is_refused_from_its_header(tmp_path):
    import wave

    path = tmp_path / "three-hours.wav"
    with wave.open(str(path), "wb") as out:  # 3 h of 1 kHz silence: 21.6 MB, under 25 MiB
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(1000)
        out.writeframes(bytes(3 * 3600 * 1000 * 2))
    err = refused(path)
    assert "10800 s long by its header" in err.message and "600 s limit" in err.message


def test_a_header_that_claims_less_decodes_what_it_claims(tmp_path):
    path = wav(tmp_path / "short.wav", seconds=1.0)
    _lie_about_length(path, 16000)  # half a second of s16 mono
    assert audio.check_audio(path).samples == 8000  # as a WAV demuxer reads it


def test_a_long_file_stops_at_the_limit(tmp_path, monkeypatch):
    # under the header check's one second of slack, so the decode itself stops it
    monkeypatch.setattr(audio, "MAX_DURATION_S", 1.5)
    path = wav(tmp_path / "long.wav", seconds=2.4)
    err = refused(path)
    assert "longer than the worker's 2 s limit" in err.message and "ffmpeg -t" in (err.hint or "")


def test_eight_channels_at_384_khz(tmp_path, monkeypatch):
    path = wav(tmp_path / "wide.wav", seconds=0.1, rate=384000, channels=8)
    info = audio.check_audio(path)  # small enough: taken
    assert (info.channels, info.sample_rate, info.samples) == (8, 384000, 38400)
    # the decode-bytes guard: 8 channels of float32 at 384 kHz fill 256 MiB in 22 s
    monkeypatch.setattr(audio, "MAX_DECODE_BYTES", 8 * 4 * 384000 // 20)
    err = refused(path)
    assert "MiB of PCM (8 channels at 384000 Hz" in err.message and "-ac 1" in (err.hint or "")


def test_a_file_over_the_workers_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(audio, "MAX_FILE_BYTES", 1000)
    err = refused(wav(tmp_path / "big.wav", seconds=0.5))
    assert "MiB limit for a sound file" in err.message


def test_cover_art_is_read_past_but_a_video_stream_is_refused(tmp_path, red_blue):
    import av
    import numpy as np

    # An MP3 with cover art (an attached picture): a sound, as vLLM's loader reads it.
    cover = tmp_path / "cover.mp3"
    with av.open(str(cover), "w") as out:
        sound = out.add_stream("libmp3lame", rate=16000, layout="mono")
        picture = out.add_stream("mjpeg")
        picture.width, picture.height, picture.pix_fmt = 16, 16, "yuvj420p"
        try:
            picture.disposition = av.stream.Disposition.attached_pic
        except TypeError:  # the runtime floor's PyAV (15.0) reads a disposition, cannot write one
            pytest.skip("this PyAV cannot write a stream's disposition")
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        for packet in picture.encode(frame.reformat(format="yuvj420p")):
            out.mux(packet)
        synth.mux_sound(out, sound, synth.tones([440], 0.5, 16000)[None, :], 16000)
    assert audio.check_audio(cover).sample_rate == 16000
    # A video (with or without sound) named as a sound file.
    renamed = tmp_path / "clip.mp3"
    renamed.write_bytes(red_blue.read_bytes())
    err = refused(renamed)
    assert "video stream beside its sound" in err.message or "holds no audio stream" in err.message


def test_soundtrack_check_reads_past_the_pictures(tmp_path):
    import av
    import numpy as np

    clip = tmp_path / "clip.mp4"
    with av.open(str(clip), "w") as out:
        video = out.add_stream("libx264", rate=8)
        video.width, video.height, video.pix_fmt = 32, 32, "yuv420p"
        sound = out.add_stream("aac", rate=16000, layout="mono")
        for n in range(8):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 200, np.uint8), format="rgb24")
            frame.pts = n
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode(None):
            out.mux(packet)
        synth.mux_sound(out, sound, synth.tones([660], 1.0, 16000)[None, :], 16000)
    info = audio.check_soundtrack(clip)
    assert info.sample_rate == 16000 and info.duration_s > 0.9
    with pytest.raises(InputError, match="video stream beside its sound"):
        audio.check_audio(clip)
