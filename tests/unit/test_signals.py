"""mmctl.signals: a stop raised where Python cannot propagate it is delivered again."""

from __future__ import annotations

import subprocess
import sys

# The CLI's handler raised inside a __del__ (as inside the import system's
# module-lock weakref callback): Python would print "Exception ignored …
# Traceback" and carry on; with the hook the stop reaches the main code.
SCRIPT = """
import signal
import time
from mmctl import signals
from mmctl.errors import Interrupted

def handler(signum, frame):
    raise Interrupted(signal.Signals(signum).name)

signal.signal(signal.SIGINT, handler)
signals.reraise_ignored_stops()

class Finalized:
    def __del__(self):
        raise Interrupted("SIGINT")

try:
    Finalized()
    deadline = time.monotonic() + 10  # the command goes on, until the stop comes back
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("carried on")
except Interrupted as stop:
    print("stopped:", stop.message)

class Broken:
    def __del__(self):
        raise ValueError("not a stop")

Broken()
"""


def test_a_stop_raised_in_a_finalizer_reaches_the_main_code_without_a_traceback():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["stopped: interrupted by SIGINT"]
    # Other unraisable exceptions are still reported as Python reports them.
    assert "Interrupted" not in done.stderr
    assert "ValueError: not a stop" in done.stderr
