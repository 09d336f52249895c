"""The stub worker's RPC handlers: ``vllm.grpc.engine.VllmEngine`` as the real
servicer answers it, from the checks of :mod:`mmctl.worker.checks` to the
answer read back from the pixels (:mod:`mmctl.worker.answers`).

A refusal is ``INVALID_ARGUMENT`` with its sentence, anything unexpected
``INTERNAL``; at most ``max_concurrent_requests`` Generates are admitted (the
rest get ``RESOURCE_EXHAUSTED``). The server that runs them, and its life
cycle, is :mod:`mmctl.worker.server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import sys
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import grpc

from mmctl import modality
from mmctl.checkpoint.source import build_bundle
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.model import Model, WorkerModel
from mmctl.models.registry import supported_hint
from mmctl.request.refs import by_worker
from mmctl.request.tensors import wire_name
from mmctl.request.view import batches
from mmctl.transport.shm import namespace_id
from mmctl.values.pruning import VideoPruning
from mmctl.wire import proto
from mmctl.wire.splice import take_pixels
from mmctl.worker import answers, checks, media_refs, own_processor, record
from mmctl.worker.descriptors import LEGACY_EMPTY_SERVER_INFO
from mmctl.worker.dtype import served_dtype
from mmctl.worker.generate import finish
from mmctl.worker.limits import MAX_CONCURRENT_REQUESTS, MAX_MESSAGE_MB, TRIM_BYTES

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
    from types import ModuleType

    from mmctl.models.family import Family
    from mmctl.request.build import Batch
    from mmctl.wire._gen import vllm_engine_pb2 as pb
    from mmctl.worker.generate import Finished

CHUNK = 64 * 1024
SERVER_TYPE = "vllm-grpc"
T = TypeVar("T")


@dataclass
class StubConfig:
    #: A :class:`WorkerModel` (no family handles it): media_refs only, through
    #: :mod:`mmctl.worker.own_processor`.
    model: Model | WorkerModel
    policy: checks.Policy = field(default_factory=checks.Policy)
    answer: str = "colors"  # colors | echo
    delay_ms: int = 0
    allowed_local_media_path: Path | None = None
    log: TextIO = field(default_factory=lambda: sys.stderr)
    max_message_mb: int = MAX_MESSAGE_MB
    max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS
    #: Threads for the CPU work of requests (decode, checks, media refs).
    work_threads: int = field(default_factory=lambda: min(8, max(2, os.cpu_count() or 2)))
    #: Write each accepted request here (:mod:`mmctl.worker.record`).
    record_dir: Path | None = None
    #: What GetModelInfo reports as ``served_model_name`` (``None``: mmctl-stub/<family>).
    served_model_name: str | None = None

    def __post_init__(self) -> None:
        if self.delay_ms < 0:
            raise UsageError(f"--delay-ms must not be negative, got {self.delay_ms}")
        if not 1 <= self.max_message_mb <= 2047:
            raise UsageError(f"--max-message-mb must be 1-2047, got {self.max_message_mb}")
        if self.max_concurrent_requests < 1:
            raise UsageError(
                f"--max-concurrent-requests must be at least 1, got {self.max_concurrent_requests}"
            )
        folder = self.allowed_local_media_path
        if folder is not None and not folder.is_dir():
            raise UsageError(f"--allowed-local-media-path {folder} is not a folder")


def load_served(
    model_dir: Path | None,
    bundle: Path | None,
    family: str | None,
    device_normalize: bool | None,
    record: bool,
    pruning: VideoPruning | None = None,
) -> tuple[Model | WorkerModel, bool]:
    """The model the stub serves (its tokenizer loaded: a broken one fails at start)
    and whether it normalizes on the device. A model no family handles is served
    through :mod:`~mmctl.worker.own_processor` (media_refs only). ``pruning``:
    its ``--video-pruning-rate`` / method, as vLLM's: each video's span must hold
    the tokens that keeps (refused where vLLM's model does not prune)."""
    from mmctl.checkpoint.source import resolve
    from mmctl.errors import UsageError
    from mmctl.models.model import load_any

    model = load_any(source=resolve(model_dir, bundle), family=family)
    model.tokenizer  # noqa: B018
    if isinstance(model, WorkerModel):
        asked = ["--device-normalize"] if device_normalize else []
        asked += ["--record"] if record else []
        asked += ["--video-pruning-rate"] if pruning is not None and pruning.enabled else []
        if asked:
            raise UsageError(
                f"model_type {model.model_type!r} is served through its own processor here "
                f"(media_refs); {' and '.join(asked)} apply to a family's tensors",
                hint=supported_hint(),
            )
        return model, False
    return model.with_pruning(pruning), checks.device_normalize_for(model.spec, device_normalize)


class _Requests:
    """In-flight requests, by id, with the event Abort sets (used on the loop only)."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self.last_receive = 0.0
        self.admitted = 0  # Generates past admission, for --max-concurrent-requests

    def start(self, request_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self._events[request_id] = event
        self.last_receive = time.time()
        return event

    def end(self, request_id: str) -> None:
        self._events.pop(request_id, None)

    def abort_all(self) -> None:
        for event in self._events.values():
            event.set()

    def abort(self, ids: Iterable[str]) -> int:
        found = [self._events[i] for i in ids if i in self._events]
        for event in found:
            event.set()
        return len(found)

    def __len__(self) -> int:
        return len(self._events)


def _trim_malloc() -> None:
    """Give freed heap pages back to the system (glibc keeps them otherwise)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(name).malloc_trim(0)


class StubServicer(proto.engine_grpc.VllmEngineServicer):
    """``vllm.grpc.engine.VllmEngine``, strict where the real worker is."""

    def __init__(self, cfg: StubConfig) -> None:
        self.cfg = cfg
        self.requests = _Requests()
        self.work = futures.ThreadPoolExecutor(cfg.work_threads, thread_name_prefix="stub-work")
        self.started = time.time()
        #: As a default ``vllm serve --dtype auto`` serves the folder (model and encoder).
        self.dtype = served_dtype(cfg.model.files.config)
        self._bundle: tuple[bytes, str] | None = None
        self._seq = 0
        self.recorder = None if cfg.record_dir is None else record.Recorder(cfg.record_dir)

    # ---- Generate -------------------------------------------------------

    async def Generate(
        self, incoming: Incoming | pb.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GenerateResponse]:
        cfg = self.cfg
        started = time.perf_counter()
        if not isinstance(incoming, Incoming):
            incoming = Incoming(incoming)
        request_id = incoming.request.request_id or self._next_id()
        if incoming.malformed is not None:
            self._log(request_id, incoming, f"INVALID_ARGUMENT: {incoming.malformed}", started)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, incoming.malformed)
        if self.requests.admitted >= cfg.max_concurrent_requests:
            message = (
                f"this worker runs at most {cfg.max_concurrent_requests} requests at once "
                "(--max-concurrent-requests); retry later"
            )
            self._log(request_id, incoming, f"RESOURCE_EXHAUSTED: {message}", started)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        self.requests.admitted += 1
        answering = self._generate(incoming, request_id, context, started)
        try:
            async for response in answering:
                yield response
        finally:
            # A client gone while this waits at a yield closes this generator
            # (no CancelledError): close the inner one now, so it logs the call.
            await answering.aclose()
            self.requests.admitted -= 1

    async def _generate(
        self,
        incoming: Incoming,
        request_id: str,
        context: grpc.aio.ServicerContext,
        started: float,
    ) -> AsyncGenerator[pb.GenerateResponse, None]:
        engine, request = proto.engine_pb2, incoming.request
        loop = asyncio.get_running_loop()
        refusal: tuple[grpc.StatusCode, str] | None = None
        try:
            done, sent_text, prompt_len = await loop.run_in_executor(
                self.work, _pooled, self._answer, incoming
            )
        except checks.Rejected as err:
            refusal = (grpc.StatusCode.INVALID_ARGUMENT, str(err))
        except asyncio.CancelledError:
            self._log(request_id, incoming, _gone(context, 0), started)
            raise
        except Exception as err:  # never let a request take the server down
            refusal = (grpc.StatusCode.INTERNAL, f"stub worker error: {type(err).__name__}: {err}")
        if refusal is not None:
            code, message = refusal
            self._log(request_id, incoming, f"{code.name}: {message}", started)
            await context.abort(code, message)
        aborted = self.requests.start(request_id)
        delay = self.cfg.delay_ms / 1000
        sent = 0
        try:
            if request.stream:
                for token in done.tokens:
                    if await _aborted_within(aborted, delay):
                        self._log(request_id, incoming, f"aborted after {sent} tokens", started)
                        yield self._complete(engine, [], "abort", prompt_len, sent, None)
                        return
                    sent += 1
                    yield engine.GenerateResponse(
                        chunk=engine.GenerateStreamChunk(
                            token_ids=[token], prompt_tokens=prompt_len, completion_tokens=sent
                        )
                    )
                last = done.tokens[-1:]
                yield self._complete(
                    engine, last, done.finish_reason, prompt_len, len(done.tokens), done
                )
            else:
                if await _aborted_within(aborted, delay * len(done.tokens)):
                    self._log(request_id, incoming, "aborted", started)
                    yield self._complete(engine, [], "abort", prompt_len, 0, None)
                    return
                yield self._complete(
                    engine, done.tokens, done.finish_reason, prompt_len, len(done.tokens), done
                )
            self._log(
                request_id,
                incoming,
                f"ok {sent_text!r} ({len(done.tokens)} tokens, {done.finish_reason})",
                started,
            )
        except (asyncio.CancelledError, GeneratorExit):  # the client went, or its deadline passed
            self._log(request_id, incoming, _gone(context, sent), started)
            raise
        finally:
            self.requests.end(request_id)

    def _answer(self, incoming: Incoming) -> tuple[Finished, str, int]:
        """The CPU part of a Generate (on the work pool): admit, answer, finish."""
        cfg, request = self.cfg, incoming.request
        model = cfg.model
        if isinstance(model, WorkerModel):
            return self._answer_own(request, model)
        why = _by_worker(request, model.spec)
        if why is not None:
            # As the real worker: vLLM's own processor reads the whole request.
            return self._answer_own(request, model.as_worker(why))
        try:
            arrived = request
            if self.recorder is not None and request.HasField("media_refs"):
                arrived = type(request)()  # _admit writes the expanded ids into request
                arrived.CopyFrom(request)
            batches, prompt_len = self._admit(request, model, incoming.pixels)
            if self.recorder is not None:
                self._record(self.recorder, arrived, batches)
            if cfg.answer == "echo":
                text = answers.echo_answer(request, batches)
            else:
                text = answers.colours_answer(batches, model)
            del batches
            return self._finish(request, text, prompt_len)
        finally:
            if incoming.nbytes >= TRIM_BYTES:
                _trim_malloc()

    def _answer_own(
        self, request: pb.GenerateRequest, model: WorkerModel
    ) -> tuple[Finished, str, int]:
        """A model no family handles: text, or media_refs through its own processor."""
        cfg, kind = self.cfg, request.WhichOneof("input")
        has_refs = request.HasField("media_refs")
        if request.HasField("mm_inputs") or len(request.extra_mm_inputs) > 0:
            raise checks.Rejected(
                f"preprocessed multimodal inputs for model_type {model.model_type!r}: this worker "
                "cannot check a model's tensors when no mmctl family describes them; send "
                "media_refs (--processing worker)"
            )
        if kind == "text" and not has_refs:
            if not request.text:
                raise checks.Rejected("the prompt is empty (text input with no text)")
            return self._finish(request, "text only", len(model.tokenizer.encode(request.text)))
        if kind != "tokenized":
            raise checks.Rejected(
                "media_refs requires tokenized input"
                if has_refs
                else "the request carries no input (tokenized input_ids or text)"
            )
        if not has_refs:
            return self._finish(request, "text only", len(request.tokenized.input_ids))
        if cfg.policy.legacy_proto:
            raise checks.Rejected(
                "media_refs is unknown to this worker's proto (it predates it) and would be "
                "silently dropped"
            )
        done = own_processor.process(
            request, model, cfg.allowed_local_media_path, cfg.policy.item_limits
        )
        if cfg.answer == "echo":
            text = own_processor.echo(request, done)
        else:
            text = "; ".join(", ".join(c) for c in done.colours)
        return self._finish(request, text, len(done.ids))

    def _finish(
        self, request: pb.GenerateRequest, text: str, prompt_len: int
    ) -> tuple[Finished, str, int]:
        """``text`` as the answer, cut where the sampling parameters say."""
        model = self.cfg.model
        tok = model.tokenizer
        sp = request.sampling_params
        done = finish(
            tok.encode(text),
            eos_ids=model.eos_token_ids,
            max_tokens=sp.max_tokens if sp.HasField("max_tokens") else None,
            stop_token_ids=list(sp.stop_token_ids),
            stop=list(sp.stop),
            ignore_eos=sp.ignore_eos,
            decode=lambda t: tok.decode(t, skip_special_tokens=True),
        )
        # The log line shows what is sent, which --max-tokens or a stop may cut.
        return done, tok.decode(done.tokens, skip_special_tokens=True), prompt_len

    def _record(
        self,
        recorder: record.Recorder,
        request: pb.GenerateRequest,
        batches: list[checks.ReceivedBatch],
    ) -> None:
        try:
            recorder.write(request, batches)
        except InputError as err:  # the request itself was fine: answer it, and say so
            self._note(f"--record: {err.message}")

    def _admit(
        self, request: pb.GenerateRequest, model: Model, pixels: memoryview | None = None
    ) -> tuple[list[checks.ReceivedBatch], int]:
        """Decode and check; returns (batches, prompt length). ``pixels``: the
        first batch's inline pixel payload, when it was left out of ``request``."""
        cfg, policy = self.cfg, self.cfg.policy
        has_refs = request.HasField("media_refs")
        kind = request.WhichOneof("input")
        if kind == "text" and not has_refs:
            # As the servicer: the engine tokenizes the text; batches are not read.
            if not request.text:
                raise checks.Rejected("the prompt is empty (text input with no text)")
            return [], len(model.tokenizer.encode(request.text))
        if kind != "tokenized":
            raise checks.Rejected(
                "media_refs requires tokenized input"
                if has_refs
                else "the request carries no input (tokenized input_ids or text)"
            )
        has_batches = request.HasField("mm_inputs") or len(request.extra_mm_inputs) > 0
        if policy.legacy_proto and (has_refs or len(request.extra_mm_inputs)):
            what = "media_refs" if has_refs else "extra_mm_inputs"
            raise checks.Rejected(
                f"{what} is unknown to this worker's proto (it predates it) and would be "
                "silently dropped"
            )
        if has_refs:
            if has_batches:
                raise checks.Rejected(
                    "media_refs requires tokenized input and cannot be combined with "
                    "preprocessed multimodal inputs"
                )
            layout, built = media_refs.process(
                request,
                model,
                policy.device_normalize,
                cfg.allowed_local_media_path,
                policy.item_limits,
            )
            batches = [_received(n, b, model.spec) for n, b in enumerate(built)]
            del request.tokenized.input_ids[:]
            request.tokenized.input_ids.extend(layout.id_list())
        else:
            batches = checks.decode(request, policy, model.spec, pixels)
        checks.validate(request, batches, model, policy)
        return batches, len(request.tokenized.input_ids)

    @staticmethod
    def _complete(
        engine: ModuleType,
        tokens: Sequence[int],
        reason: str,
        prompt_len: int,
        completion: int,
        done: Finished | None,
    ) -> pb.GenerateResponse:
        msg = engine.GenerateComplete(
            output_ids=list(tokens),
            finish_reason=reason,
            prompt_tokens=prompt_len,
            completion_tokens=completion,
        )
        if done is not None and done.matched_token_id is not None:
            msg.matched_token_id = done.matched_token_id
        elif done is not None and done.matched_stop_str is not None:
            msg.matched_stop_str = done.matched_stop_str
        return engine.GenerateResponse(complete=msg)

    def _next_id(self) -> str:
        self._seq += 1
        return f"stub-{self._seq}"

    def _log(self, request_id: str, incoming: Incoming, outcome: str, started: float) -> None:
        request = incoming.request
        kinds = [
            _describe(mm, n == 0 and incoming.pixels is not None)
            for n, mm in enumerate(batches(request))
        ]
        if request.HasField("media_refs"):
            kinds.append(f"{len(request.media_refs.items)} media_refs")
        what = "; ".join(kinds) or "text only"
        ms = (time.perf_counter() - started) * 1000
        self.cfg.log.write(f"[stub] Generate {request_id}: {what} -> {outcome} ({ms:.0f} ms)\n")
        self.cfg.log.flush()

    # ---- the rest of the service -----------------------------------------

    def _note(self, line: str) -> None:
        self.cfg.log.write(f"[stub] {line}\n")
        self.cfg.log.flush()

    async def HealthCheck(
        self, request: pb.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> pb.HealthCheckResponse:
        # No line: probes come every second from each batch and `health --wait`
        # (the servicer logs only a turn for the worse; the stub never turns).
        return proto.engine_pb2.HealthCheckResponse(healthy=True, message="stub worker ready")

    async def Abort(
        self, request: pb.AbortRequest, context: grpc.aio.ServicerContext
    ) -> pb.AbortResponse:
        found = self.requests.abort(list(request.request_ids))
        self._note(f"Abort {list(request.request_ids)}: {found} in flight")
        return proto.engine_pb2.AbortResponse()

    async def GetModelInfo(
        self, request: pb.GetModelInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetModelInfoResponse:
        self._note("GetModelInfo")
        model = self.cfg.model
        config = dict(model.files.config)
        # Composite configs (LLaVA, Llama 4) keep the text model's length in text_config.
        nested = config.get("text_config")
        text: dict[str, Any] = nested if isinstance(nested, dict) else {}
        length = int(
            config.get("max_position_embeddings") or text.get("max_position_embeddings") or 0
        )
        eos = model.eos_token_ids
        return proto.engine_pb2.GetModelInfoResponse(
            model_path=model.source.label,
            is_generation=True,
            max_context_length=length,
            vocab_size=model.tokenizer.vocab_size,
            supports_vision=True,
            served_model_name=self.cfg.served_model_name or f"mmctl-stub/{model.name}",
            tokenizer_path=model.source.label,
            model_type=str(config.get("model_type", "")),
            architectures=[str(a) for a in config.get("architectures", [])],
            eos_token_ids=eos,
            pad_token_id=int(config.get("pad_token_id", 0) or 0),
            bos_token_id=int(config.get("bos_token_id", 0) or 0),
            max_req_input_len=length,
        )

    async def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetServerInfoResponse:
        self._note("GetServerInfo")
        policy = self.cfg.policy
        info = proto.engine_pb2.GetServerInfoResponse(
            active_requests=len(self.requests),
            is_paused=False,
            last_receive_timestamp=self.requests.last_receive,
            uptime_seconds=time.time() - self.started,
            server_type=SERVER_TYPE,
            data_parallel_size=1,
            shm_namespace_id=namespace_id(),
            model_dtype=self.dtype,
            multimodal_encoder_dtype=self.dtype,
            mm_device_do_normalize=policy.device_normalize,
            mm_item_limits=",".join(
                f"{k}={v}"
                for k, v in policy.item_limits.items()
                if k in {m.value for m in _modalities(self.cfg.model)}
            ),
            mm_encoder_budget=policy.encoder_budget,
            max_num_seqs=256,
            mm_processor="mmctl",
            mm_processor_source="mmctl stub worker",
            mm_media_ref_schemes=",".join(media_refs.schemes(self.cfg.allowed_local_media_path)),
        )
        if policy.legacy_proto:
            for name in LEGACY_EMPTY_SERVER_INFO:
                info.ClearField(name)
        return info

    async def GetTokenizer(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        if self._bundle is None:
            bundle = await asyncio.get_running_loop().run_in_executor(
                self.work, _pooled, build_bundle, self.cfg.model.source
            )
            self._bundle = self._bundle or bundle
        data, sha = self._bundle
        self._note(f"GetTokenizer: {len(data):,} bytes, sha256 {sha[:12]}…")
        common = proto.common_pb2
        for start in range(0, len(data), CHUNK):
            end = min(start + CHUNK, len(data))
            yield common.GetTokenizerChunk(
                data=data[start:end], sha256=sha if end == len(data) else ""
            )


#: A call that ends this close to its deadline ended by it (the end and the
#: clock are read at slightly different moments).
DEADLINE_SLACK_S = 0.05


async def _aborted_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` is set now or within ``seconds``."""
    if event.is_set() or seconds <= 0:
        return event.is_set()
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


def _gone(context: grpc.aio.ServicerContext, tokens: int) -> str:
    """Why a call ended before its answer did (every Generate leaves a log line)."""
    left = context.time_remaining()
    if left is not None and left <= DEADLINE_SLACK_S:
        return f"DEADLINE_EXCEEDED after {tokens} tokens"
    return f"CANCELLED by the client after {tokens} tokens"


def _describe(mm: pb.MultimodalInputs, taken: bool = False) -> str:
    common = proto.common_pb2
    known = {v: k for k, v in common.Modality.items()}
    kind = known.get(mm.modality, str(mm.modality)).replace("MODALITY_UNSPECIFIED", "IMAGE?")
    td = mm.pixel_values
    where = "inline" if taken else td.WhichOneof("payload") or "none"
    return f"{kind} {len(mm.mm_placeholders)} item(s) {list(td.shape)} {td.dtype} via {where}"


def _by_worker(request: pb.GenerateRequest, spec: Family) -> str | None:
    """Why the request's media references are the worker's to process whole (sound, a
    kind the family's model cannot take preprocessed); ``None``: they are not."""
    if not request.HasField("media_refs"):
        return None
    kinds = [modality.ref_from_wire(ref.modality) for ref in request.media_refs.items]
    return by_worker([k for k in kinds if k is not None], spec)


def _modalities(model: Model | WorkerModel) -> tuple[MediaKind, ...]:
    """What the served model reads: its family's, or the kinds its config names a token for."""
    if isinstance(model, WorkerModel):
        return tuple(own_processor.placeholder_ids(model.files.config))
    return model.spec.modalities


def _received(n: int, batch: Batch, spec: Family) -> checks.ReceivedBatch:
    """A locally built batch (worker-side processing) as if it had arrived."""
    tensors = {}
    dtypes = {}
    for key, array in batch.arrays().items():
        name = checks.worker_key(key, batch.kind)
        tensors[name] = array
        dtypes[name] = batch.pixel_dtype if key == "pixel_values" else wire_name(array)
    return checks.ReceivedBatch(
        index=n,
        kind=batch.kind,
        tensors=tensors,
        dtypes=dtypes,
        transports=dict.fromkeys(tensors, "worker"),
        placeholders=list(batch.placeholders),
        im_token_id=batch.im_token_id,
        hashes=list(batch.hashes),
        batched_keys=list(batch.batched_keys),
        flat_keys=dict(batch.flat_keys),
        keep_on_cpu_keys=list(batch.keep_on_cpu_keys),
        fields=spec.wire.fields(batch.kind),
    )


def _pooled(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` for the work pool: a StopIteration it raises comes back as a
    RuntimeError. asyncio cannot set a StopIteration on a future (a TypeError in
    the pool's callback), so the request awaiting it would wait for ever."""
    try:
        return fn(*args)
    except StopIteration as err:
        raise RuntimeError(f"StopIteration: {err}") from err


@dataclass(frozen=True)
class Incoming:
    """A ``GenerateRequest`` as parsed by the stub: a large inline pixel
    tensor stays a view of the received bytes (:mod:`mmctl.wire.splice`)."""

    request: pb.GenerateRequest
    pixels: memoryview | None = None
    nbytes: int = 0  # the message's size on the wire
    #: Why the bytes are not a ``GenerateRequest`` (answered INVALID_ARGUMENT,
    #: where a failing deserializer would make gRPC answer INTERNAL).
    malformed: str | None = None

    @classmethod
    def parse(cls, data: bytes) -> Incoming:
        from google.protobuf.message import DecodeError

        rest, pixels = take_pixels(data)
        try:
            request = proto.engine_pb2.GenerateRequest.FromString(rest)
        except DecodeError as err:
            empty = proto.engine_pb2.GenerateRequest()
            return cls(empty, None, len(data), f"not a valid GenerateRequest message: {err}")
        return cls(request, pixels, len(data))
