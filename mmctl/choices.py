"""The named choices and defaults that the library and every command share.

One name, one default and one list of values per concept: the commands hand
these enums to typer as they are, so ``--pixel-dtype`` offers the same four
values on ``preprocess``, ``build`` and ``send``, and a bad value is refused
before anything runs. Standard library only: the CLI imports this module at
start-up.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: The user's text when none is given (``send``, ``build``, ``inspect-tokens``,
#: ``bench`` and ``batch`` alike, so the debugging tools show what ``send`` sends).
DEFAULT_PROMPT = "Describe this."


def prompt_text(prompt: str | None) -> str:
    """The one place the default applies: ``None`` is "not given"; ``""`` is
    "no text" (the media alone: a batch line whose messages hold no text, as
    OpenAI's format allows). A prompt a person gives is checked first
    (:func:`checked_prompt`)."""
    return DEFAULT_PROMPT if prompt is None else prompt


def checked_prompt(text: str, given_as: str = "the prompt", *, usage: bool = True) -> str:
    """``text`` if it holds more than white space. An empty prompt is almost
    always a mistake upstream of mmctl (``-p "$VAR"`` unset, an empty
    ``@file``, ``git log … | mmctl send … -p -`` with nothing to log): sent,
    it asks the model about nothing and the answer looks like a bug of its
    own. ``given_as`` names where it came from; ``usage``: a command-line
    value (exit 2) or the contents of a file or stdin (exit 3)."""
    from mmctl.errors import InputError, UsageError

    if text.strip():
        return text
    error = UsageError if usage else InputError
    raise error(
        f"{given_as} is empty",
        hint=f"give the text to send, or leave the prompt out for the default ({DEFAULT_PROMPT!r})",
    )


#: Most tokens to generate when the request does not say.
DEFAULT_MAX_TOKENS = 128

# Defaults a command shows in --help and the library applies: one value each.

#: Tensors smaller than this travel inline on the shm route too (a file costs
#: more than the copy it saves).
SHM_MIN_BYTES = 64 * 1024
#: ``batch``: requests in flight at most.
BATCH_MAX_CONCURRENCY = 8
#: ``batch --allow-remote-media``: the largest medium fetched, MB.
REMOTE_MEDIA_MAX_MB = 256
#: ``bench``: requests per concurrency level, arrival-gap shape, warm-up requests per arm.
BENCH_NUM_PROMPTS = 100
BENCH_BURSTINESS = 1.0
BENCH_WARMUP = 1
#: ``stub-worker``: its port, media items per request, feature tokens per item
#: (a default ``vllm serve``'s ``--limit-mm-per-prompt`` and encoder budget).
STUB_PORT = 50051
STUB_ITEM_LIMITS = "image=8,video=2"
STUB_ENCODER_BUDGET = 65536
#: The pixel cache's budget, MiB (``--pixel-cache-mb``; 0 turns it off): 1 GiB
#: holds ~14 20-second 720p clips as uint8 (~75 MB each), or ~1,000 of a 3 s
#: 320x240 clip's 1 MB tensors (:mod:`mmctl.request.pixel_cache`).
DEFAULT_PIXEL_CACHE_MB = 1024


class PixelFormat(Enum):
    """What the pixel tensor holds (``--pixel-dtype``)."""

    FLOAT32 = "float32"  # normalized
    BFLOAT16 = "bfloat16"  # normalized, stored as uint16 bit patterns
    FLOAT16 = "float16"  # normalized
    UINT8 = "uint8"  # raw resized pixels, for workers that normalize on device

    @property
    def numpy_dtype(self) -> np.dtype:
        import numpy as np

        return np.dtype(
            {
                "float32": np.float32,
                "bfloat16": np.uint16,
                "float16": np.float16,
                "uint8": np.uint8,
            }[self.value]
        )

    @property
    def needs_scratch(self) -> bool:
        """Computed in float32 first, then narrowed."""
        return self in (PixelFormat.BFLOAT16, PixelFormat.FLOAT16)

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "bfloat16": 2, "float16": 2, "uint8": 1}[self.value]


class LayoutKind(StrEnum):
    """How a Qwen3-VL video placeholder is expanded (``mmctl.prompt.layout``).
    The smg gateway lays video out like vLLM since 1.13.0 (``smg`` is retired)."""

    VLLM = "vllm"
    HF_LEGACY = "hf-legacy"


class Transport(StrEnum):
    """How tensors travel to the worker."""

    AUTO = "auto"  # shared memory iff the worker shares this host's /dev/shm
    INLINE = "inline"
    SHM = "shm"


class Processing(StrEnum):
    """Who turns media into tensors."""

    AUTO = "auto"  # client for the families mmctl preprocesses, else the worker
    CLIENT = "client"  # mmctl preprocesses and sends tensors
    WORKER = "worker"  # mmctl sends media_refs; the worker preprocesses


class MediaRef(StrEnum):
    """How ``--processing worker`` names the media."""

    DATA = "data"  # data: URLs carrying the file's bytes
    FILE = "file"  # file:// paths (the worker must see them)


class PruningMethod(StrEnum):
    """How a worker prunes video tokens after the vision encoder
    (``--video-pruning-method``, vLLM's ``MultiModalConfig.video_pruning_method``)."""

    EVS = "evs"  # Efficient Video Sampling (vLLM's default)
    VIDCOM2 = "vidcom2"  # Video Compression Commander


#: vLLM's defaults: no pruning (``video_pruning_rate`` None, i.e. 0), EVS when on.
DEFAULT_PRUNING_RATE = 0.0
DEFAULT_PRUNING_METHOD = PruningMethod.EVS
