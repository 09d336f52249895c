"""Hypothesis profiles for the fuzz tests.

CI runs the ``ci`` profile: a fixed seed and ``MMCTL_FUZZ_EXAMPLES`` examples
per test (default 700; four tests, over 2,000 in all). A long run:

    MMCTL_FUZZ_EXAMPLES=50000 HYPOTHESIS_PROFILE=long pytest tests/fuzz -q
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MMCTL_FUZZ_EXAMPLES", "700"))
_COMMON = {
    "max_examples": EXAMPLES,
    "deadline": None,  # one example is a gRPC round trip on a shared machine
    "database": None,  # nothing written into the checkout
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("long", **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
