"""Progress bars on stderr (only when stderr is a terminal)."""

from __future__ import annotations


class FrameProgress:
    """A progress bar on stderr for videos, only when stderr is a terminal."""

    def __init__(self, output, enabled: bool) -> None:
        self.output, self.enabled, self.bar = output, enabled, None

    def __enter__(self):
        if not (self.enabled and self.output.err_console.is_terminal):
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.output.err_console,
            transient=True,
        )
        self.bar.start()
        task = self.bar.add_task("frames", total=None)

        def on_frame(done: int, total: int) -> None:
            self.bar.update(task, completed=done, total=total)

        return on_frame

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
