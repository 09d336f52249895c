"""`mmctl build`: a whole GenerateRequest (tensors inline) written to a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmctl.choices import (
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    LayoutKind,
    MediaRef,
)
from mmctl.cli._options import (
    AllowSpecialOpt,
    BuildModelDirOpt,
    BundleOpt,
    CaCertOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    HeaderOpt,
    JsonOpt,
    LayoutOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MaxTokensOpt,
    MediaRefOpt,
    MinFramesOpt,
    MinPixelsOpt,
    MmItemLimitsOpt,
    NumFramesOpt,
    PixelDtypeOpt,
    PromptFileOpt,
    PromptOpt,
    RequestIdOpt,
    SeedOpt,
    SoundtrackOpt,
    StopOpt,
    StreamOpt,
    StrictOpt,
    SystemOpt,
    TemperatureOpt,
    TlsOpt,
    TopKOpt,
    TopPOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
    default_text,
)

if TYPE_CHECKING:
    from rich.console import Console

HELP = """Build a modality-tagged GenerateRequest with vLLM-exact prompt tokens; write it.

MEDIA: video, image and sound files, in the order the prompt shows them. The
request (tensors inline) is written to --out as binary protobuf, for
`mmctl send --request` or any gRPC client (grpcurl, ghz).

A request with sound is written worker-processed (media_refs: data: URLs
carrying the files, or file:// paths with --media-ref file; the prompt by the
model's own chat template, expanded by the worker).

The pixel type is the one decision a replayed file cannot take back: a
worker that normalizes on the device reads floats as raw pixels (and the
reverse), silently. Without --target the request is built for a default
vLLM worker (0.33: raw uint8 pixels for Qwen2.5-VL, Qwen3-VL, Qwen3.5 and GLM); with
--target the worker is asked, as `send` asks it (pixel type, item limits,
encoder budget, layout checks). The summary (on stderr; stdout stays empty
unless --json) says which and why.

Examples:

\b
  mmctl build clip.mp4 -p "Which colours appear, in order?" -o request.pb
  mmctl build a.jpg b.png clip.mp4 -p "Compare them." -o mixed.pb --pixel-dtype bfloat16
  mmctl build clip.mp4 -o req.pb --json | jq '.request.batches[0].tensors'
  mmctl build clip.mp4 -o req.pb --target gpu1:50051   # for that worker
  mmctl send --request request.pb        # replay it against a worker
  mmctl build speech.wav -p "Transcribe it." -o sound.pb --model-dir ./Qwen2.5-Omni-7B

Exit codes: 0 written; 2 usage; 3 bad input (or a truncated video with
--strict); 4 refused by --target's worker; 5 --target unavailable; 6 the
layout fails the family's layout check (Qwen: the mrope walk; the others:
the placeholder spans) or a check against --target's worker (nothing is
written).
"""


_OutOpt = Annotated[
    Path,
    typer.Option(
        "--out", "-o", metavar="FILE", help="Where to write the request (binary protobuf)."
    ),
]
_ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Write the request even when the layout check (mrope walk, placeholder spans) fails.",
    ),
]
_TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        "-t",
        metavar="HOST:PORT",
        help="Build for this worker: ask it what it expects, as send does."
        + default_text("none: a default vLLM worker"),
        show_default=False,
    ),
]


def build(
    media: Annotated[list[Path], typer.Argument(metavar="MEDIA", hidden=True, show_default=False)],
    out: _OutOpt,
    prompt: PromptOpt = None,
    prompt_file: PromptFileOpt = None,
    allow_special_tokens: AllowSpecialOpt = False,
    pixel_dtype: PixelDtypeOpt = None,
    layout: LayoutOpt = LayoutKind.VLLM,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    top_k: TopKOpt = None,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    stream: StreamOpt = None,
    request_id: RequestIdOpt = None,
    mm_item_limits: MmItemLimitsOpt = None,
    system: SystemOpt = None,
    chat: ChatOpt = None,
    strict: StrictOpt = False,
    model_dir: BuildModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    soundtrack: SoundtrackOpt = False,
    media_ref: MediaRefOpt = MediaRef.DATA,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    force: _ForceOpt = False,
    target: _TargetOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    header: HeaderOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.client.options import SendOptions
    from mmctl.media.probe import check_readable
    from mmctl.models.settings import VisionOverrides
    from mmctl.request_file import write_for_worker, write_offline
    from mmctl.values.pruning import VideoPruning

    output = Output(json_mode=json_out, schema="build")
    output.status("loading the model files and the tokenizer…")
    options = SendOptions(
        prompt=_inputs.prompt_text(prompt, prompt_file),
        pixel_dtype=pixel_dtype,
        sampling=_inputs.sampling(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop=stop,
        ),
        stream=stream,
        request_id=request_id,
        system=system,
        chat=chat,
        allow_special_tokens=allow_special_tokens,
        strict=strict,
        soundtrack=soundtrack,
        media_ref=media_ref,
        vision=VisionOverrides(
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        ),
    )
    limits = _inputs.item_limits(mm_item_limits)
    for path in media:
        check_readable(path)
    if target is None:
        doc = write_offline(
            media, out, options, model_dir=model_dir, bundle=bundle, family=family,
            layout=layout, item_limits=limits, force=force, on_warning=output.warn,
            video_pruning=VideoPruning(video_pruning_rate, video_pruning_method),
        )  # fmt: skip
        output.written(doc, lambda console: _render(console, doc), _schema(doc))
        return
    # One request: nothing to reuse in a pixel cache.
    connection = _inputs.connection(
        header=header, tls=tls, ca_cert=ca_cert, model_dir=model_dir, bundle=bundle,
        family=family, pixel_cache_mb=0, video_pruning_rate=video_pruning_rate,
        video_pruning_method=video_pruning_method,
    )  # fmt: skip
    doc = write_for_worker(
        target, media, out, options, connection=connection, layout=layout, item_limits=limits,
        force=force,
    )  # fmt: skip
    output.written(doc, lambda console: _render_for_worker(console, doc), _schema(doc))


build.__doc__ = HELP


def _render_for_worker(console: Console, doc: dict[str, Any]) -> None:
    req = doc["request"]
    console.print(
        f"[bold]wrote[/] {doc['out']}  ({doc['bytes']:,} bytes)  request_id {req['request_id']}  "
        f"for {doc['target']}"
    )
    _render_decisions(console, doc["decisions"])
    console.print(f"[bold]prompt[/] {req['num_input_ids']} tokens")
    _render_batches(console, req)


def _schema(doc: dict[str, Any]) -> str:
    """A worker-processed request (media_refs: sound) is its own document."""
    return "build-refs" if doc["request"].get("media_refs") else "build"


def _render(console: Console, doc: dict[str, Any]) -> None:
    req = doc["request"]
    console.print(
        f"[bold]wrote[/] {doc['out']}  ({doc['bytes']:,} bytes)  request_id {req['request_id']}"
    )
    _render_decisions(console, doc["decisions"])
    check = doc["check"]
    if check.get("ran", True):
        verdict = "pass" if check["ok"] else "FAIL: " + check["reason"]
    else:
        verdict = f"not run ({check['reason']})"
    console.print(
        f"[bold]prompt[/] {req['num_input_ids']} tokens, {doc['prompt_format']}; layout {doc['layout']}, "
        f"{check['name'].replace('_', ' ')} {verdict}",
        highlight=False,
    )
    _render_batches(console, req)
    for n, ref in enumerate(req.get("media_refs", [])):
        console.print(f"[bold]media_refs[{n}][/] {ref['modality']}  {ref['url']}", highlight=False)


def _render_decisions(console: Console, decisions: dict[str, dict[str, str]]) -> None:
    # As `send` shows its decisions: the value, a dash, the reason.
    for name, decision in decisions.items():
        console.print(
            f"[bold]{name.replace('_', ' ')}[/] {decision['value']} — {decision['reason']}",
            highlight=False,
        )


def _render_batches(console: Console, req: dict[str, Any]) -> None:
    from rich.table import Table

    for n, batch in enumerate(req["batches"]):
        where = "mm_inputs" if n == 0 else f"extra_mm_inputs[{n - 1}]"
        spans = ", ".join(
            f"[{p['offset']}, {p['offset'] + p['length']})" for p in batch["mm_placeholders"]
        )
        console.print(
            f"[bold]{where}[/] {batch['modality']}  im_token_id {batch['im_token_id']}  spans {spans}"
        )
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        for col in ("tensor", "shape", "dtype", "bytes", "sha256"):
            table.add_column(col)
        for key, t in batch["tensors"].items():
            table.add_row(
                key, str(t["shape"]), t["dtype"], f"{t['bytes']:,}", t.get("sha256", "")[:16]
            )
        console.print(table)
        console.print(
            f"  batched {batch['batched_keys']}  flat {batch['flat_keys']}  cpu {batch['keep_on_cpu_keys']}"
        )
