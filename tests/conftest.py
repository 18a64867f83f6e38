"""Test-session wide fixtures: hypothesis profiles and one shared Ray instance."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


#: the session's one Ray node carries these labels, so that placements by node label run on
#: it (tests/conformance/test_aggregate.py: two labels of one node, placed on per actor)
NODE_LABELS = {"rack": "r1", "disk": "ssd"}


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One Ray instance for the whole test session (init costs seconds), shut down at the end."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, labels=NODE_LABELS)
    yield
    if started:
        ray.shutdown()
