"""How a target's tensors travel, chosen once and then used without branching.

:func:`choose` turns the user's ``--transport`` and the worker's facts into a
:class:`Route` (``negotiate.transport`` says why); from then on ``send``, the
batch fleet and the load tester only ask the route to encode a request — the
inline route splices the pixels into the message (``RequestPlan.encode``),
the shm route places each large tensor in its own ``/dev/shm`` file
(:mod:`mmctl.client.placement`). A route is a small frozen value, so a Ray
actor can carry one to another node and choose again there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mmctl.choices import SHM_MIN_BYTES, Transport
from mmctl.client.negotiate import Decision, transport
from mmctl.client.placement import ShmAllocator, ShmPlacer, move_inline_to_shm
from mmctl.errors import CheckFailed, UsageError
from mmctl.transport.shm import ShmArena, ShmUnavailable, namespace_id, shm_dir

if TYPE_CHECKING:
    from mmctl.client.probe import WorkerFacts
    from mmctl.request.build import Encoded, RequestPlan


@dataclass(frozen=True)
class Encoding:
    """A request on the wire and what its placement did."""

    encoded: Encoded
    #: Why tensors that were to go through /dev/shm went inline (auto, /dev/shm full).
    problems: tuple[str, ...] = ()
    #: Seconds spent placing tensors in /dev/shm (the shm route's hand-off; the
    #: inline route's is ``encoded.copy_s``).
    place_s: float = 0.0

    @property
    def handoff_s(self) -> float:
        return self.place_s + self.encoded.copy_s


@dataclass(frozen=True)
class Route:
    """One target's transport: the decision, and how to place a request's tensors."""

    decision: Decision
    #: Tensors under this size stay inline (the upstream router's 64 KiB).
    min_bytes: int = SHM_MIN_BYTES
    #: ``auto``: a /dev/shm that fills up sends the rest inline instead of failing.
    fallback: bool = False

    @property
    def shm(self) -> bool:
        return self.decision.value == "shm"

    @property
    def name(self) -> str:
        return self.decision.value

    def allocator(self, arena: ShmArena, one_item_per_kind: bool) -> ShmAllocator | None:
        """Where preprocessing may write pixels straight into /dev/shm: only on
        the shm route and when each modality has one item (a batch of several
        items is joined, so its pixels are a new array anyway)."""
        if not self.shm or not one_item_per_kind:
            return None
        return ShmAllocator(arena, self.min_bytes, fallback=self.fallback)

    def encode(
        self,
        plan: RequestPlan,
        arena: ShmArena,
        moved: dict[str, int],
        allocator: ShmAllocator | None = None,
    ) -> Encoding:
        """The serialized request; on the shm route its large tensors are files of
        ``arena`` (the caller closes it), counted in ``moved["shm"]``."""
        if not self.shm:
            return Encoding(plan.encode())
        placer = ShmPlacer(arena, self.min_bytes, allocator, moved, self.fallback)
        placed = 0.0

        def timed(key: str, array: Any, dtype: str) -> Any:
            nonlocal placed
            begin = time.perf_counter()
            try:
                return placer(key, array, dtype)
            finally:
                placed += time.perf_counter() - begin

        encoded = plan.encode(timed)
        return Encoding(encoded, tuple(placer.problems), placed)

    def from_here(self, worker_namespace: str) -> Route:
        """The route as seen from this process's host: the shm route only where this
        host shares the worker's /dev/shm (a Ray actor on another node goes inline)."""
        if not self.shm:
            return self
        problem = shm_problem()
        if problem is not None:
            return inline(f"{problem} on this node")
        if worker_namespace != namespace_id():
            return inline("this node does not share the worker's /dev/shm")
        return self

    def place_recorded(self, req: Any, arena: ShmArena, moved: dict[str, int]) -> list[str]:
        """A recorded request's large inline tensors into /dev/shm (the shm route)."""
        if not self.shm:
            return []
        return move_inline_to_shm(req, arena, self.min_bytes, moved, self.fallback)


def shm_problem() -> str | None:
    """Why this process cannot write /dev/shm, or None."""
    folder = shm_dir()
    if not folder.is_dir():
        return f"{folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def inline(why: str) -> Route:
    """The inline route, for a reason (``--transport inline``, another host)."""
    return fixed(Transport.INLINE, why)


def for_media_refs(mode: Transport | str | None) -> Route:
    """The route of a worker-processed request: inline, since media_refs carry no
    tensor to place; ``--transport shm`` asks for what cannot happen (refused)."""
    if mode is not None and Transport(mode) is Transport.SHM:
        raise UsageError(
            "--transport shm: with worker processing a request carries media_refs, "
            "no tensor to place in shared memory",
            hint="drop --transport (worker-processed requests go inline)",
        )
    return inline("worker processing: media_refs, no tensors")


def fixed(mode: Transport, why: str, min_bytes: int = SHM_MIN_BYTES) -> Route:
    """A route chosen by the caller (a load tester's arm), not negotiated."""
    return Route(Decision(mode.value, why), min_bytes)


def choose(
    mode: Transport | str, facts: WorkerFacts | None, min_bytes: int = SHM_MIN_BYTES
) -> Route:
    """The route for a worker: ``shm`` only on a shared /dev/shm (``auto``) or when
    asked — then a /dev/shm this process cannot write is an error, not a fallback."""
    mode = Transport(mode)
    problem = shm_problem()
    here = namespace_id()
    decision = transport(mode.value, facts, here, problem)
    if decision.value == "shm" and mode is Transport.SHM and problem:
        raise ShmUnavailable(f"--transport shm: {problem}", hint="use --transport auto or inline")
    worker = facts.server.shm_namespace_id if facts is not None else ""
    if mode is Transport.SHM and worker and worker != here:
        # Sent anyway, the worker could open none of the files: exit 4 with
        # "TensorData.shm '…': No such file or directory", after the work.
        # A worker that does not say is taken at the user's word.
        raise CheckFailed(
            "--transport shm: the worker does not share this host's /dev/shm "
            f"(worker {worker}, here {here or 'unknown'})",
            hint="shared memory works only with a worker on this host; "
            "use --transport auto or inline",
        )
    return Route(decision, min_bytes, fallback=mode is Transport.AUTO)
