"""`mmctl bench` against stub workers: the report, its files, interleaving, errors, resources, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

VLLM_KEYS = {
    "completed", "failed", "request_throughput", "output_throughput", "total_token_throughput",
    "median_ttft_ms", "mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "median_itl_ms",
    "median_e2el_ms", "p99_e2el_ms",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMCTL_TARGET", raising=False)


def _bench(cli, stub, *args):
    return cli("bench", "--target", stub.running.address, *args)


def test_sizes_inline_and_shm_interleaved(cli, stub, no_leaks):
    res = _bench(cli, stub, "--sizes", "256KB,2MB", "--num-prompts", "16", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["arms"] == ["inline/bfloat16", "shm/bfloat16"]
    (run,) = doc["runs"]
    assert set(run) >= VLLM_KEYS and run["completed"] == 16 and run["failed"] == 0
    for arm in run["arms"].values():
        assert set(arm) >= VLLM_KEYS and arm["completed"] == 8
        assert arm["median_handoff_ms"] >= 0 and arm["errors"] == {}
    ratio = doc["shm_over_inline"]["bfloat16"]
    assert ratio["e2el"]["ci_low"] <= ratio["e2el"]["ratio"] <= ratio["e2el"]["ci_high"]
    assert set(ratio["by_item"]) == {"256KB", "2MB"}
    sizes = sorted(int(k) for k in doc["floors"])
    assert len(sizes) == 2 and all(doc["floors"][str(s)]["grpc_unary_s"] > 0 for s in sizes)
    rows = run["floor_ratios"]
    assert {"handoff_over_fresh_shm_file", "handoff_over_memcpy"} <= set(rows["shm/bfloat16 @ 2MB"])
    assert "e2el_over_grpc_unary" in rows["inline/bfloat16 @ 2MB"]
    res_doc = doc["resources"]
    assert res_doc["fds_before"] == res_doc["fds_after"]
    assert res_doc["shm_files_before"] == res_doc["shm_files_after"]
    assert doc["interrupted"] is False


def test_files_vllm_result_per_request_and_plot(cli, stub, tmp_path, no_leaks):
    save, lines, plot = tmp_path / "run.json", tmp_path / "req.jsonl", tmp_path / "lat.png"
    res = _bench(
        cli, stub, "--sizes", "128KB,1MB", "--num-prompts", "8", "--max-concurrency", "1,3",
        "--save-result", save, "--per-request", lines, "--plot", plot, "--no-floors",
    )  # fmt: skip
    assert res.code == 0, res.err
    assert "shm/inline (bfloat16) median E2EL" in res.out and "Successful requests" in res.out
    for concurrency in (1, 3):
        saved = json.loads((tmp_path / f"run-concurrency{concurrency}.json").read_text())
        assert set(saved) >= VLLM_KEYS and saved["max_concurrency"] == concurrency
        assert saved["backend"] == "vllm-grpc" and saved["num_prompts"] == 8
        for key in ("ttfts", "itls", "latencies", "input_lens", "output_lens", "generated_texts"):
            assert len(saved[key]) == 8
        assert all(text.startswith("red") for text in saved["generated_texts"])
    records = [json.loads(line) for line in lines.read_text().splitlines()]
    assert len(records) == 16
    assert {r["arm"] for r in records} == {"inline/bfloat16", "shm/bfloat16"}
    assert all(r["error"] is None and r["latency_s"] >= r["ttft_s"] > 0 for r in records)
    assert {r["concurrency"] for r in records} == {1, 3}
    first = [r["arm"] for r in records if r["concurrency"] == 1]
    assert first != sorted(first)  # interleaved, not one block then the other
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    wrote = [line for line in res.err.splitlines() if line.startswith("wrote ")]
    assert wrote == [  # every file named, the two result names it chose too
        f"wrote {tmp_path / 'run-concurrency1.json'}",
        f"wrote {tmp_path / 'run-concurrency3.json'}",
        f"wrote {lines}",
        f"wrote {plot}",
    ]


def test_vllm_spellings_of_save_result(cli, stub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ("--sizes", "128KB", "--num-prompts", "2", "--no-floors", "--transport", "inline")
    res = _bench(cli, stub, *args, "--save-result", "--result-dir", tmp_path / "out",
                 "--result-filename", "r.json", "--json")  # fmt: skip
    assert res.code == 0, res.err
    assert json.loads((tmp_path / "out" / "r.json").read_text())["num_prompts"] == 2
    assert f"wrote {tmp_path / 'out' / 'r.json'}" in res.err.splitlines()
    json.loads(res.out)  # --json: stdout is still the one document
    bare = _bench(cli, stub, *args, "--save-result")
    assert bare.code == 0, bare.err
    (saved,) = tmp_path.glob("mmctl-bench-infqps-*.json")  # vLLM's naming, this folder
    assert f"wrote {saved.name}" in bare.err.splitlines()
    stray = _bench(cli, stub, *args, "extra.json")
    assert stray.code == 2 and "unexpected argument 'extra.json'" in stray.err


def test_plot_ticks_are_the_values_asked_for():
    pytest.importorskip("matplotlib")
    from types import SimpleNamespace

    from mmctl.bench.plot import figure

    def record(size: int, item: str) -> SimpleNamespace:
        return SimpleNamespace(ok=True, latency_s=0.01, arm="shm/bf16", payload_bytes=size,
                               item=item)  # fmt: skip

    sizes = [(995_328, "1MB"), (3_981_312, "4MB"), (15_925_248, "16MB")]
    levels = [
        SimpleNamespace(concurrency=c, records=[record(n, name) for n, name in sizes])
        for c in (1, 4, 16)
    ]
    fig = figure(SimpleNamespace(levels=levels), (50, 90, 99))
    fig.canvas.draw()
    by_size, by_conc = fig.axes
    assert [t.get_text() for t in by_conc.get_xticklabels()] == ["1", "4", "16"]
    assert [t.get_text() for t in by_size.get_xticklabels()] == ["1MB", "4MB", "16MB"]
    assert [t.get_text() for t in by_conc.get_legend().get_texts()] == [
        "shm/bf16 1MB", "shm/bf16 4MB", "shm/bf16 16MB"
    ]  # fmt: skip


def test_plot_colours_mean_the_arm_in_both_panels_and_the_label_no_unit():
    # Issue 44: the right panel took a colour per series, so C1 was the shm arm
    # on the left and inline's second payload on the right; and the x-label said
    # "payload (MB)" under tick labels that are names (clip.mp4).
    pytest.importorskip("matplotlib")
    import colorsys

    from matplotlib.colors import to_rgb

    from mmctl.bench.plot import figure

    arms = ("inline/uint8", "shm/uint8")
    sizes = [(995_328, "clip.mp4"), (3_981_312, "4MB"), (15_925_248, "16MB")]
    result, _ = _latencies(arms, sizes, (1, 4))
    fig = figure(result, (50, 99))
    by_size, by_conc = fig.axes

    def hue(line):
        return colorsys.rgb_to_hsv(*to_rgb(line.get_color()))[0]

    def arm_of(line):
        return next(a for a in arms if line.get_gid().startswith(a))

    left = {arm_of(line): hue(line) for line in by_size.get_lines() if line.get_gid()}
    assert abs(left[arms[0]] - left[arms[1]]) > 0.2
    for line in by_conc.get_lines():
        if line.get_gid():
            nearest = min(arms, key=lambda a: abs(left[a] - hue(line)))
            assert nearest == arm_of(line), line.get_gid()
    assert "MB" not in by_size.get_xlabel()
    assert [t.get_text() for t in by_size.get_xticklabels()] == ["clip.mp4", "4MB", "16MB"]


def _latencies(arms, sizes, levels, seed=0):
    """Records with known latencies: (arm, payload bytes, concurrency) → ms."""
    from types import SimpleNamespace

    import numpy as np

    rng = np.random.default_rng(seed)
    drawn: dict = {}
    out = []
    for c in levels:
        records = []
        for arm in arms:
            for size, name in sizes:
                ms = list(rng.uniform(5, 50, 20))
                drawn[(arm, size, c)] = ms
                records += [SimpleNamespace(ok=True, latency_s=v / 1000, arm=arm,
                                            payload_bytes=size, item=name) for v in ms]  # fmt: skip
        out.append(SimpleNamespace(concurrency=c, records=records))
    return SimpleNamespace(levels=out), drawn


@pytest.mark.parametrize(
    ("sizes", "levels"),
    [([(995_328, "1MB"), (3_981_312, "4MB")], (1, 4, 16)), ([(995_328, "clip.mp4")], (1,))],
    ids=["sweep", "one-item"],
)
def test_plot_draws_every_percentile_its_legend_names(sizes, levels):
    """Read back from the figure: each panel draws each percentile asked for, in
    the style the one legend gives it, at the values the data have; with a
    single item each point still says which percentile it is."""
    pytest.importorskip("matplotlib")
    import numpy as np

    from mmctl.bench.plot import figure

    arms = ("inline/uint8", "shm/uint8")
    percentiles = (50, 90, 99)
    result, drawn = _latencies(arms, sizes, levels)
    fig = figure(result, percentiles)
    fig.canvas.draw()
    (legend,) = fig.legends
    keys = {t.get_text(): (h.get_linestyle(), h.get_marker())
            for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)}  # fmt: skip
    assert list(keys) == ["p50", "p90", "p99"]
    assert len(set(keys.values())) == 3 and len({m for _, m in keys.values()}) == 3
    title = fig.get_suptitle()
    assert not any(w in title for w in ("solid", "dashed", "dotted", "p50", "p90"))
    by_size, by_conc = fig.axes
    assert not any(w in by_conc.get_xlabel() for w in ("solid", "dotted"))
    for ax in (by_size, by_conc):
        lines = [line for line in ax.get_lines() if line.get_gid()]
        seen = {line.get_gid().rsplit("|", 1)[1] for line in lines}
        assert seen == set(keys), ax.get_xlabel()
        for line in lines:
            series, pct = line.get_gid().rsplit("|", 1)
            assert (line.get_linestyle(), line.get_marker()) == keys[pct]
            p = float(pct[1:])
            arm = next(a for a in arms if series.startswith(a))
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
                if ax is by_size:
                    size = next(s for s, _ in sizes if abs(s / 1e6 - x) < 1e-9)
                    conc = min(levels)
                else:
                    size = next(s for s, name in sizes if series == f"{arm} {name}")
                    conc = int(x)
                assert y == pytest.approx(float(np.percentile(drawn[(arm, size, conc)], p)))
        colours = {(line.get_gid().rsplit("|", 1)[0], line.get_color()) for line in lines}
        assert len({c for _, c in colours}) == len(colours)  # a colour per series
        legend_names = [t.get_text() for t in ax.get_legend().get_texts()]
        assert sorted(legend_names) == sorted({name for name, _ in colours})


def test_video_and_dataset_workloads(cli, stub, red_blue, tmp_path):
    res = _bench(cli, stub, "--video", red_blue, "--num-prompts", "4", "--transport", "inline",
                 "--no-floors", "--json")  # fmt: skip
    assert res.code == 0, res.err
    assert json.loads(res.out)["runs"][0]["completed"] == 4
    data = tmp_path / "set.jsonl"
    data.write_text(
        json.dumps({"id": "short", "prompt": "Which colours?", "media": [str(red_blue)]})
        + "\n"
        + json.dumps(
            {
                "custom_id": "chat",
                "body": {
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "video_url", "video_url": {"url": red_blue.as_uri()}},
                                {"type": "text", "text": "Which colours?"},
                            ],
                        }
                    ],
                    "max_tokens": 2,
                },
            }
        )
        + "\n"
    )
    lines = tmp_path / "req.jsonl"
    res = _bench(cli, stub, "--dataset", data, "--num-prompts", "4", "--no-floors",
                 "--per-request", lines, "--json")  # fmt: skip
    assert res.code == 0, res.err
    records = [json.loads(line) for line in lines.read_text().splitlines()]
    texts = {r["item"]: r["text"] for r in records}
    assert texts == {"short": "red, blue", "chat": "red,"}  # max_tokens 2 from the line


def test_one_workload(cli, stub, red_blue):
    res = _bench(cli, stub, "--video", red_blue, "--sizes", "1MB")
    assert res.code == 2 and "one workload" in res.err
    assert _bench(cli, stub).code == 2


def test_failed_requests_are_counted_by_code(cli, make_stub):
    # An older worker: it holds items to a budget it does not advertise, so the
    # bench cannot fit the sizes to it, and every 1 MB item is over it.
    tight = make_stub(encoder_budget=16, legacy_proto=True)
    res = cli("bench", "-t", tight.running.address, "--sizes", "1MB", "--num-prompts", "4",
              "--no-floors", "--json")  # fmt: skip
    assert res.code == 4
    doc = json.loads(res.out)
    assert doc["runs"][0]["errors"] == {"INVALID_ARGUMENT": 4}
    assert "4 of 4 requests failed (4 INVALID_ARGUMENT)" in res.err


def test_arms_the_worker_cannot_take_are_refused(cli, make_stub, stub, monkeypatch):
    wants_uint8 = make_stub(device_normalize=True)
    res = cli("bench", "-t", wants_uint8.running.address, "--sizes", "1MB", "--pixel-dtype",
              "float32")  # fmt: skip
    assert res.code == 6 and "normalizes on the device" in res.err
    monkeypatch.setattr("mmctl.client.route.namespace_id", lambda: "another-host:1")
    res = _bench(cli, stub, "--sizes", "1MB")
    assert res.code == 6 and "--transport shm" in res.err and "different /dev/shm" in res.err


def test_a_thousand_requests_leave_nothing_behind(cli, stub, no_leaks):
    res = _bench(cli, stub, "--sizes", "64KB", "--num-prompts", "1000", "--max-concurrency",
                 "16", "--max-tokens", "1", "--no-floors", "--json")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["runs"][0]["completed"] == 1000
    r = doc["resources"]
    assert (r["fds_before"], r["shm_files_before"]) == (r["fds_after"], r["shm_files_after"])
    assert r["peak_rss_mb"] > 0


def test_ctrl_c_prints_the_partial_report_and_removes_every_file(tmp_path):
    stub = subprocess.Popen(
        [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json", "--delay-ms",
         "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        address = json.loads(stub.stdout.readline())["address"]
        env = {**os.environ, "MMCTL_CACHE_DIR": str(tmp_path / "cache")}
        bench = subprocess.Popen(
            [sys.executable, "-m", "mmctl", "bench", "-t", address, "--sizes", "4MB",
             "--num-prompts", "400", "--max-concurrency", "4", "--no-floors", "--json",
             "--per-request", str(tmp_path / "req.jsonl")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        # Interrupt once a measured request is complete on the bench's side: 2
        # warm-up, then 4 at a time, so the stub answering a fifth measured one
        # means the bench had a slot back (one finished). The stub's answer
        # alone is not enough: a loaded machine delays the bench reading it.
        answered = 0
        deadline = time.monotonic() + 120
        while answered < 2 + 4 + 1 and time.monotonic() < deadline:
            line = stub.stderr.readline()
            answered += "Generate" in line and " ok " in line
        assert bench.poll() is None
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=30)
        assert bench.returncode == 130, err
        doc = json.loads(out)
        assert doc["interrupted"] is True and 0 < doc["runs"][0]["completed"] < 400
        assert "interrupted" in err
        leftovers = [p for p in os.listdir("/dev/shm") if p.startswith(f"mmctl-{bench.pid}-")]
        assert leftovers == []
        assert len((tmp_path / "req.jsonl").read_text().splitlines()) == doc["runs"][0]["completed"]
    finally:
        stub.stderr.close()  # a full pipe must not block the stub's log writes
        stub.terminate()
        stub.wait(10)


def test_what_a_person_sees(terminal, stub):
    screen = terminal("bench", "-t", stub.running.address, "--sizes", "256KB",
                      "--num-prompts", "6", "--no-floors")  # fmt: skip
    assert screen.code == 0, screen.text
    text = screen.text
    assert "Median E2EL (ms)" in text and "shm/inline (bfloat16) median E2EL" in text
    assert "preparing" not in text and "warm-up" not in text  # the progress bar is gone
    assert "open fds" in text


def test_several_targets_round_robin(cli, stub, make_stub):
    other = make_stub()
    targets = f"{stub.running.address},{other.running.address}"
    res = cli("bench", "-t", targets, "--sizes", "256KB", "--num-prompts", "8", "--no-floors")
    assert res.code == 0, res.err
    assert "per target" in res.out and other.running.address in res.out
    res = cli("bench", "-t", targets, "--sizes", "256KB", "--num-prompts", "8", "--no-floors",
              "--json")  # fmt: skip
    by_target = json.loads(res.out)["runs"][0]["by_target"]
    assert {t: m["completed"] for t, m in by_target.items()} == {
        stub.running.address: 4,
        other.running.address: 4,
    }
    assert json.loads(res.out)["request_rate"] == "inf"  # JSON has no infinity


def test_sizes_fit_the_workers_encoder_budget_or_are_refused(cli, make_stub, no_leaks):
    # A uint8 (device-normalizing) worker taking 500 feature tokens per item and
    # two videos per request: 4 MB of uint8 pixels is 651 tokens, so two videos.
    small = make_stub(device_normalize=True, encoder_budget=500)
    res = cli("bench", "-t", small.running.address, "--sizes", "4MB", "--num-prompts", "4",
              "--no-floors", "--json")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["runs"][0]["completed"] == 4 and doc["runs"][0]["failed"] == 0
    assert {p["pixel_dtype"]: p["media_items"] for p in doc["prepared"]} == {"uint8": 2}
    # 8 MB would need three: refused before anything is sent, in one line.
    res = cli("bench", "-t", small.running.address, "--sizes", "8MB", "--num-prompts", "4",
              "--no-floors")  # fmt: skip
    assert res.code == 6 and res.out == ""
    (line,) = [x for x in res.err.splitlines() if x.startswith("Error: ")]
    assert "--sizes 8MB: more uint8 pixels than one request to this worker may carry" in line


def test_a_pruning_worker_s_bench_reports_the_tokens_it_keeps(
    cli, make_stub, builtin_model, red_blue
):
    from mmctl.values.pruning import VideoPruning

    worker = make_stub(builtin_model.with_pruning(VideoPruning(0.5)), device_normalize=True)
    res = cli("bench", "-t", worker.running.address, "--video", red_blue, "--num-prompts", "2",
              "--no-floors", "--transport", "inline", "--video-pruning-rate", "0.5", "--json")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["video_pruning"] == {"rate": 0.5, "method": "evs", "enabled": True}
    (prepared,) = doc["prepared"]
    assert (prepared["video_tokens"], prepared["kept_video_tokens"]) == (48, 24)
    assert doc["runs"][0]["completed"] == 2
    human = cli("bench", "-t", worker.running.address, "--video", red_blue, "--num-prompts", "2",
                "--no-floors", "--transport", "inline", "--video-pruning-rate", "0.5")  # fmt: skip
    assert "video: 48 → 24 tokens at rate 0.5 (evs)" in human.out


def test_a_baseline_worker_shows_what_pruning_buys(
    cli, make_stub, builtin_model, red_blue, tmp_path, no_leaks
):
    """--baseline: each arm's twin goes to the worker that does not prune, laid out
    without pruning (the pruning stub refuses that layout, so a twin sent to the
    wrong worker fails the run); the report's figures add up."""
    from mmctl.values.pruning import VideoPruning

    pruning = make_stub(builtin_model.with_pruning(VideoPruning(0.5)), device_normalize=True)
    plain = make_stub(builtin_model, device_normalize=True)
    lines = tmp_path / "req.jsonl"
    args = ("bench", "-t", pruning.running.address, "--video", red_blue, "--num-prompts", "8",
            "--no-floors", "--transport", "inline", "--video-pruning-rate", "0.5",
            "--baseline", plain.running.address)  # fmt: skip
    res = cli(*args, "--per-request", lines, "--save-result", tmp_path / "run.json", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["baseline"] == plain.running.address
    assert doc["arms"] == ["inline/uint8", "inline/uint8/unpruned"]
    (run,) = doc["runs"]
    assert run["failed"] == 0
    assert {name: arm["completed"] for name, arm in run["arms"].items()} == {
        "inline/uint8": 4,
        "inline/uint8/unpruned": 4,
    }
    records = [json.loads(line) for line in lines.read_text().splitlines()]
    assert {(r["arm"], r["target"]) for r in records} == {
        ("inline/uint8", pruning.running.address),
        ("inline/uint8/unpruned", plain.running.address),
    }
    kept = {p["baseline"]: (p["video_tokens"], p["kept_video_tokens"]) for p in doc["prepared"]}
    assert kept == {False: (48, 24), True: (48, 48)}
    effect = run["pruned_over_unpruned"]["inline/uint8"]
    assert effect == doc["pruned_over_unpruned"]["inline/uint8"]
    saved = json.loads((tmp_path / "run.json").read_text())  # vLLM's document, mmctl's extras
    assert saved["mmctl"]["pruned_over_unpruned"]["inline/uint8"] == effect
    assert effect["baseline_arm"] == "inline/uint8/unpruned"
    pruned_tokens, plain_tokens = effect["median_prompt_tokens"]
    assert plain_tokens - pruned_tokens == 48 - 24  # what pruning saves, as the worker counts
    for key in ("ttft", "e2el"):
        ms, ratio = effect[f"median_{key}_ms"], effect[key]
        assert ratio["ratio"] == pytest.approx(ms[0] / ms[1], rel=1e-9)  # one item: the medians'
        assert ratio["ci_low"] <= ratio["ci_high"] and ratio["n"] == [4, 4]

    human = cli(*args)
    assert human.code == 0, human.err
    assert (
        f"video pruning (evs 0.5) against {plain.running.address} (no pruning), "
        "inline/uint8 (medians)" in human.out
    )
    (row,) = [x.split() for x in human.out.splitlines() if x.strip().startswith("prompt tokens")]
    assert float(row[2]) - float(row[3]) == -24 and float(row[4]) == round(
        float(row[2]) / float(row[3]), 3
    )
    for label in ("TTFT (ms)", "E2EL (ms)"):
        (row,) = [x.split() for x in human.out.splitlines() if x.strip().startswith(label)]
        a, b, ratio = float(row[2]), float(row[3]), float(row[4])
        # the ratio of the medians as printed, to their rounding (ms to 0.01, ratio to 0.001)
        assert (a - 0.005) / (b + 0.005) - 0.0005 <= ratio <= (a + 0.005) / (b - 0.005) + 0.0005


def test_baseline_is_refused_without_a_rate_or_as_a_target(cli, stub, red_blue):
    common = ("bench", "-t", stub.running.address, "--video", red_blue, "--no-floors")
    res = cli(*common, "--baseline", "127.0.0.1:1")
    assert res.code == 2 and "--baseline compares pruning workers" in res.err
    res = cli(*common, "--video-pruning-rate", "0.5", "--baseline", stub.running.address)
    assert res.code == 2 and "is also a --target" in res.err
