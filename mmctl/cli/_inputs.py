"""Option values → library values, the same way on every command.

Each helper builds a library object whose constructor validates it
(:class:`~mmctl.request.build.Sampling`; commands build
:class:`~mmctl.models.base.VisionOverrides` directly), so a bad value is a
usage error (exit 2) before any file is decoded or worker contacted. The prompt syntax
(``@FILE``, ``-``, ``@@``) is command-line convention, as in curl and HTTPie,
so it lives here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mmctl.choices import (
    DEFAULT_PIXEL_CACHE_MB,
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    PruningMethod,
)

if TYPE_CHECKING:
    from mmctl.choices import Transport
    from mmctl.client.connection import Connection
    from mmctl.request.build import Sampling


def prompt_text(value: str | None, file: Path | None, stdin: TextIO | None = None) -> str | None:
    """``-p`` / ``--prompt-file`` as text: ``@FILE`` and ``--prompt-file`` read a
    file, ``-`` reads stdin, ``@@…`` is a literal ``@…``; ``None`` when neither
    is given. A prompt with no text in it is refused, naming where it came from."""
    from mmctl.choices import checked_prompt
    from mmctl.errors import UsageError

    if value is not None and file is not None:
        raise UsageError("--prompt and --prompt-file are alternatives; give one")
    if file is not None:
        return checked_prompt(_read_prompt(file), f"prompt file {file}", usage=False)
    if value is None:
        return None
    if value == "-":
        text = (stdin or sys.stdin).read()
        return checked_prompt(text, "the prompt read from stdin (-p -)", usage=False)
    if value.startswith("@@"):
        return value[1:]
    if value.startswith("@"):
        if len(value) == 1:
            raise UsageError("-p @FILE needs a file name (write @@ for a literal @)")
        path = Path(value[1:])
        return checked_prompt(_read_prompt(path), f"prompt file {path}", usage=False)
    return checked_prompt(value, "the prompt (-p)")


def _read_prompt(path: Path) -> str:
    from mmctl.errors import InputError

    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"prompt file {path} is not UTF-8 text") from None
    except OSError as err:
        raise InputError(f"cannot read prompt file {path}: {err.strerror or err}") from None


def sampling(
    *,
    max_tokens: int | None,
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    seed: int | None,
    stop: list[str] | None,
) -> Sampling:
    from mmctl.request.build import Sampling

    return Sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        stop=tuple(stop or ()),
    )


def connection(
    *,
    header: list[str] | None,
    tls: bool,
    ca_cert: Path | None,
    timeout: float | None = None,
    model_dir: Path | None = None,
    bundle: Path | None = None,
    family: str | None = None,
    refresh_bundle: bool = False,
    pixel_cache_mb: int = DEFAULT_PIXEL_CACHE_MB,
    video_pruning_rate: float = DEFAULT_PRUNING_RATE,
    video_pruning_method: PruningMethod = DEFAULT_PRUNING_METHOD,
) -> Connection:
    """The connection options (``-H``, ``--tls``/``--ca-cert``, ``--timeout``, the
    model files, ``--pixel-cache-mb``, the worker's ``--video-pruning-*``) as the
    one library value."""
    from mmctl.client.connection import Connection
    from mmctl.values.pruning import VideoPruning

    return Connection(
        headers=header,
        tls=ca_cert or tls,
        timeout=timeout,
        model_dir=model_dir,
        bundle=bundle,
        family=family,
        refresh_bundle=refresh_bundle,
        pixel_cache_mb=pixel_cache_mb,
        video_pruning=VideoPruning(video_pruning_rate, video_pruning_method),
    )


def transport(mode: Transport, *, shm: bool, inline: bool) -> Transport:
    """``--transport`` with its shorthands ``--shm`` / ``--inline`` applied."""
    from mmctl.choices import Transport
    from mmctl.errors import UsageError

    if shm and inline:
        raise UsageError("--shm and --inline contradict each other")
    return Transport.SHM if shm else Transport.INLINE if inline else mode


def item_limits(label: str | None) -> dict[str, int] | None:
    """``--mm-item-limits image=N,video=M`` (``None`` when not given)."""
    from mmctl.request.limits import parse_item_limits

    return None if label is None else parse_item_limits(label)
