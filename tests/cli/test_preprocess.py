"""`mmctl preprocess` as a user runs it: summary, --json, --out, --preview, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mmctl.cli.app import main
from mmctl.media import synth


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return synth.color_clip(tmp_path_factory.mktemp("media") / "red-blue.mp4")


def test_human_summary(capsys, clip):
    code, out, err = _run(capsys, "preprocess", clip)
    assert code == 0, err
    assert "grid_thw" in out and "[4, 6, 8]" in out
    assert "32 frames, counted from" in out


def test_json_npz_and_preview(capsys, clip, tmp_path):
    npz, sheet = tmp_path / "x.npz", tmp_path / "sheet.png"
    code, out, err = _run(
        capsys,
        "preprocess",
        clip,
        "--json",
        "--pixel-dtype",
        "uint8",
        "--out",
        npz,
        "--preview",
        sheet,
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["grid_thw"] == [4, 6, 8]
    assert doc["pixel_format"] == "uint8"
    assert doc["frames"]["indices"] == [0, 4, 9, 13, 18, 22, 27, 31]
    assert doc["num_tokens"] == 4 * 6 * 8 // 4
    with np.load(npz) as saved:
        assert saved["pixel_values"].dtype == np.uint8
        assert saved["pixel_values"].shape == (192, 1536)
        assert saved["grid_thw"].tolist() == [[4, 6, 8]]
        assert json.loads(str(saved["summary"]))["family"] == "qwen3-vl"
        # Red first, blue last: the pixels really are the clip's.
        first, last = (
            saved["pixel_values"][0].reshape(3, -1),
            saved["pixel_values"][-1].reshape(3, -1),
        )
        assert first[0].mean() > 200 and first[2].mean() < 60
        assert last[2].mean() > 200 and last[0].mean() < 60
    from PIL import Image

    with Image.open(sheet) as image:
        assert image.size[0] == 6 * 240


def test_flags_override_sampling(capsys, clip):
    code, out, _ = _run(capsys, "preprocess", clip, "--json", "--num-frames", "4")
    assert code == 0
    doc = json.loads(out)
    assert doc["frames"]["indices"] == [0, 10, 21, 31]
    assert doc["settings"]["num_frames"] == {"value": 4, "from": "--num-frames"}
    assert doc["settings"]["fps"]["from"] == "video_preprocessor_config.json"


def test_qwen25_video_shows_and_saves_second_per_grid_ts(capsys, clip, tmp_path):
    out_file = tmp_path / "q.npz"
    code, out, _ = _run(
        capsys, "preprocess", clip, "--family", "qwen2.5-vl", "--json", "-o", str(out_file)
    )
    assert code == 0
    doc = json.loads(out)
    frames = doc["frames"]
    # Tp / sampled fps, as float32 on the wire
    want = np.float32(2 / frames["sampled_fps"])
    assert doc["video_tensors"]["second_per_grid_ts"] == [float(want)]
    with np.load(out_file) as saved:
        assert saved["second_per_grid_ts"].tolist() == [want]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _audio_only(path: Path) -> Path:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 800), dtype=np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.mp4", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "empty.mp4", b""), "is empty"),
        (lambda d: _write(d / "text.mp4", b"hello, not a video\n" * 50), "cannot decode"),
        (lambda d: _audio_only(d / "audio.mkv"), "no video stream"),
        (
            lambda d: synth.write_image(d / "wide.png", np.zeros((2, 420, 3), dtype=np.uint8)),
            "aspect ratio",
        ),
    ],
    ids=["missing", "directory", "empty", "text", "audio-only", "aspect"],
)
def test_bad_input_is_one_line_exit_3(capsys, tmp_path, make, message):
    code, out, err = _run(capsys, "preprocess", make(tmp_path))
    assert code == 3
    assert out == ""
    assert err.startswith("Error: ") and message in err
    assert "Traceback" not in err


def test_truncated_video(capsys, tmp_path, clip):
    data = clip.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 3])
    code, out, err = _run(capsys, "preprocess", cut, "--json")
    # A cut MP4 loses its index (moov at the end): refused with one line.
    assert code == 3, out
    assert err.startswith("Error: ") and "Traceback" not in err


def test_decompression_bomb_guard(capsys, tmp_path, monkeypatch):
    from PIL import Image

    path = synth.write_image(tmp_path / "big.png", np.zeros((300, 300, 3), dtype=np.uint8))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)  # 300*300 > 2x the limit
    code, _, err = _run(capsys, "preprocess", path)
    assert code == 3
    assert "decompression" in err.lower() or "exceeds" in err


def test_bad_flag_value_is_usage(capsys, clip):
    code, _, err = _run(capsys, "preprocess", clip, "--min-frames", "9", "--max-frames", "3")
    assert code == 2
    assert err.startswith("Error: min-frames (9) is larger than max-frames (3)")


@pytest.mark.parametrize("folder", ["", "a-folder-name-long-enough-to-wrap-an-80-column-line-" * 3])
def test_out_writes_exactly_the_path_it_prints(capsys, clip, tmp_path, folder):
    # Piped output is neither wrapped nor padded, whatever the path's length:
    # the printed path is whole on its line, and nothing follows it.
    base = tmp_path / folder
    base.mkdir(exist_ok=True)
    target = base / "x.txt"
    code, out, err = _run(capsys, "preprocess", clip, "--out", target, "--preview", base / "s")
    assert code == 0, err
    assert re.search(rf"^saved +{re.escape(str(target))}$", out, re.M), out
    assert not [line for line in out.splitlines() if line != line.rstrip()], out
    assert sorted(p.name for p in base.iterdir()) == ["s", "x.txt"]
    with np.load(target) as saved:
        assert saved["grid_thw"].tolist() == [[4, 6, 8]]
    assert (base / "s").read_bytes().startswith(b"\x89PNG")


def test_out_into_a_missing_folder_is_bad_input(capsys, clip, tmp_path):
    code, out, err = _run(capsys, "preprocess", clip, "--out", tmp_path / "no" / "x.npz")
    assert code == 3 and out == ""
    assert err.startswith(f"Error: cannot write {tmp_path / 'no' / 'x.npz'}")


# Not a model folder: the goldens.
NOT_WIRED = ("goldens",)
FAMILY_FOLDERS = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "fixtures" / "families").iterdir()
    if p.name not in NOT_WIRED
)


@pytest.mark.parametrize(
    "folder", [None, *FAMILY_FOLDERS], ids=lambda f: f.name if f else "qwen3_vl"
)
def test_an_images_timing_rows_sum_to_its_total(cli, folder):
    """Every family: load + resize/normalize are consecutive rows whose sum is the
    total (the tile families once reported the whole time as the load too)."""
    image = Path(__file__).resolve().parents[1] / "fixtures" / "media" / "large.png"
    args = ["preprocess", image] + (["--model-dir", folder] if folder else [])
    r = cli(*args, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    t = doc["timings_s"]
    assert t["decode_s"] > 0 and t["preprocess_s"] > 0
    assert abs(t["decode_s"] + t["preprocess_s"] - t["total_s"]) < 2e-6
    assert doc["overlapped_s"]["preprocess_s"] == 0  # an image: nothing runs beside the rows
    human = cli(*args)
    line = next(ln for ln in human.out.splitlines() if ln.startswith("time"))
    assert "= decode" in line and "+ resize + normalize" in line and "overlapped" not in line


def test_a_videos_overlapped_work_is_beside_the_rows(cli, clip):
    r = cli("preprocess", clip, "--json")
    doc = json.loads(r.out)
    t = doc["timings_s"]
    assert abs(t["decode_s"] + t["preprocess_s"] - t["total_s"]) < 2e-6
    assert 0 < doc["overlapped_s"]["preprocess_s"] <= t["decode_s"]
