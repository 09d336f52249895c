"""Option aliases shared by several commands (typing.Annotated, typer's public API)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ModelDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-dir",
        help="Model folder: config.json and preprocessor configs override the family defaults.",
        show_default=False,
    ),
]
FamilyOpt = Annotated[
    str | None,
    typer.Option(
        "--family",
        help="Model family (qwen3-vl, qwen2.5-vl, …); default: from config.json, else qwen3-vl.",
        show_default=False,
    ),
]
BundleOpt = Annotated[
    Path | None,
    typer.Option(
        "--bundle",
        help="Tokenizer bundle zip, as a worker's GetTokenizer streams it (instead of --model-dir).",
        show_default=False,
    ),
]
FpsOpt = Annotated[float | None, typer.Option("--fps", help="Frames to sample per second.")]
NumFramesOpt = Annotated[
    int | None, typer.Option("--num-frames", help="Sample exactly this many frames.")
]
MinFramesOpt = Annotated[int | None, typer.Option("--min-frames")]
MaxFramesOpt = Annotated[int | None, typer.Option("--max-frames")]
MinPixelsOpt = Annotated[
    int | None, typer.Option("--min-pixels", help="Video: the whole clip's minimum pixels.")
]
MaxPixelsOpt = Annotated[
    int | None, typer.Option("--max-pixels", help="Video: the whole clip's pixel budget.")
]
PromptOpt = Annotated[
    str,
    typer.Option("--prompt", "-p", help="The user's text, after the media in the chat turn."),
]
SystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system", help="A system turn (default: the family's, if any).", show_default=False
    ),
]
ChatOpt = Annotated[
    bool,
    typer.Option(
        "--chat/--no-chat",
        help="Wrap media and prompt in the model's chat format (--no-chat: placeholders + prompt as is).",
    ),
]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help="Most tokens to generate.")]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        help="Sampling temperature (worker default when unset).",
        show_default=False,
    ),
]
TopPOpt = Annotated[float | None, typer.Option("--top-p", show_default=False)]
TopKOpt = Annotated[int | None, typer.Option("--top-k", show_default=False)]
SeedOpt = Annotated[int | None, typer.Option("--seed", show_default=False)]
StopOpt = Annotated[
    list[str] | None,
    typer.Option("--stop", help="Stop string (repeatable).", show_default=False),
]
StreamOpt = Annotated[
    bool, typer.Option("--stream/--no-stream", help="Ask the worker to stream tokens.")
]
RequestIdOpt = Annotated[
    str | None, typer.Option("--request-id", help="Default: mmctl-<random>.", show_default=False)
]
PixelDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--pixel-dtype",
        help="float32, bfloat16, float16 (normalized) or uint8 (raw, device-normalizing workers).",
        show_default=False,
    ),
]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        "--limit-mm",
        metavar="image=N,video=M",
        help="Refuse more media items per request than this (a worker's mm_item_limits).",
        show_default=False,
    ),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        "-t",
        help="Worker host:port (default: $MMCTL_TARGET, else localhost:50051).",
        show_default=False,
    ),
]
TlsOpt = Annotated[
    bool, typer.Option("--tls", help="Connect with TLS (system roots unless --ca-cert).")
]
CaCertOpt = Annotated[
    Path | None,
    typer.Option("--ca-cert", help="PEM root certificate(s) for --tls.", show_default=False),
]
HeaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--header", "-H", help="Metadata header key:value (repeatable).", show_default=False
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Deadline in seconds for each call to the worker (Generate included).",
        show_default=False,
    ),
]
