"""Test-session wide fixtures: hypothesis profiles, one shared Ray instance, and timeouts that
end a hypothesis test."""

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Time hypothesis tests out with pytest-timeout's ``thread`` method (``timeout_thread``).

    The default ``signal`` method raises pytest's ``Failed`` in the test, which hypothesis
    takes for a failing example and shrinks: it runs the test again, with no alarm left, so a
    test that spins hangs the suite instead of failing. The thread method dumps every thread's
    stack and ends the process (under xdist: that worker, reported as a crash of the test,
    and replaced). Tests that run a state machine themselves (`run_state_machine_as_test`)
    are marked ``method="thread"`` where they are written."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(timeout_thread(item, config), append=False)


def timeout_thread(item: pytest.Item, config: pytest.Config) -> pytest.MarkDecorator:
    """``item``'s timeout (its marker's, else the ini's), by the thread method."""
    marker = item.get_closest_marker("timeout")
    seconds = None
    if marker is not None:
        seconds = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if seconds is None:
        seconds = config.getini("timeout")
    return pytest.mark.timeout(float(seconds), method="thread")


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
