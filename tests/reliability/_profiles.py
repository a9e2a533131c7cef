"""Hypothesis settings of the reliability suite: ~100 derandomized cases in ``make test``, 1000+ in ``make fuzz``.

``HOOKWIDGETS_FUZZ=1`` (what ``make fuzz`` sets) selects the long profile; ``HOOKWIDGETS_FUZZ_EXAMPLES``
overrides its case count. The long profile explores new cases on every run unless ``CI`` is set.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "hookwidgets-test",
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same 100 cases on every machine: a red `make test` reproduces
    database=None,
    suppress_health_check=_SLOW_OK,
    print_blob=True,
)
settings.register_profile(
    "hookwidgets-fuzz",
    max_examples=int(os.environ.get("HOOKWIDGETS_FUZZ_EXAMPLES", "1000")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    database=None,
    suppress_health_check=_SLOW_OK,
    print_blob=True,  # a failure prints @reproduce_failure(...) to replay it exactly
)

PROFILE = "hookwidgets-fuzz" if os.environ.get("HOOKWIDGETS_FUZZ") else "hookwidgets-test"
SETTINGS = settings.get_profile(PROFILE)
