"""Run by test_ray_faults: a 2-node Ray cluster loses the node its plan actors live on.

First with a restart policy (the actors come back on a replacement node and the plan carries on),
then without (the run stops with an ActorError). Prints one JSON line with what it saw.
"""

from __future__ import annotations

import json
from typing import Any

import ray
from ray.cluster_utils import Cluster

import rxrl
from rxrl import ops

#: detect a lost node within about a second instead of Ray's default of tens of seconds
FAST_HEALTH_CHECKS = {"health_check_period_ms": 200, "health_check_failure_threshold": 3,
                      "health_check_timeout_ms": 200}


class Worker:
    def __init__(self, index: int) -> None:
        self.index = index
        self.node = ray.get_runtime_context().get_node_id()

    def sample(self) -> tuple[int, str]:
        return self.index, self.node


def node_id_with(resource: str) -> Any:
    untyped: Any = ray
    (node_id,) = [n["NodeID"] for n in untyped.nodes() if n["Alive"] and n["Resources"].get(resource)]
    return node_id


def main() -> None:
    cluster: Any = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS})
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        # restart policy: the workers need a "slot", which only the doomed node has until
        # the node is lost and a replacement joins (as an autoscaler would do)
        node = cluster.add_node(num_cpus=1, resources={"slot": 2, "doomed": 1})
        group = rxrl.indexed_actors(Worker, 2).with_restarts(2).with_options(
            num_cpus=0, resources={"slot": 1})
        plan = rxrl.from_actors(group, Worker.sample) | ops.gather()
        node_id = replacement = ""
        before: list[str] = []
        after: list[str] = []
        with rxrl.run(plan, "ray", timeout_s=60) as run:
            for _, where in run:
                (after if len(before) >= 6 else before).append(where)
                if len(before) == 6 and not after:
                    node_id = node_id_with("doomed")
                    cluster.remove_node(node)
                    cluster.add_node(num_cpus=1, resources={"slot": 2, "replacement": 1})
                if sum(w != node_id for w in after) >= 4:
                    break
        replacement = node_id_with("replacement")

        # no restarts: the actors must live on the second doomed node (a resource only it has)
        node = cluster.add_node(num_cpus=1, resources={"doomed_too": 1})
        doomed_too = node_id_with("doomed_too")
        stopped = ""
        group = rxrl.indexed_actors(Worker, 2).with_options(num_cpus=0, resources={"doomed_too": 0.1})
        plan = rxrl.from_actors(group, Worker.sample) | ops.gather()
        try:
            with rxrl.run(plan, "ray", timeout_s=60) as run:
                for i, _ in enumerate(run):
                    if i == 3:
                        cluster.remove_node(node)
        except rxrl.ActorError as e:
            stopped = str(e)
        print(json.dumps({"doomed": node_id, "replacement": replacement, "before": before,
                          "stopped": stopped, "doomed_too": doomed_too,
                          "restarted_on": sorted({w for w in after if w != node_id})}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
