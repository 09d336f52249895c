"""The root ``mmctl`` command and the one error boundary.

Import cost matters here: this module imports only typer, the standard
library and :mod:`mmctl.errors`. Each command module registers itself below
and imports its heavy dependencies (numpy, av, grpc, transformers, the
generated protos) inside the function that needs them.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Annotated

import typer

from mmctl import signals as stops
from mmctl._version import __version__
from mmctl.errors import ExitCode, Interrupted, MmctlError, OutputClosed

HELP = """Multimodal gRPC requests to vLLM workers: preprocess video and images
exactly as vLLM does for the model's family (qwen3-vl, qwen3.5, qwen2.5-vl, qwen3-omni,
llava, llava-next, llava-onevision, llama4, glm4v, glm5-next, gemma4, internvl,
minimax-m3-vl, inkling, nemotron-omni: its video), build modality-tagged requests,
and send them inline or through /dev/shm.

stdout carries the product alone (send: the answer); decisions, timings,
progress, notes and hints go to stderr. --json prints one JSON document.
`mmctl COMMAND --help` shows each command's options and examples.

Examples:

\b
  mmctl demo                     # the main job against an embedded stub worker
  mmctl send clip.mp4 -p "What happens?" --target gpu-box:50051 --shm
  mmctl inspect-tokens clip.mp4  # the prompt's token layout, checked

Exit codes: 0 ok, 1 unexpected (a bug: run with --debug), 2 usage, 3 bad
input, 4 rejected by the worker, 5 worker unavailable, 6 check failed, 7
batch: some items failed, 8 batch: none succeeded, 9 the answer is partial,
10 batch: its output could not be written, 130 interrupted, 141 stdout
closed by its reader (| head: quiet, as a Unix tool on SIGPIPE).
"""

app = typer.Typer(
    name="mmctl",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help pages: no type names in boxes, and no rich import to print them.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mmctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show tracebacks for errors (or set MMCTL_DEBUG=1)."),
    ] = False,
) -> None:
    """mmctl: multimodal gRPC requests to vLLM workers."""


def _register() -> None:
    # Command modules import only typer at module level (see the docstring).
    from mmctl.cli import (
        batch,
        bench,
        build,
        demo,
        health,
        inspect_tokens,
        preprocess,
        send,
        shm,
        stub_worker,
    )

    app.command(name="preprocess")(preprocess.preprocess)
    app.command(name="inspect-tokens")(inspect_tokens.inspect_tokens)
    app.command(name="build")(build.build)
    app.command(name="send")(send.send)
    app.command(name="demo")(demo.demo)
    app.command(name="bench")(bench.bench)
    app.command(name="batch")(batch.batch)
    app.command(name="health")(health.health)
    app.command(name="info")(health.info)
    app.add_typer(shm.shm_app)
    app.command(name="stub-worker")(stub_worker.stub_worker)


_register()


def _debug_requested(argv: list[str]) -> bool:
    # Read before parsing so errors raised during parsing honour it too.
    from mmctl import settings

    return "--debug" in argv or settings.debug()


def _raise_interrupted(signum: int, _frame: object) -> None:
    # An exception of our own instead of KeyboardInterrupt: click would turn
    # KeyboardInterrupt into "Aborted!" with exit 1, and raising lets every
    # `finally` (shm cleanup, worker shutdown) run on the way out — within
    # the watchdog's grace period (mmctl.signals).
    name = signal.Signals(signum).name
    stops.arm(name)
    raise Interrupted(name)


def _none() -> str | None:
    return None


def main(argv: list[str] | None = None, *, stopped: Callable[[], str | None] = _none) -> int:
    """Entry point of the ``mmctl`` console script; returns the exit code.

    ``stopped``: the stop signal the console script noted while this module was
    still importing (``mmctl._entry``), acted on once the handlers are set."""
    args = sys.argv[1:] if argv is None else argv
    debug = _debug_requested(args)
    from mmctl.cli._output import documents_reset

    documents_reset()
    if not debug:
        # gRPC's C core logs its own view of a failure ("E1201 … Metadata key
        # … === Source Location Trace"), on top of the one line mmctl prints;
        # read when grpc first loads, so set before any command imports it.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    signal.signal(signal.SIGINT, _raise_interrupted)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    stops.watch_stops()
    stops.reraise_ignored_stops()
    try:
        if (early := stopped()) is not None:  # noted between the import and the lines above
            stops.arm(early)
            raise Interrupted(early)
        # standalone_mode=False: typer raises usage errors instead of printing
        # its own multi-line box, so they render like every other error.
        code = app(args=args, prog_name="mmctl", standalone_mode=False)
    except SystemExit as done:
        if done.code == 1:  # click's own answer to a closed pipe (help, --version)
            from mmctl.cli._output import reader_gone, silence

            if reader_gone(sys.stdout):
                silence(sys.stdout)
                return int(ExitCode.OUTPUT_CLOSED)
        return _exit_status(done.code)
    except (OutputClosed, BrokenPipeError) as closed:  # `| head`: normal for a pipe, so quiet
        if isinstance(closed, BrokenPipeError):  # written past the sink (click's help)
            from mmctl.cli._output import silence

            silence(sys.stdout)
        if debug:
            sys.stderr.write("mmctl: stdout was closed by its reader; stopped there\n")
        return int(ExitCode.OUTPUT_CLOSED)
    except typer.TyperException as err:  # usage errors: unknown option, bad value, …
        from mmctl.cli._output import render_error

        ctx = getattr(err, "ctx", None)
        if ctx is not None and err.format_message() == ctx.get_help():
            sys.stderr.write(ctx.get_help() + "\n")  # a group called bare: its help page
        else:
            render_error(sys.stderr, _usage_message(err), _usage_hint(err))
        code = int(ExitCode.USAGE) if getattr(err, "exit_code", 2) == 2 else err.exit_code
        _json_error(args, _usage_message(err), _usage_hint(err), code)
        return code
    except (MmctlError, Interrupted) as err:
        from mmctl.cli._output import render_error

        if debug:
            traceback.print_exc()
        render_error(sys.stderr, err.message, err.hint)
        _json_error(args, err.message, err.hint, int(err.exit_code))
        return int(err.exit_code)
    except KeyboardInterrupt:  # before our handler was installed, or raised by a library
        from mmctl.cli._output import render_error

        render_error(sys.stderr, "interrupted by SIGINT", None)
        _json_error(args, "interrupted by SIGINT", None, int(ExitCode.INTERRUPTED))
        return int(ExitCode.INTERRUPTED)
    except Exception as err:  # the boundary: anything else is a bug
        from mmctl.cli._output import render_error

        if (stop := _interrupted_inside(err)) is not None:
            # Ctrl-C raised inside machinery that wraps exceptions (a class
            # body's __set_name__ while numpy imports): still an interruption.
            render_error(sys.stderr, stop.message, None)
            _json_error(args, stop.message, None, int(stop.exit_code))
            return int(stop.exit_code)

        if debug:
            traceback.print_exc()
        message = f"unexpected {type(err).__name__}: {err}"
        hint = None if debug else "run with --debug or MMCTL_DEBUG=1 for the traceback"
        render_error(sys.stderr, message, hint)
        _json_error(args, message, hint, int(ExitCode.UNEXPECTED))
        return int(ExitCode.UNEXPECTED)
    return code if isinstance(code, int) else int(ExitCode.OK)


def _json_error(args: list[str], message: str, hint: str | None, code: int) -> None:
    """With ``--json``, a failure prints ``mmctl.error``'s document on stdout
    too — unless the command already printed its own (``health`` does, then
    exits 5): a script reading stdout gets one document either way."""
    from mmctl.cli._output import documents_printed, error_document

    words = args[: args.index("--")] if "--" in args else args
    if "--json" not in words or documents_printed():
        return
    names = [w for w in words if not w.startswith("-")]
    command = " ".join(names[:2]) if names[:1] == ["shm"] else (names[0] if names else "")
    error_document(sys.stdout, command, message, hint, code, ExitCode(code).name.lower())


def _interrupted_inside(err: BaseException) -> Interrupted | None:
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _usage_message(err: typer.TyperException) -> str:
    # typer's coercion prefixes "Value error, "; a sentence starts lower-case
    # after "Error: ", like the library's own messages.
    text = err.format_message().replace("Value error, ", "")
    return text[0].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text


def _usage_hint(err: typer.TyperException) -> str | None:
    ctx = getattr(err, "ctx", None)
    path = getattr(ctx, "command_path", None) or "mmctl"
    return f"{path} --help shows the options"


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1
