"""`mmctl send`: video, images and sound to a worker, inline or through /dev/shm, with the answer and timings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmctl.choices import (
    DEFAULT_PRUNING_METHOD,
    DEFAULT_PRUNING_RATE,
    SHM_MIN_BYTES,
    MediaRef,
    Processing,
    Transport,
)
from mmctl.cli._options import (
    AllowSpecialOpt,
    BundleOpt,
    CaCertOpt,
    ChatOpt,
    FamilyOpt,
    FpsOpt,
    HeaderOpt,
    JsonOpt,
    MaxFramesOpt,
    MaxPixelsOpt,
    MaxTokensOpt,
    MediaRefOpt,
    MinFramesOpt,
    MinPixelsOpt,
    NegotiatedPixelDtypeOpt,
    NumFramesOpt,
    ProcessingOpt,
    PromptFileOpt,
    PromptOpt,
    RequestIdOpt,
    SeedOpt,
    SendTimeoutOpt,
    SoundtrackOpt,
    StopOpt,
    StreamOpt,
    StrictOpt,
    SystemOpt,
    TargetOpt,
    TemperatureOpt,
    TlsOpt,
    TopKOpt,
    TopPOpt,
    VideoPruningMethodOpt,
    VideoPruningRateOpt,
    WorkerModelDirOpt,
)

HELP = """Send media to a vLLM gRPC worker; print the answer and a timing breakdown.

MEDIA: video, image and sound files (WAV, FLAC, MP3, Ogg/Opus, M4A/AAC),
in the order the prompt shows them. Or
--request FILE replays a request written by `mmctl build` (sampling,
--timeout, --request-id and the transport apply to it; options that shape a
new request are refused).

stdout carries the answer alone (streamed in a terminal), so
ANSWER=$(mmctl send clip.mp4) is the answer; decisions, checks and timings
go to stderr (--json: one document on stdout with all of them). The timing
rows add up to the total: set-up (connect + probe, model files, tokenizer
load), then the request's own phases.

Examples:

\b
  mmctl send clip.mp4 -p "Which colours appear, in order?" --shm
  mmctl send clip.mp4 --target gpu-box:50051 --inline --json | jq .answer
  mmctl send photo.jpg clip.mp4 -p @question.txt --max-tokens 64
  echo "Describe the motion." | mmctl send clip.mp4 -p -
  mmctl send --request request.pb --temperature 0 --shm
  mmctl send clip.mp4 --compare-processing
  mmctl send speech.flac -p "Transcribe it." --model-dir ./Qwen2.5-Omni-7B
  mmctl send clip.mp4 --soundtrack -p "What is said, and what is shown?"

A model no mmctl family handles is preprocessed by the worker (media_refs;
--processing auto, said once on stderr). So is every request with sound:
smg-grpc-servicer cannot take preprocessed audio, so the worker decodes the
files (data: URLs, or file:// with --media-ref file); its prompt is written
by the model's own chat template.

Exit codes: 0 answered; 2 usage; 3 bad input (or /dev/shm unusable with
--shm, or a truncated video with --strict, or a model no family handles
that the worker cannot preprocess either); 4 the worker refused the
request; 5 worker unreachable, deadline passed, or it died; 6 a safety check
refused to send; 9 the answer is partial (the worker aborted the generation,
finish_reason abort, or its stream stopped early; --json still prints what
came); 130 interrupted (shm files removed); 141 stdout closed by its reader
(| head), quietly.
"""


_MediaOpt = Annotated[
    list[Path] | None, typer.Argument(metavar="MEDIA", hidden=True, show_default=False)
]
_TransportOpt = Annotated[
    Transport,
    typer.Option(
        "--transport",
        metavar="[auto|inline|shm]",
        help="How tensors travel; auto takes /dev/shm when the worker shares this host's.",
    ),
]
_InlineOpt = Annotated[bool, typer.Option("--inline", help="Shorthand for --transport inline.")]
_ShmMinBytesOpt = Annotated[
    int,
    typer.Option("--shm-min-bytes", metavar="BYTES", help="Tensors smaller than this stay inline."),
]
_CompareProcessingOpt = Annotated[
    bool,
    typer.Option(
        "--compare-processing",
        help="Send with client and with worker processing on one set-up; compare.",
    ),
]
_RequestOpt = Annotated[
    Path | None,
    typer.Option(
        "--request",
        metavar="FILE",
        help="Replay a request file from `mmctl build` (instead of MEDIA).",
        show_default=False,
    ),
]
_SkipChecksOpt = Annotated[
    bool,
    typer.Option("--skip-checks", help="Send even when a safety check refuses (debugging)."),
]
_RefreshBundleOpt = Annotated[
    bool,
    typer.Option(
        "--refresh-bundle", help="Fetch the worker's tokenizer bundle again (not the cache)."
    ),
]


def send(
    media: _MediaOpt = None,
    prompt: PromptOpt = None,
    prompt_file: PromptFileOpt = None,
    target: TargetOpt = None,
    transport: _TransportOpt = Transport.AUTO,
    shm: Annotated[bool, typer.Option("--shm", help="Shorthand for --transport shm.")] = False,
    inline: _InlineOpt = False,
    shm_min_bytes: _ShmMinBytesOpt = SHM_MIN_BYTES,
    pixel_dtype: NegotiatedPixelDtypeOpt = None,
    processing: ProcessingOpt = Processing.AUTO,
    media_ref: MediaRefOpt = MediaRef.DATA,
    soundtrack: SoundtrackOpt = False,
    compare_processing: _CompareProcessingOpt = False,
    request: _RequestOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    top_k: TopKOpt = None,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    stream: StreamOpt = None,
    timeout: SendTimeoutOpt = None,
    request_id: RequestIdOpt = None,
    header: HeaderOpt = None,
    tls: TlsOpt = False,
    ca_cert: CaCertOpt = None,
    skip_checks: _SkipChecksOpt = False,
    refresh_bundle: _RefreshBundleOpt = False,
    system: SystemOpt = None,
    chat: ChatOpt = None,
    allow_special_tokens: AllowSpecialOpt = False,
    strict: StrictOpt = False,
    model_dir: WorkerModelDirOpt = None,
    bundle: BundleOpt = None,
    family: FamilyOpt = None,
    fps: FpsOpt = None,
    num_frames: NumFramesOpt = None,
    min_frames: MinFramesOpt = None,
    max_frames: MaxFramesOpt = None,
    min_pixels: MinPixelsOpt = None,
    max_pixels: MaxPixelsOpt = None,
    video_pruning_rate: VideoPruningRateOpt = DEFAULT_PRUNING_RATE,
    video_pruning_method: VideoPruningMethodOpt = DEFAULT_PRUNING_METHOD,
    json_out: JsonOpt = False,
) -> None:
    from mmctl.cli import _inputs
    from mmctl.cli._output import Output
    from mmctl.cli._render import follow, render_comparison, render_report
    from mmctl.client.client import Client
    from mmctl.client.options import Hooks, SendOptions, send_inputs
    from mmctl.errors import UsageError
    from mmctl.models.settings import VisionOverrides
    from mmctl.timing import Timeline

    output = Output(json_mode=json_out, schema="send")
    timeline = Timeline(on_lap=follow(output))
    output.status("checking the inputs…")
    opts = SendOptions(
        prompt=_inputs.prompt_text(prompt, prompt_file),
        transport=_inputs.transport(transport, shm=shm, inline=inline),
        shm_min_bytes=shm_min_bytes,
        pixel_dtype=pixel_dtype,
        processing=processing,
        media_ref=media_ref,
        soundtrack=soundtrack,
        sampling=_inputs.sampling(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop=stop,
        ),
        stream=stream,
        timeout=timeout,
        request_id=request_id,
        system=system,
        chat=chat,
        allow_special_tokens=allow_special_tokens,
        strict=strict,
        skip_checks=skip_checks,
        vision=VisionOverrides(
            fps=fps,
            num_frames=num_frames,
            min_frames=min_frames,
            max_frames=max_frames,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
        ),
    )
    inputs = send_inputs(media or [], request, opts)
    # One request a process: nothing to reuse in a pixel cache, and
    # --compare-processing compares what each way of preprocessing costs every time.
    client = Client(target, _inputs.connection(
        header=header, tls=tls, ca_cert=ca_cert, model_dir=model_dir, bundle=bundle,
        family=family, refresh_bundle=refresh_bundle, pixel_cache_mb=0,
        video_pruning_rate=video_pruning_rate, video_pruning_method=video_pruning_method,
    ))  # fmt: skip
    hooks = Hooks(on_note=output.note, on_warning=output.warn)
    with client:
        if compare_processing:
            from mmctl.client.compare import compare_processing as compare

            if request is not None:
                raise UsageError("--compare-processing runs both --processing modes on MEDIA files")
            done = compare(client, list(inputs.media), opts, hooks)
            output.result(
                done.as_dict(),
                human=lambda console: render_comparison(console, done, "client vs worker"),
                schema="send-comparison",
            )
            return
        streaming = not json_out and opts.stream is not False
        with output.frames() as on_frame:
            hooks = Hooks(
                on_text=output.text if streaming else None,
                on_frame=on_frame,
                on_note=output.note,
                on_warning=output.warn,
            )
            result = client.run(opts, inputs, hooks, timeline)
    if json_out:
        output.json_line(result.as_dict())
    else:
        # stdout is the answer alone (`ANSWER=$(mmctl send …)`); the report, stderr.
        output.text(("" if streaming else result.answer) + "\n")
        output.report(lambda console: render_report(console, result))
    partial = result.partial()
    if partial is not None:
        raise partial


send.__doc__ = HELP
