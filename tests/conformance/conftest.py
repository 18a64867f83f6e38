"""Parametrizes the conformance suite over every backend that ships with rxrl."""

from __future__ import annotations

import pytest

from tests.conformance.harness import BACKENDS


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test (Ray tests share one Ray instance)."""
    name: str = request.param
    if name == "ray":
        request.getfixturevalue("ray_session")
    return name

