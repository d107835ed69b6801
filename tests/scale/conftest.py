"""Shared fixtures of the scale-out tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster of 2 CPUs per test module (it takes seconds to start), at the
    workers' niceness a ``--ray`` run uses; players and Ray backends connect to it."""
    ray = pytest.importorskip("ray")
    from stratagem.cluster import WORKER_NICENESS

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="WARNING",
        _system_config={"worker_niceness": WORKER_NICENESS},
    )
    yield
    ray.shutdown()
