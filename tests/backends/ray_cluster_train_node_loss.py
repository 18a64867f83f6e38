"""Run by test_ray_faults: PPO and IMPALA training on a 3-node Ray cluster that loses a node.

The head (the driver; IMPALA's learner, placed there by the label ``zone=head``) and two worker
nodes labelled ``zone=w`` (the rollout workers' placement). After a few iterations the node of
rollout worker 0 is removed (its raylet killed); the workers have restarts
(``rxrl.Trainer(..., worker_restarts=...)``), so those on the lost node come back on the other
worker node and the run finishes its budget there. The third run, IMPALA with an aggregator
beside each worker, loses the aggregators on that node: they are made again beside their
workers. Prints one JSON line per algorithm: the records' counters, the nodes before and after,
the live aggregators, the run's status.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import ray
from ray.cluster_utils import Cluster

import rxrl

#: detect a lost node within about a second instead of Ray's default of tens of seconds
FAST_HEALTH_CHECKS = {"health_check_period_ms": 200, "health_check_failure_threshold": 3,
                      "health_check_timeout_ms": 200}


def worker_nodes() -> list[str]:
    """The node of every live rollout worker actor, worker 0 first (Ray's actor table; rxrl
    names an actor ``rxrl:<run>:<generation>:<Group>[<index>]``)."""
    from ray._private import state

    table: Any = state.actors()
    named = sorted((int(str(a["Name"]).rsplit("[", 1)[-1].rstrip("]")), a["Address"]["NodeID"])
                   for a in table.values()
                   if a["State"] == "ALIVE" and ":RolloutWorker[" in str(a.get("Name")))
    return [node for _, node in named]


def aggregators() -> list[str]:
    """The names of the live aggregator actors (``rxrl:<run>:[<life>:]aggregator[<k>]``)."""
    from ray._private import state

    table: Any = state.actors()
    return sorted(str(a["Name"]).split(":", 2)[2] for a in table.values()
                  if a["State"] == "ALIVE" and "aggregator[" in str(a.get("Name")))


def train(cluster: Any, algo: str, settings: dict[str, Any], steps: int) -> dict[str, Any]:
    """Train ``algo`` across the cluster; remove the node of worker 0 after 3 records."""
    records: list[tuple[int, int]] = []
    before: list[str] = []
    removed = ""
    with tempfile.TemporaryDirectory() as tmp:
        trainer = rxrl.Trainer(algo, f"{tmp}/run", env="CartPole-v1", settings=settings, steps=steps,
                             address=cluster.address, worker_restarts=3, handle_signals=False,
                             loggers=["csv"], seed=0)
        after: list[str] = []
        live_aggregators: list[str] = []
        for record in trainer:
            records.append((record.env_steps_sampled, record.env_steps_trained))
            if removed:
                after = worker_nodes()  # where the workers are at the last record
                live_aggregators = aggregators()
            if len(records) == 3:
                before = worker_nodes()
                removed = before[0]
                (node,) = [n for n in cluster.worker_nodes if n.node_id == removed]
                cluster.remove_node(node)
        result = trainer.close()
    untyped: Any = ray
    return {"records": records, "before": before, "removed": removed, "after": after,
            "aggregators": live_aggregators,
            "status": result.status, "alive": sorted(n["NodeID"] for n in untyped.nodes() if n["Alive"])}


def main() -> None:
    cluster: Any = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "labels": {"zone": "head"},
        "_system_config": FAST_HEALTH_CHECKS})
    for _ in range(2):
        cluster.add_node(num_cpus=2, labels={"zone": "w"})
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        common = {"num_workers": 2, "num_envs_per_worker": 2, "fragment_length": 32,
                  "placement.workers": "zone=w"}
        ppo = train(cluster, "ppo", {**common, "train_batch_size": 128, "learner.minibatch_size": 64},
                    steps=128 * 10)
        cluster.add_node(num_cpus=2, labels={"zone": "w"})  # two worker nodes again
        impala = train(cluster, "impala", {**common, "train_batch_size": 128,
                                           "placement.learner": "zone=head"}, steps=64 * 24)
        cluster.add_node(num_cpus=2, labels={"zone": "w"})
        # an aggregator per worker, beside it: the lost node takes aggregator 0 with worker 0
        aggregated = train(cluster, "impala", {**common, "train_batch_size": 128, "num_aggregators": 2,
                                               "placement.learner": "zone=head"}, steps=64 * 24)
        print(json.dumps({"ppo": ppo, "impala": impala, "impala_aggregated": aggregated}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
