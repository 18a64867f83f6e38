"""Placement: where a group's actors go on a multi-node Ray cluster (`rxrl.Placement`).

The cluster test runs ``ray_cluster_placement.py`` in a subprocess (3 nodes on this machine,
``ray.cluster_utils``; the session's Ray stays up). Law: ``pack`` puts a group on one node,
``spread`` on as many as it has actors (when the cluster has that many), node labels on
matching nodes only, per actor too; an aggregator beside its part's first actor, or on a node
of its placement when aggregating by placement; PPO's and IMPALA's workers
and learners go where their settings say; a label no node has is a timeout naming the actor
and its placement, not a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import rxrl
from rxrl import ops
from rxrl.algos import get
from rxrl.algos.configs import with_settings

SCRIPT = Path(__file__).with_name("ray_cluster_placement.py")


@pytest.mark.timeout(300)
def test_placements_on_a_three_node_cluster() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=290,
                          env=env, cwd=Path(__file__).parents[2], check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(set(r["pack"])) == 1 and "head" not in r["pack"]
    assert sorted(r["spread"]) == ["a", "b"]
    assert r["zone_b"] == ["b", "b"]
    for part in r["aggregated"]:  # an aggregator runs beside its part's first actor
        assert part["aggregator"] == part["workers"][0] != "head", r
    assert sorted(z for part in r["aggregated"] for z in part["workers"]) == ["a", "a", "b", "b"]
    # by placement: aggregator i on a node of placements[i], reading exactly the actors there
    assert r["by_placement"] == [{"aggregator": "b", "workers": ["b", "b"]},
                                 {"aggregator": "a", "workers": ["a", "a"]}], r
    assert "Where[0]" in r["nowhere"] and "'zone': 'nowhere'" in r["nowhere"]
    for algo in ("ppo", "impala"):
        assert sorted(r[algo]["workers"]) == ["a", "b"], r
        assert r[algo]["learner"] == ["b"], r
    # placement.workers=zone=a|zone=b deals the workers out in turn; aggregated by placement
    assert r["impala_by_placement"] == {"workers": ["a", "b"], "learner": ["b"]}, r


@pytest.mark.parametrize(("text", "message"), [
    ("bogus", "unknown placement 'bogus'"),
    ("spread,pack", "unknown placement 'pack'"),
    ("zone=", "bad node label 'zone='"),
    ("spread,zone=a", "takes no node labels"),
])
def test_bad_placements_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rxrl.Placement.parse(text)
    with pytest.raises(ValueError, match=message):
        with_settings(get("ppo").config(), {"placement.workers": text})


def test_a_placement_reaches_the_groups_and_any_leaves_them_alone() -> None:
    algo = get("dqn")
    actors: Any = algo.build(with_settings(algo.config(), {"placement.workers": "spread",
                                                           "placement.replay": "zone=a"}))[1]
    assert actors.workers.placement == rxrl.Placement("spread")
    assert actors.replay.placement == rxrl.Placement(labels={"zone": "a"})
    assert actors.learner.placement == rxrl.Placement()
    assert "placement" not in actors.learner.options


def test_placing_a_learner_hosted_on_the_driver_is_refused_in_one_line() -> None:
    algo = get("ppo")  # its learner is on the driver by default
    with pytest.raises(ValueError, match="hosted on the driver: set learner_placement=actor"):
        with_settings(algo.config(), {"placement.learner": "spread"})
    grouped = with_settings(algo.config(), {"placement.learner": "spread", "learner.num_learners": 2})
    assert algo.build(grouped)[1].learner.placement == rxrl.Placement("spread")


class Somewhere:
    """An actor that only says it is up."""

    def __init__(self, index: int) -> None:
        self.index = index

    def up(self) -> int:
        return self.index


@pytest.mark.timeout(120)
def test_a_label_no_node_has_is_a_warning_at_once_then_a_timeout(ray_session: None) -> None:
    """A typo in a label, or a local Ray without labels, is said at once (the actor waits up to
    ``start_timeout_s`` for such a node to join, as an autoscaler may add one); a label the node
    has runs without a word (the test session's node: tests/conftest.py ``NODE_LABELS``)."""
    nowhere = rxrl.indexed_actors(Somewhere, 1, name="Nowhere").placed("zone=nowhere")
    warned = (r"Nowhere\[0\] is placed on nodes labelled \{'zone': 'nowhere'\}, and no node of this "
              r"cluster has those labels \(theirs: .*rack=r1")
    plan = rxrl.from_actors(nowhere, Somewhere.up) | ops.gather()
    with (pytest.warns(RuntimeWarning, match=warned),
          pytest.raises(rxrl.WaitTimeoutError, match=r"Nowhere\[0\].*start_timeout_s=1"),
          rxrl.run(plan, "ray", start_timeout_s=1) as run):
        next(iter(run))
    here = rxrl.indexed_actors(Somewhere, 2, name="Here").placed(["rack=r1", "disk=ssd"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with rxrl.run(rxrl.from_actors(here, Somewhere.up) | ops.barrier() | ops.take(1), "ray") as run:
            assert list(run) == [[0, 1]]
