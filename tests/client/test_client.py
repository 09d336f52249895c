"""mmctl.Client and AsyncClient: one set-up, many requests, threads and asyncio."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

import mmctl

PROMPT = "Which colours appear, in order?"
SETUP = ("probe_s", "model_files_s", "tokenizer_s")


def _bundle_fetches(stub) -> int:
    return stub.log.getvalue().count("GetTokenizer")


def test_one_set_up_serves_many_requests(make_stub, red_blue, no_leaks):
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client:
        results = [client.send(red_blue, PROMPT, transport=t) for t in ("shm", "inline", "auto")]
    assert [r.answer for r in results] == ["red, blue"] * 3
    assert all(k in results[0].timings for k in SETUP)
    assert not any(k in r.timings for r in results[1:] for k in SETUP)
    for r in results:
        rows = {k: v for k, v in r.timings.items() if k != "total_s"}
        assert sum(rows.values()) == pytest.approx(r.timings["total_s"], abs=1e-9)
    assert _bundle_fetches(stub) == 1


def test_many_threads_share_one_client(make_stub, red_blue, picture, no_leaks):
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client:
        media = [red_blue, picture] * 6
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda m: client.send(m, PROMPT, transport="shm"), media))
    assert [r.answer for r in results[::2]] == ["red, blue"] * 6
    assert len({r.request_id for r in results}) == 12
    assert sum(any(k in r.timings for k in SETUP) for r in results) == 1  # one paid the set-up
    assert _bundle_fetches(stub) == 1


def test_async_client_many_in_flight(make_stub, red_blue, no_leaks):
    stub = make_stub(delay_ms=20)

    async def main():
        async with mmctl.AsyncClient(stub.running.address) as client:
            return await asyncio.gather(
                *(client.send(red_blue, PROMPT, transport="shm") for _ in range(8))
            )

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["red, blue"] * 8
    assert _bundle_fetches(stub) == 1


def test_async_client_streams_and_replays(make_stub, red_blue, no_leaks):
    stub = make_stub()
    pieces: list[str] = []

    async def main():
        async with mmctl.AsyncClient(stub.running.address) as client:
            built = await client.build(red_blue, PROMPT)
            streamed = await client.send(red_blue, PROMPT, on_text=pieces.append)
            replayed = await client.send_request(built.request, max_tokens=2)
            return streamed, replayed, await client.health()

    streamed, replayed, health = asyncio.run(main())
    assert "".join(pieces) == streamed.answer == "red, blue"
    assert replayed.finish_reason == "length" and replayed.completion_tokens == 2
    assert health.healthy


def test_build_negotiates_with_the_worker_and_replays(make_stub, red_blue, tmp_path):
    stub = make_stub(device_normalize=True)
    with mmctl.Client(stub.running.address) as client:
        built = client.build(red_blue, PROMPT)
        assert built.request.mm_inputs.pixel_values.dtype == "uint8"
        assert built.run.decisions["pixel_dtype"].value == "uint8"
        path = tmp_path / "req.pb"
        assert built.write(path) == path.stat().st_size
        first = client.send_request(path)
        again = client.send_request(built.request)  # the caller's message is not consumed
    assert first.answer == again.answer == "red, blue"


def test_options_are_checked_before_any_network_call(red_blue, tmp_path):
    client = mmctl.Client("127.0.0.1:1")  # nothing listens: a network call would be exit 5
    with pytest.raises(mmctl.UsageError, match=r"top-p must be in \(0, 1\]"):
        client.send(red_blue, top_p=5)
    with pytest.raises(mmctl.UsageError, match="--transport must be one of auto, inline, shm"):
        client.send(red_blue, transport="pigeon")
    with pytest.raises(mmctl.InputError, match="no such file"):
        client.send(tmp_path / "missing.mp4")
    with pytest.raises(TypeError, match="unknown send option"):
        client.send(red_blue, tempurature=0)
    with pytest.raises(mmctl.UsageError, match="cannot apply --prompt"):
        client.send_request(tmp_path / "x.pb", prompt="other")
    with pytest.raises(mmctl.WorkerUnavailable) as err:
        client.send(red_blue)
    assert err.value.exit_code == mmctl.ExitCode.UNAVAILABLE
    client.close()


def test_health_of_a_dead_worker_is_a_value_not_an_exception():
    with mmctl.Client("127.0.0.1:1") as client:
        health = client.health(timeout=2)
    assert not health.healthy and "unavailable" in health.error


def test_offline_preprocess_and_inspect_tokens(red_blue):
    pre = mmctl.preprocess(red_blue, pixel_dtype="uint8", num_frames=4)
    assert pre.grid_thw == (2, 6, 8) and pre.pixel_values.dtype.name == "uint8"
    report = mmctl.inspect_tokens(red_blue, "What happens?", diff="vllm,hf-legacy")
    assert report.check.ok and report.diff is not None
    assert report.as_dict()["items"][0]["grid_thw"] == [4, 6, 8]


def test_no_files_left_behind_by_threads(make_stub, red_blue, no_leaks):
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client, ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: client.send(red_blue, transport="shm"), range(8)))


def test_send_many_builds_the_next_request_while_one_is_answered(make_stub, red_blue, no_leaks):
    stub = make_stub(delay_ms=50)
    pulled: list[int] = []

    def media():
        for n in range(4):
            pulled.append(n)
            yield red_blue

    with mmctl.Client(stub.running.address) as client:
        seen = []
        for result in client.send_many(media(), PROMPT, transport="shm", prefetch=1):
            # The next clip was taken (and handed to the builder) before this answer came back.
            seen.append(len(pulled))
            assert result.answer == "red, blue"
            rows = {k: v for k, v in result.timings.items() if k != "total_s"}
            assert "queued_s" in rows
            assert sum(rows.values()) == pytest.approx(result.timings["total_s"], abs=1e-9)
        assert seen == [2, 3, 4, 4]
        pulled.clear()
        one_by_one = [len(pulled) for _ in client.send_many(media(), PROMPT, prefetch=0)]
        assert one_by_one == [1, 2, 3, 4]
    assert _bundle_fetches(stub) == 1


def test_send_many_stops_cleanly_and_raises_at_the_bad_items_turn(
    make_stub, red_blue, tmp_path, no_leaks
):
    stub = make_stub()
    with mmctl.Client(stub.running.address) as client:
        results = client.send_many([red_blue] * 5, PROMPT, transport="shm", prefetch=2)
        first = next(results)
        results.close()  # two built ahead with their shm files: released, not leaked
        assert first.answer == "red, blue"
        answers = []
        with pytest.raises(mmctl.InputError, match=r"missing\.mp4"):
            for r in client.send_many([red_blue, tmp_path / "missing.mp4", red_blue], PROMPT):
                answers.append(r.answer)
        assert answers == ["red, blue"]
        with pytest.raises(mmctl.UsageError, match="prefetch"):
            next(client.send_many([red_blue], PROMPT, prefetch=-1))
