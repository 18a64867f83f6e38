"""Run by test_ray_placement: a 3-node Ray cluster on this machine (``ray.cluster_utils``), and
where rxrl's placements put a group's actors on it.

The head has no CPU for actors; nodes ``a`` and ``b`` (labels ``zone=a`` / ``zone=b``) have
two each. Prints one JSON line: the node (by zone) of every actor of each placement, PPO's and
IMPALA's workers and learner placed by their settings after two training iterations, the
node of each aggregator of an ``ops.aggregate`` (by index and by placement) and of its part's
actors, and the one-line error of a label no node has.
"""

from __future__ import annotations

import json
from typing import Any

import ray
from ray.cluster_utils import Cluster

import rxrl
from rxrl import ops
from rxrl.algos import get
from rxrl.algos.configs import with_settings


class Where:
    """An actor that says which node it runs on."""

    def __init__(self, index: int) -> None:
        self.index = index

    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())


def node_of(actor: Any, _: object) -> str:
    """The node an actor (of any class) runs on."""
    return str(ray.get_runtime_context().get_node_id())


def zones() -> dict[str, str]:
    untyped: Any = ray
    return {n["NodeID"]: n.get("Labels", {}).get("zone", "head") for n in untyped.nodes() if n["Alive"]}


def placed_on(placement: str, size: int) -> list[str]:
    group = rxrl.indexed_actors(Where, size).with_options(num_cpus=1).placed(placement)
    plan = rxrl.from_actors(group, Where.node) | ops.barrier() | ops.take(1)
    with rxrl.run(plan, "ray", timeout_s=60, start_timeout_s=60) as run:
        (nodes,) = list(run)
    z = zones()
    return [z[n] for n in nodes]


def here(nodes: list[str]) -> tuple[str, list[str]]:
    """In a sub-plan: the node its aggregator runs on, and its part's actors' nodes."""
    return str(ray.get_runtime_context().get_node_id()), nodes


def aggregated_on() -> list[dict[str, Any]]:
    """Per aggregator of 4 spread actors in 2 parts: its zone and its actors' zones."""
    group = rxrl.indexed_actors(Where, 4).with_options(num_cpus=1).placed("spread")
    agg = ops.aggregate(rxrl.from_actors(group, Where.node),
                        lambda part: part | ops.barrier() | ops.map(here), num_aggregators=2)
    with rxrl.run(agg | ops.barrier() | ops.take(1), "ray", timeout_s=60, start_timeout_s=60) as run:
        (parts,) = list(run)
    z = zones()
    return [{"aggregator": z[a], "workers": [z[n] for n in nodes]} for a, nodes in parts]


def aggregated_by_placement() -> list[dict[str, Any]]:
    """Per aggregator of 4 actors placed a, b, a, b and aggregated by placement (b, then a):
    its zone and its actors' zones."""
    group = rxrl.indexed_actors(Where, 4).with_options(num_cpus=1).placed(["zone=a", "zone=b"] * 2)
    agg = ops.aggregate(rxrl.from_actors(group, Where.node),
                        lambda part: part | ops.barrier() | ops.map(here), placements=["zone=b", "zone=a"])
    with rxrl.run(agg | ops.barrier() | ops.take(1), "ray", timeout_s=60, start_timeout_s=60) as run:
        (parts,) = list(run)
    z = zones()
    return [{"aggregator": z[a], "workers": [z[n] for n in nodes]} for a, nodes in parts]


def with_node(actor: Any, workers: list[str]) -> tuple[list[str], str]:
    """On a learner: the workers' nodes it was given, and its own node."""
    return workers, str(ray.get_runtime_context().get_node_id())


def trained_on(algo_name: str, settings: dict[str, Any]) -> dict[str, list[str]]:
    """After two records of ``algo_name``: its workers' and learners' zones (the plan read once:
    an aggregated plan's split has one reader per branch)."""
    algo = get(algo_name)
    config = with_settings(algo.config(), settings)
    plan, actors = algo.build(config)
    probe = (plan | ops.take(2) | ops.window(2) | ops.call_all(actors.workers, node_of)
             | ops.call_all(actors.learner, with_node))
    z = zones()
    with rxrl.run(probe, "ray", timeout_s=120, start_timeout_s=60) as run:
        (replies,) = list(run)
    return {"workers": [z[n] for n in replies[0][0]], "learner": [z[n] for _, n in replies]}


def main() -> None:
    cluster: Any = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for zone in ("a", "b"):
        cluster.add_node(num_cpus=2, labels={"zone": zone})
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        result: dict[str, Any] = {
            "pack": placed_on("pack", 2),
            "spread": placed_on("spread", 2),
            "zone_b": placed_on("zone=b", 2),
            "aggregated": aggregated_on(),
            "by_placement": aggregated_by_placement(),
        }
        try:
            group = rxrl.indexed_actors(Where, 1).placed("zone=nowhere")
            with rxrl.run(rxrl.from_actors(group, Where.node) | ops.gather(), "ray",
                          start_timeout_s=5) as run:
                next(iter(run))
        except rxrl.WaitTimeoutError as e:
            result["nowhere"] = str(e)
        common = {"num_workers": 2, "num_envs_per_worker": 2, "fragment_length": 32,
                  "placement.workers": "spread", "placement.learner": "zone=b",
                  "learner_placement": "actor"}
        result["ppo"] = trained_on("ppo", {**common, "train_batch_size": 128,
                                           "learner.minibatch_size": 64})
        result["impala"] = trained_on("impala", {**common, "train_batch_size": 64,
                                                 "learner.minibatch_size": 32})
        result["impala_by_placement"] = trained_on("impala", {
            **common, "train_batch_size": 64, "learner.minibatch_size": 32,
            "placement.workers": "zone=a|zone=b", "num_aggregators": 2, "aggregate_by": "placement"})
        print(json.dumps(result))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
