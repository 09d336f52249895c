"""Option aliases shared by the commands (typing.Annotated, typer's public API).

One alias per concept, so a name, its values, its default and its help read
the same on every command. Every option has a help line and a metavar (help
pages show ``N``, ``FILE``, ``HOST:PORT`` — never a Python type); defaults
are shown, including those a value of ``None`` stands for. Options whose
absence means something (``--prompt`` on a replay, sampling values the worker
defaults) default to ``None`` and say their effective default in the help.
Choices are the library's own enums (:mod:`mmctl.choices`), so typer refuses
a bad value before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmctl.choices import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT,
    LayoutKind,
    MediaRef,
    PixelFormat,
    Processing,
    PruningMethod,
)


def default_text(text: str) -> str:
    # Click writes string defaults in parentheses; this reads like its literal ones.
    return f"  [default: {text}]"


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

# ---- the prompt ----

PromptOpt = Annotated[
    str | None,
    typer.Option(
        "--prompt",
        "-p",
        metavar="TEXT",
        help="The user's words, after the media in the chat turn. @FILE reads them from a "
        "file, - from stdin; a literal leading @ is written @@."
        + default_text(f'"{DEFAULT_PROMPT}"'),
        show_default=False,
    ),
]
PromptFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--prompt-file",
        metavar="FILE",
        help="Read the prompt from FILE (UTF-8), as -p @FILE does.",
        show_default=False,
    ),
]
AllowSpecialOpt = Annotated[
    bool,
    typer.Option(
        "--allow-special-tokens",
        help="Let the prompt spell control tokens such as <|vision_start|> (refused otherwise: "
        "the text would become the token).",
    ),
]
SystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        metavar="TEXT",
        help="A system turn before the user's." + default_text("the family's, if any"),
        show_default=False,
    ),
]
ChatOpt = Annotated[
    bool | None,
    typer.Option(
        "--chat/--no-chat",
        help="Wrap media and prompt in the model's chat format (--no-chat: placeholders and "
        "prompt as they are)." + default_text("--chat"),
        show_default=False,
    ),
]

# ---- sampling ----

MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        help="Most tokens to generate." + default_text(str(DEFAULT_MAX_TOKENS)),
        show_default=False,
    ),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="Sampling temperature, 0 (greedy) or more." + default_text("the worker's"),
        show_default=False,
    ),
]
TopPOpt = Annotated[
    float | None,
    typer.Option(
        "--top-p",
        metavar="P",
        help="Nucleus sampling: draw from the most likely tokens whose probabilities add up "
        "to P, 0 < P <= 1." + default_text("the worker's"),
        show_default=False,
    ),
]
TopKOpt = Annotated[
    int | None,
    typer.Option(
        "--top-k",
        metavar="K",
        help="Draw from the K most likely tokens (0: no limit)." + default_text("the worker's"),
        show_default=False,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        metavar="N",
        help="Random seed for sampling (a 32-bit integer), for repeatable answers."
        + default_text("none"),
        show_default=False,
    ),
]
StopOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--stop",
        metavar="TEXT",
        help="Stop generating at this text (repeatable)." + default_text("none"),
        show_default=False,
    ),
]
StreamOpt = Annotated[
    bool | None,
    typer.Option(
        "--stream/--no-stream",
        help="Ask the worker to stream tokens as they are generated." + default_text("--stream"),
        show_default=False,
    ),
]
RequestIdOpt = Annotated[
    str | None,
    typer.Option(
        "--request-id",
        metavar="ID",
        help="The request's id (the worker logs it; Abort uses it)."
        + default_text("mmctl-<random>"),
        show_default=False,
    ),
]

# ---- pixels and media ----


PIXEL_DTYPE_METAVAR = "[float32|bfloat16|float16|uint8]"


def _pixel_dtype(default: str) -> object:
    return typer.Option(
        "--pixel-dtype",
        metavar=PIXEL_DTYPE_METAVAR,
        help="What the pixel tensor holds: float32, bfloat16, float16 (normalized) or uint8 "
        "(raw pixels, for workers that normalize on the device)." + default_text(default),
        show_default=False,
    )


#: Offline (``build``, ``preprocess``): what a default vLLM worker takes for the family.
PixelDtypeOpt = Annotated[
    PixelFormat | None,
    _pixel_dtype(
        "a default vLLM worker's for the family: uint8 for qwen3-vl, qwen3.5, qwen2.5-vl, "
        "glm4v and glm5-next, else float32"
    ),
]
NegotiatedPixelDtypeOpt = Annotated[
    PixelFormat | None, _pixel_dtype("what the worker expects (see `mmctl info`)")
]
ProcessingOpt = Annotated[
    Processing,
    typer.Option(
        "--processing",
        metavar="[auto|client|worker]",
        help="client: mmctl preprocesses and sends tensors; worker: send media_refs and let "
        "the worker preprocess; auto: client for the families mmctl preprocesses, worker for "
        "any other model (said on stderr).",
    ),
]
MediaRefOpt = Annotated[
    MediaRef,
    typer.Option(
        "--media-ref",
        metavar="[data|file]",
        help="With worker processing: data: URLs carrying the files, or file:// paths.",
    ),
]
SoundtrackOpt = Annotated[
    bool,
    typer.Option(
        "--soundtrack",
        help="Send each video's own sound too, as an audio item after it (omni models; "
        "the worker processes the request).",
    ),
]
#: A list: each value an arm of `mmctl bench`.
PixelDtypesOpt = Annotated[
    str | None,
    typer.Option(
        "--pixel-dtype",
        metavar=PIXEL_DTYPE_METAVAR + "[,…]",
        help="Pixel dtypes to compare, each an arm (see `mmctl send --help`)."
        + default_text("what the worker expects"),
        show_default=False,
    ),
]
#: `batch`, `bench`: media asked about again are preprocessed once (smg's
#: `--mm-pixel-cache-mb`, MiB).
PixelCacheOpt = Annotated[
    int,
    typer.Option(
        "--pixel-cache-mb",
        metavar="MIB",
        help="Keep up to this many MiB of preprocessed media, least recently used out first, "
        "so media asked about again are not decoded again; 0 turns the cache off.",
    ),
]
LayoutOpt = Annotated[
    LayoutKind,
    typer.Option(
        "--layout",
        metavar="[vllm|hf-legacy]",
        help="How a video's placeholder expands: vllm (what a vLLM worker expects, and the smg "
        "gateway sends), hf-legacy (older transformers).",
    ),
]
VideoPruningRateOpt = Annotated[
    float,
    typer.Option(
        "--video-pruning-rate",
        metavar="R",
        help="The worker's --video-pruning-rate (vLLM's name): the fraction of each video's "
        "tokens it drops after the vision encoder, in [0, 1); the prompt then holds only the "
        "kept ones. 0: a worker that does not prune. No worker says its rate: give the one "
        "it was started with.",
    ),
]
VideoPruningMethodOpt = Annotated[
    PruningMethod,
    typer.Option(
        "--video-pruning-method",
        metavar="[evs|vidcom2]",
        help="The worker's --video-pruning-method (used when the rate is above 0).",
    ),
]
MmItemLimitsOpt = Annotated[
    str | None,
    typer.Option(
        "--mm-item-limits",
        metavar="image=N,video=M",
        help="Most media items of each kind per request (a worker's mm_item_limits)."
        + default_text("no limit"),
        show_default=False,
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse (exit 3) a video that decodes to fewer frames than its container "
        "announces, instead of warning and using the frames that decode.",
    ),
]
FpsOpt = Annotated[
    float | None,
    typer.Option(
        "--fps",
        metavar="F",
        help="qwen3-vl, qwen3.5 and qwen2.5-vl: video frames to sample per second of the source; "
        "gemma4: at most this many (vLLM's loader's fps)."
        + default_text("the model's (2); gemma4: none"),
        show_default=False,
    ),
]
NumFramesOpt = Annotated[
    int | None,
    typer.Option(
        "--num-frames",
        metavar="N",
        help="Sample exactly N video frames (instead of --fps)."
        + default_text(
            "from --fps; llava-onevision, gemma4, internvl and nemotron-omni: the model's (32)"
        ),
        show_default=False,
    ),
]
MinFramesOpt = Annotated[
    int | None,
    typer.Option(
        "--min-frames",
        metavar="N",
        help="qwen3-vl, qwen3.5 and qwen2.5-vl: sample at least N frames of a short video."
        + default_text("the model's (4)"),
        show_default=False,
    ),
]
MaxFramesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-frames",
        metavar="N",
        help="qwen3-vl, qwen3.5 and qwen2.5-vl: sample at most N frames of a long video."
        + default_text("the model's (768)"),
        show_default=False,
    ),
]
MinPixelsOpt = Annotated[
    int | None,
    typer.Option(
        "--min-pixels",
        metavar="N",
        help="qwen3-vl, qwen3.5, qwen2.5-vl and glm4v, video: the whole clip's least pixels "
        "(frames x height x width)." + default_text("the model's"),
        show_default=False,
    ),
]
MaxPixelsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-pixels",
        metavar="N",
        help="qwen3-vl, qwen3.5, qwen2.5-vl and glm4v, video: the whole clip's pixel budget "
        "(frames x height x width)." + default_text("the model's"),
        show_default=False,
    ),
]

# ---- model files ----


def _model_dir(default: str) -> object:
    return typer.Option(
        "--model-dir",
        metavar="DIR",
        help="Model folder: its tokenizer, config.json and preprocessor configs."
        + default_text(default),
        show_default=False,
    )


#: Commands that work without a worker (and the stub, which serves these files).
ModelDirOpt = Annotated[Path | None, _model_dir("the built-in Qwen3-VL set")]
#: Commands that talk to workers: the served model's own files.
WorkerModelDirOpt = Annotated[Path | None, _model_dir("the worker's, from its GetTokenizer bundle")]
#: ``build``: a worker's when it builds for one.
BuildModelDirOpt = Annotated[
    Path | None, _model_dir("the worker's with --target, else the built-in Qwen3-VL set")
]
BundleOpt = Annotated[
    Path | None,
    typer.Option(
        "--bundle",
        metavar="ZIP",
        help="A tokenizer bundle zip, as a worker's GetTokenizer streams it (instead of "
        "--model-dir).",
        show_default=False,
    ),
]
FamilyOpt = Annotated[
    str | None,
    typer.Option(
        "--family",
        metavar="NAME",
        help="Model family: qwen3-vl, qwen3.5, qwen2.5-vl, qwen3-omni, llava, llava-next, "
        "llava-onevision, llama4, glm4v, glm5-next, gemma4, internvl, minimax-m3-vl, inkling "
        "or nemotron-omni." + default_text("from config.json, else qwen3-vl"),
        show_default=False,
    ),
]

# ---- the worker ----

TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        "-t",
        metavar="HOST:PORT",
        help="The worker's gRPC address." + default_text("$MMCTL_TARGET, else localhost:50051"),
        show_default=False,
    ),
]
#: Several workers (`bench`: round-robin; `batch`: to the least busy).
TargetsOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        "-t",
        metavar="HOST:PORT[,HOST:PORT…]",
        help="The workers' gRPC addresses, comma-separated; requests are shared among them."
        + default_text("$MMCTL_TARGET, else localhost:50051"),
        show_default=False,
    ),
]
TlsOpt = Annotated[
    bool, typer.Option("--tls", help="Connect with TLS (the system's roots unless --ca-cert).")
]
CaCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-cert",
        metavar="PEM",
        help="Root certificate(s) to trust for TLS (implies --tls).",
        show_default=False,
    ),
]
HeaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        metavar="KEY:VALUE",
        help="gRPC metadata sent with every call (repeatable)." + default_text("none"),
        show_default=False,
    ),
]


def timeout_opt(default: str) -> object:
    return typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Deadline of each call to the worker." + default_text(default),
        show_default=False,
    )


SendTimeoutOpt = Annotated[
    float | None,
    timeout_opt(
        "none for Generate (a frozen worker is caught by keepalive pings after "
        "$MMCTL_KEEPALIVE_S, 330 s, of silence); probing calls give up after 10 s"
    ),
]
