"""`mmctl inspect-tokens` and `mmctl build` as users and scripts run them."""

from __future__ import annotations

from mmctl.wire import proto


def test_inspect_shows_frames_and_passes(cli, red_blue):
    r = cli("inspect-tokens", red_blue, "-p", "Which colours appear, in order?")
    assert r.code == 0, r.err
    assert "frame 1" in r.out and "<0.2 seconds>" in r.out and "<|video_pad|>×12" in r.out
    assert "pass" in r.out and "span [4, 84)" in r.out


def test_inspect_json_for_scripts(cli, red_blue):
    r = cli("inspect-tokens", red_blue, "--json", "--ids")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["check"]["ok"] and doc["check"]["frames_checked"] == 4
    (item,) = doc["items"]
    assert item["grid_thw"] == [4, 6, 8] and item["frame_indices"][:2] == [0, 4]
    assert item["patch_times_s"][0] == 0.25  # mean of 0/8 s and 4/8 s; printed "<0.2 seconds>"
    assert len(doc["input_ids"]) == doc["num_tokens"] == doc["totals"]["tokens"]
    kinds = {row["kind"] for row in doc["rows"]}
    assert {"timestamp", "vision_start", "pads", "vision_end", "span_start"} <= kinds


def test_diff_vllm_hf_legacy_shows_the_known_differences(cli, red_blue):
    r = cli("inspect-tokens", red_blue, "--diff", "vllm,hf-legacy", "--json")
    assert r.code == 0, r.err
    d = r.json()["diff"]
    assert d["a_tokens"] - d["b_tokens"] == 2  # hf-legacy drops the outer marker pair
    assert d["b_spans"][0]["offset"] == d["a_spans"][0]["offset"] - 1  # from the outer start on
    assert d["differences"] and d["a_check"]["ok"] and d["b_check"]["ok"]
    human = cli("inspect-tokens", red_blue, "--diff", "vllm,hf-legacy")
    assert "diff" in human.out and "hf-legacy" in human.out


def test_the_retired_smg_layout_is_a_usage_error(cli, red_blue):
    # smg >= 1.13.0 sends the vllm layout (tests/compat/test_smg_gateway.py).
    r = cli("inspect-tokens", red_blue, "--layout", "smg")
    assert r.code == 2 and "'smg' is not one of 'vllm', 'hf-legacy'" in r.err


def test_bad_diff_is_usage_error(cli, red_blue):
    r = cli("inspect-tokens", red_blue, "--diff", "vllm,vllm")
    assert r.code == 2 and "Error:" in r.err


def test_build_writes_a_request_and_json_summarises_tensors(cli, red_blue, picture, tmp_path):
    out = tmp_path / "req.pb"
    r = cli(
        "build",
        picture,
        red_blue,
        "-p",
        "Compare.",
        "-o",
        out,
        "--pixel-dtype",
        "bfloat16",
        "--json",
    )
    assert r.code == 0, r.err
    doc = r.json()
    batches = doc["request"]["batches"]
    assert [b["modality"] for b in batches] == ["IMAGE", "VIDEO"]
    pixels = batches[1]["tensors"]["pixel_values"]
    assert pixels["dtype"] == "bfloat16" and pixels["bytes"] == 192 * 1536 * 2
    assert "inline" not in str(batches[0]["tensors"]["pixel_values"].get("values", ""))
    req = proto.engine_pb2.GenerateRequest()
    req.ParseFromString(out.read_bytes())
    assert req.request_id == doc["request"]["request_id"]
    # The written request passes the walk when inspected back.
    back = cli("inspect-tokens", "--request", out, "--json")
    assert back.code == 0 and back.json()["check"]["ok"]


def test_inspecting_a_broken_request_exits_6(cli, red_blue, tmp_path):
    out = tmp_path / "req.pb"
    assert cli("build", red_blue, "-o", out).code == 0
    req = proto.engine_pb2.GenerateRequest()
    req.ParseFromString(out.read_bytes())
    ids = list(req.tokenized.input_ids)
    vs = 151652
    starts = [i for i, t in enumerate(ids) if t == vs]
    ids[starts[2]] = 27  # frame 2's <|vision_start|> becomes text
    del req.tokenized.input_ids[:]
    req.tokenized.input_ids.extend(ids)
    out.write_bytes(req.SerializeToString())
    r = cli("inspect-tokens", "--request", out)
    assert r.code == 6
    assert "frame 2/4" in r.err and "FAIL" in r.out


def test_build_refuses_too_many_items(cli, red_blue, tmp_path):
    r = cli("build", red_blue, red_blue, "-o", tmp_path / "x.pb", "--mm-item-limits", "video=1")
    assert r.code == 3 and "allows 1" in r.err
    assert not (tmp_path / "x.pb").exists()


def test_build_bad_pixel_dtype(cli, red_blue, tmp_path):
    r = cli("build", red_blue, "-o", tmp_path / "x.pb", "--pixel-dtype", "float64")
    assert r.code == 2 and "float64" in r.err


def test_frame_rows_line_up_for_every_family_with_frame_text(cli):
    # Issue 44: Gemma 4's frames after the first start " 00:01 " (InternVL's
    # "\nFrame2: "), and each such row was one column (or two) to the right.
    import re
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    for family in ("gemma4", "internvl", "glm4v", "qwen3_5"):
        r = cli("inspect-tokens", fixtures / "media" / "tok64.mp4", "--model-dir",
                fixtures / "families" / family)  # fmt: skip
        assert r.code == 0, r.err
        rows = [m for line in r.out.splitlines() if (m := re.search(r"│ frame \d+ +(\S)", line))]
        assert len(rows) == 6, r.out
        assert len({m.start(1) for m in rows}) == 1, (family, r.out)
        json_rows = cli("inspect-tokens", fixtures / "media" / "tok64.mp4", "--model-dir",
                        fixtures / "families" / family, "--json").json()["rows"]  # fmt: skip
        if family == "gemma4":  # the document keeps the text as the tokens spell it
            assert [row["text"] for row in json_rows if row["kind"] == "timestamp"][1] == " 00:01 "


def test_inspect_shows_what_the_workers_pruning_keeps(cli, red_blue):
    r = cli("inspect-tokens", red_blue, "--video-pruning-rate", "0.75")
    assert r.code == 0, r.err
    assert "video    48 → 12 tokens at rate 0.75 (evs)" in r.out
    assert "<|video_pad|>×12" in r.out and "pass" in r.out
    doc = cli("inspect-tokens", red_blue, "--json", "--video-pruning-rate", "0.5",
              "--video-pruning-method", "vidcom2").json()  # fmt: skip
    assert doc["video_pruning"] == {
        "rate": 0.5, "method": "vidcom2", "enabled": True, "video_tokens": 48, "kept_tokens": 24,
    }  # fmt: skip
    assert "video_pruning" not in cli("inspect-tokens", red_blue, "--json").json()


def test_a_pruned_request_file_checks_against_the_rate_it_is_read_with(cli, red_blue, tmp_path):
    out = tmp_path / "pruned.pb"
    built = cli("build", red_blue, "-o", out, "--video-pruning-rate", "0.5", "--json")
    assert built.code == 0, built.err
    assert built.json()["video_pruning"]["rate"] == 0.5
    ok = cli("inspect-tokens", "--request", out, "--video-pruning-rate", "0.5", "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["video_pruning"]["kept_tokens"] == 24
    wrong = cli("inspect-tokens", "--request", out)
    assert wrong.code == 6
    assert "--video-pruning-rate 0" in wrong.err


def test_bad_pruning_flags_are_usage_errors(cli, red_blue, tmp_path):
    r = cli("inspect-tokens", red_blue, "--video-pruning-rate", "1")
    assert r.code == 2 and "must be in [0, 1)" in r.err
    r = cli("inspect-tokens", red_blue, "--video-pruning-method", "topk")
    assert r.code == 2
