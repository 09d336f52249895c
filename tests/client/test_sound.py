"""Sound end to end: files and a video's soundtrack, sent as media_refs to the stub.

The stub serves the Gemma 4 fixture folder (its config.json names an audio
token, its chat template writes sound) and answers each sound with its pitches
(the dominant frequency of each half second), so the answer proves that the
right sound arrived, whole and in order. The sounds are PCM WAV and FLAC
(lossless: the same samples on every machine).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmctl.media import synth
from tests.conftest import _stub

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"
GEMMA4 = FAMILIES / "gemma4"
NOTE = "sound: the worker processes the whole request"


@pytest.fixture(scope="module")
def sound_model():
    from mmctl.checkpoint.source import from_dir
    from mmctl.models.model import load_any

    return load_any(source=from_dir(GEMMA4))


@pytest.fixture(scope="module")
def sound_stub(sound_model):
    s = _stub(sound_model)
    yield s
    s.close()


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sounds")
    return {
        "a440": synth.write_sound(folder / "a440.wav", synth.tones([440], 1.0, 16000), 16000),
        "rising": synth.write_sound(
            folder / "rising.flac", synth.tones([440, 880], 1.0, 44100), 44100, channels=2
        ),
    }


@pytest.fixture(scope="module")
def talking_clip(tmp_path_factory) -> Path:
    """Two seconds of green with a 660 Hz soundtrack (FLAC in Matroska: lossless)."""
    import av

    path = tmp_path_factory.mktemp("clips") / "talking.mkv"
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=4)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = out.add_stream("flac", rate=16000, layout="mono")
        for n in range(8):
            frame = av.VideoFrame.from_ndarray(
                synth.color_frame((0, 160, 0), 48, 64), format="rgb24"
            )
            frame.pts = n
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode(None):
            out.mux(packet)
        synth.mux_sound(out, sound, synth.tones([660], 2.0, 16000)[None, :], 16000)
    return path


def send(cli, stub, *args: object):
    return cli("send", *args, "--target", stub.running.address, "--model-dir", GEMMA4)


def one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_two_sounds_arrive_whole_and_in_order(cli, sound_stub, sounds, no_leaks):
    r = send(cli, sound_stub, sounds["a440"], sounds["rising"], "-p", "Which pitches?", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["answer"] == "440 Hz; 440 Hz, 880 Hz"
    assert [it["kind"] for it in doc["items"]] == ["audio", "audio"]
    decision = doc["decisions"]["processing"]
    assert (
        decision["value"] == "worker" and "sound is processed by the worker" in decision["reason"]
    )
    assert doc["decisions"]["transport"]["value"] == "inline"
    assert len([line for line in r.err.splitlines() if NOTE in line]) == 1, r.err


def test_sound_and_a_picture_in_the_order_given(cli, sound_stub, sounds, picture):
    r = send(cli, sound_stub, picture, sounds["a440"], "-p", "What?", "--json")
    assert r.code == 0, r.err
    first, second = json.loads(r.out)["answer"].split("; ")
    assert second == "440 Hz" and "Hz" not in first


def test_a_videos_soundtrack_follows_the_video(cli, sound_stub, talking_clip):
    r = send(cli, sound_stub, talking_clip, "--soundtrack", "-p", "What?", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["answer"] == "green; 660 Hz"
    assert [(Path(it["path"]).name, it["kind"]) for it in doc["items"]] == [
        ("talking.mkv", "video"),
        ("talking.mkv", "audio"),
    ]


def test_a_soundtrack_of_a_silent_video_is_refused_before_sending(cli, sound_stub, red_blue):
    r = send(cli, sound_stub, red_blue, "--soundtrack")
    assert r.code == 3 and r.out == ""
    assert "--soundtrack:" in one_error(r.err) and "no audio stream" in r.err


def test_client_processing_is_refused_with_the_reason(cli, sound_stub, sounds):
    r = send(cli, sound_stub, sounds["a440"], "--processing", "client")
    assert r.code == 2 and r.out == ""
    assert "smg-grpc-servicer names every preprocessed tensor batch" in one_error(r.err)


def test_no_chat_is_refused(cli, sound_stub, sounds):
    r = send(cli, sound_stub, sounds["a440"], "--no-chat")
    assert r.code == 2
    assert "sound's placeholder text" in one_error(r.err)


def test_a_bad_sound_file_is_exit_3_and_nothing_is_sent(cli, sound_stub, tmp_path, no_leaks):
    bad = tmp_path / "speech.wav"
    bad.write_text("not sound")
    before = sound_stub.log.getvalue()
    r = send(cli, sound_stub, bad)
    assert r.code == 3 and r.out == ""
    assert "not a sound file PyAV can read" in one_error(r.err)
    assert sound_stub.log.getvalue() == before  # no request reached the worker


def test_a_model_whose_template_writes_no_media_is_refused(cli, stub, sounds):
    # The built-in Qwen3-VL files carry a text-only template: nothing says where sound goes.
    r = cli("send", sounds["a440"], "--target", stub.running.address)
    assert r.code == 3
    assert "does not know where sound goes in a qwen3-vl prompt" in one_error(r.err)


def test_the_stub_refuses_sound_for_a_model_that_takes_none(stub, sounds):
    import base64

    import grpc

    from mmctl.wire import proto

    pb = proto.engine_pb2
    req = pb.GenerateRequest(request_id="sound-to-qwen3-vl", stream=False)
    req.tokenized.input_ids.extend([1, 2, 3])
    url = "data:audio/wav;base64," + base64.b64encode(sounds["a440"].read_bytes()).decode()
    req.media_refs.items.add(modality=proto.common_pb2.AUDIO, url=url)
    req.sampling_params.max_tokens = 4
    with pytest.raises(grpc.RpcError) as caught:
        stub.generate(req)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "reads no audio" in caught.value.details()


def test_the_python_client_sends_sound(sound_stub, sounds):
    import mmctl

    said: list[str] = []
    with mmctl.Client(sound_stub.running.address, model_dir=GEMMA4) as client:
        result = client.send(sounds["rising"], "Which pitches?", on_note=said.append)
        again = client.send([sounds["a440"]], "And now?", media_ref="data", on_note=said.append)
    assert (result.answer, again.answer) == ("440 Hz, 880 Hz", "440 Hz")
    assert len([s for s in said if NOTE in s]) == 1, said


def test_file_refs_need_a_worker_that_reads_files(cli, sound_model, sounds):
    folder = sounds["a440"].parent
    s = _stub(sound_model, allowed_local_media_path=folder)
    try:
        r = send(cli, s, sounds["a440"], "--media-ref", "file", "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["answer"] == "440 Hz"
    finally:
        s.close()


def test_build_writes_a_worker_processed_request_that_replays(cli, sound_stub, sounds, tmp_path):
    out = tmp_path / "sound.pb"
    r = cli("build", sounds["a440"], sounds["rising"], "-o", out, "--model-dir", GEMMA4, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["decisions"]["processing"]["value"] == "worker"
    assert [ref["modality"] for ref in doc["request"]["media_refs"]] == ["AUDIO", "AUDIO"]
    assert doc["request"]["batches"] == []
    r = send(cli, sound_stub, "--request", out, "--json")
    assert r.code == 0, r.err
    replay = json.loads(r.out)
    assert replay["answer"] == "440 Hz; 440 Hz, 880 Hz"
    assert replay["decisions"]["transport"]["value"] == "inline"  # refs carry no tensor
    # for a worker, as send would send it
    r = cli("build", sounds["a440"], "-o", tmp_path / "w.pb", "--model-dir", GEMMA4,
            "--target", sound_stub.running.address, "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert json.loads(r.out)["decisions"]["processing"]["value"] == "worker"


def test_build_refuses_client_only_options_for_sound(cli, sounds, tmp_path):
    r = cli("build", sounds["a440"], "-o", tmp_path / "x.pb", "--model-dir", GEMMA4, "--fps", "1")
    assert r.code == 2 and not (tmp_path / "x.pb").exists()
    assert "--fps" in one_error(r.err)


def test_bench_runs_a_sound_workload(cli, sound_stub, sounds):
    r = cli("bench", "--audio", sounds["a440"], "--audio", sounds["rising"], "-t",
            sound_stub.running.address, "--model-dir", GEMMA4, "--num-prompts", "4", "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["arms"] == ["inline/media_refs"]
    assert doc["processing"]["value"] == "worker"
    run = doc["runs"][0]
    assert (run["completed"], run["failed"]) == (4, 0)
    assert run["median_ttft_ms"] <= run["median_e2el_ms"]


def test_inspect_tokens_shows_each_sound_and_its_tokens(cli, sounds, picture):
    r = cli("inspect-tokens", sounds["a440"], sounds["rising"], "--model-dir", GEMMA4, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    a440, rising = doc["items"]
    assert (a440["duration_s"], a440["sample_rate"], a440["channels"]) == (1.0, 16000, 1)
    # Gemma 4: 40 ms a token, plus <boa> and <eoa>; 44.1 kHz resampled to 16 kHz first
    assert a440["tokens"]["audio_tokens"] == 25 and a440["tokens"]["placeholder_run"] == 27
    assert rising["sample_rate"] == 44100 and rising["tokens"]["samples_at_model_rate"] == 32000
    assert (
        doc["num_tokens"]
        == doc["num_tokens_unexpanded"] - 2 + 27 + rising["tokens"]["placeholder_run"]
    )
    # beside a picture the worker expands, the total is the worker's
    r = cli("inspect-tokens", picture, sounds["a440"], "--model-dir", GEMMA4)
    assert r.code == 0, r.err
    assert "→ 25 audio tokens (+2 markers)" in r.out and "decided by the worker" in r.out


def test_the_async_client_sends_sound_and_a_soundtrack(sound_stub, sounds, talking_clip):
    import asyncio

    import mmctl

    async def ask() -> list[str]:
        async with mmctl.AsyncClient(sound_stub.running.address, model_dir=GEMMA4) as client:
            one = await client.send(sounds["a440"], "Which pitch?")
            two = await client.send(talking_clip, "What?", soundtrack=True)
            return [one.answer, two.answer]

    assert asyncio.run(ask()) == ["440 Hz", "green; 660 Hz"]
