"""Shared test configuration: Hypothesis profiles.

``HYPOTHESIS_PROFILE=thorough`` runs every property with a few thousand examples; the
default profile keeps the suite fast.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=60, deadline=None)
settings.register_profile(
    "thorough", max_examples=3000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
