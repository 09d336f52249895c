"""The Ray engine's pure parts: its sizes, its addresses, its errors, the model files per node."""

from __future__ import annotations

import json

import pytest

from mmctl.errors import ExitCode
from mmctl.run_batch import ray_connect
from mmctl.run_batch.ray_files import model_files, node_folder, node_settings
from mmctl.run_batch.ray_plan import plan


def test_the_pools_are_fixed_from_the_cluster():
    # one task per CPU, one send actor per node, the concurrency split between them
    assert vars(plan(2, 1, None, 8)) == {
        "preprocess_tasks": 2, "senders": 1, "calls_per_sender": 8,
    }  # fmt: skip
    assert vars(plan(64, 4, None, 16)) == {
        "preprocess_tasks": 64, "senders": 4, "calls_per_sender": 4,
    }  # fmt: skip
    assert plan(64, 4, 8, 16).preprocess_tasks == 8  # --workers caps them
    assert plan(2, 1, 8, 16).preprocess_tasks == 2  # never more than the CPUs
    assert plan(0.5, 3, None, 2).senders == 2  # no more senders than requests
    assert plan(8, 3, None, 8).in_flight == 9  # rounded up: at most nodes - 1 over


def test_the_address_comes_from_the_option_then_ray_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_connect.address_wanted(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert ray_connect.address_wanted(None) == "127.0.0.1:6379"
    assert ray_connect.address_wanted("ray://127.0.0.1:10001") == "ray://127.0.0.1:10001"


@pytest.mark.parametrize(
    ("address", "loopback"),
    [(None, True), ("127.0.0.1:6379", True), ("ray://localhost:10001", True),
     ("[::1]:6379", True), ("10.0.0.5:6379", False), ("ray://head.example:10001", False)],
)  # fmt: skip
def test_loopback_addresses_are_recognised(address, loopback):
    assert ray_connect.is_loopback(None, address) is loopback


class AuthenticationError(Exception):
    """Named as Ray's (ray.exceptions.AuthenticationError)."""


def test_a_token_refusal_is_one_sentence_with_the_fix():
    err = ray_connect._unreachable("auto", AuthenticationError("Token authentication is on"))
    assert err.exit_code == ExitCode.UNAVAILABLE
    assert err.message == (
        "--ray-address auto: the Ray cluster refused this process (token authentication: "
        "no token, or not the cluster's)"
    )
    assert "RAY_AUTH_TOKEN" in (err.hint or "")
    other = ray_connect._unreachable("127.0.0.1:1", ConnectionError("Could not connect. More."))
    assert (
        other.message
        == "--ray-address 127.0.0.1:1: no Ray cluster answers there (Could not connect)"
    )


def test_the_model_files_are_written_once_per_node(builtin_model, tmp_path, monkeypatch):
    from mmctl.checkpoint.source import ModelSource
    from mmctl.choices import PixelFormat
    from mmctl.run_batch.work import Settings

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    settings = Settings(builtin_model.source, "qwen3-vl", PixelFormat("uint8"))
    files, digest = model_files(settings)
    assert node_settings(settings, files, digest) is settings  # the folder exists here
    elsewhere = Settings(ModelSource("moved", (tmp_path / "gone",)), "qwen3-vl",
                         settings.pixel_format)  # fmt: skip
    first = node_settings(elsewhere, files, digest)
    folder = node_folder(digest)
    assert first.source.folders == (folder,)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files
    stamp = folder.stat().st_ino, folder.stat().st_mtime_ns
    second = node_settings(elsewhere, {}, digest)  # nothing fetched: the folder is there
    assert second.source.folders == (folder,)
    assert (folder.stat().st_ino, folder.stat().st_mtime_ns) == stamp


@pytest.fixture
def refusing_gcs():
    """A gRPC server on 127.0.0.1 that refuses every call as a token-guarded GCS does."""
    from concurrent import futures

    import grpc

    class Refuse(grpc.GenericRpcHandler):
        def service(self, details):
            def refuse(request, context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken")

            return grpc.unary_unary_rpc_method_handler(refuse)

    server = grpc.server(futures.ThreadPoolExecutor(1), handlers=[Refuse()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_cluster_that_wants_a_token_is_one_line_and_exit_5(cli, refusing_gcs, red_blue,
                                                             tmp_path, monkeypatch, scheme):  # fmt: skip
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "media": [str(red_blue)]}) + "\n")
    address = scheme + refusing_gcs
    res = cli("batch", data, "-o", tmp_path / "out.jsonl", "-t", "127.0.0.1:1",
              "--engine", "ray", "--ray-address", address)  # fmt: skip
    assert res.code == 5, res.err
    assert res.err.splitlines() == [
        f"Error: --ray-address {address}: the Ray cluster refused this process (token "
        "authentication: no token, or not the cluster's)",
        "Hint: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the output of `ray get-auth-token` "
        "on the head> (or RAY_AUTH_TOKEN_PATH=<its file>)",
    ]


# ---- a node lost: mmctl's retries, one by one (a real cluster: test_ray_nodes.py) ----

NODE_A, NODE_B = "a" * 56, "b" * 56


class _FakeRay:
    """What the flow asks of Ray: results by ref (an exception is raised), nodes' liveness."""

    def __init__(self) -> None:
        import ray

        self.exceptions = ray.exceptions
        self.results: dict[str, object] = {}
        self.alive = {NODE_A: True, NODE_B: True}

    def get(self, ref: str) -> object:
        value = self.results[ref]
        if isinstance(value, BaseException):
            raise value
        return value

    def nodes(self) -> list[dict]:
        return [{"NodeID": n, "Alive": up} for n, up in self.alive.items()]


class _FakeCalls:
    """A remote function or actor method: each call returns fresh refs."""

    def __init__(self, prefix: str, returns: int) -> None:
        self.prefix, self.returns, self.calls = prefix, returns, []

    def options(self, **options: object) -> _FakeCalls:
        return self

    def remote(self, *args: object) -> object:
        self.calls.append(args)
        n = len(self.calls)
        refs = tuple(f"{self.prefix}{n}-{k}" for k in range(self.returns))
        return refs if self.returns > 1 else refs[0]


def _flow(tmp_path):
    from types import SimpleNamespace

    from mmctl.request.pixel_cache import PixelCache
    from mmctl.run_batch.local import Tally
    from mmctl.run_batch.ray_engine import _Flow

    ray = _FakeRay()
    actor = SimpleNamespace(send=_FakeCalls("line", 1))
    started = SimpleNamespace(
        ray=ray, senders={NODE_B: actor}, layout=plan(2, 2, None, 4),
        cpus={NODE_A: 1, NODE_B: 1}, warm=[],
    )  # fmt: skip
    written: list[dict] = []
    out = SimpleNamespace(write=written.append)
    task = _FakeCalls("task", 2)
    flow = _Flow(started, task, ("s", ("f",), "d"), out, Tally(), lambda ok: None, None,
                 NODE_A, None, PixelCache(1))  # fmt: skip
    return flow, ray, task, actor, written


def _entry(tmp_path, name):
    from mmctl.dataset import Entry, Item

    clip = tmp_path / f"{name}.mp4"
    clip.write_bytes(name.encode())
    return Entry(1, name, Item(name, "?", [clip]))


def test_items_a_lost_node_held_are_made_again_elsewhere_then_given_up(tmp_path):
    import ray as real_ray

    from mmctl.run_batch.ray_engine import NODE_RETRIES, _Item

    flow, ray, task, actor, written = _flow(tmp_path)
    one, two = _Item(_entry(tmp_path, "one")), _Item(_entry(tmp_path, "two"))
    for item in (one, two):
        flow._start(item)
    assert len(task.calls) == 2 and one.how == "miss"
    for n in (1, 2):  # both made on node B, kept for the cache there
        ray.results[f"task{n}-0"] = (NODE_B, 1000)
    flow._arrived(["task1-0", "task2-0"])
    assert flow.cache.groups() == {NODE_B: 2000}
    flow.in_flight = 1
    flow._send_ready()  # one sends on B; two waits, ready, on B
    assert [i.id for i in flow.ready] == ["two"] and len(actor.send.calls) == 1
    ray.results["line1-0"] = real_ray.exceptions.RayActorError()
    ray.alive[NODE_B] = False
    flow._arrived(["line1-0"])
    # B is gone: its sender, its places and its cache entries; both items made again.
    assert NODE_B in flow.lost and not flow.senders and NODE_B not in flow.places
    assert flow.cache.groups().get(NODE_B, 0) == 0
    assert len(task.calls) == 4 and flow.tally.node_retries == 2 and not written
    assert {i.id for i in flow.preprocessing.values()} == {"one", "two"}
    # Lost again and again: after NODE_RETRIES tries, its line says so (once).
    item = next(i for i in flow.preprocessing.values() if i.id == "one")
    for _ in range(NODE_RETRIES):
        flow._retry(item, NODE_A, real_ray.exceptions.NodeDiedError(NODE_A))
    assert [d["custom_id"] for d in written] == ["one"]
    assert written[0]["error"]["code"] == "node_lost"
