"""Per-operator timings (`rxrl.timings`): they add up, the timeline is Chrome trace JSON whose
spans nest, actor requests are counted on the concurrent backends, nothing is reported when
timings are off; ``rxrl train --profile`` and ``rxrl show RUN --stats``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import rxrl
from rxrl import ops
from rxrl.backends.common import Reporter
from rxrl.cli import main
from rxrl.timings import Timings
from rxrl.training import Trainer

QUICK_PPO: dict[str, Any] = {"num_workers": 1, "num_envs_per_worker": 2, "fragment_length": 64,
                             "train_batch_size": 256, "num_epochs": 1, "minibatch_size": 128}


class Worker:
    """Samples a count, taking a little time."""

    def __init__(self) -> None:
        self.n = 0

    def sample(self) -> int:
        """The next count."""
        time.sleep(0.002)
        self.n += 1
        return self.n


class Learner:
    """Sums a round."""

    def train(self, batch: list[int]) -> int:
        """The round's sum."""
        return sum(batch)


def plan(rounds: int) -> rxrl.Plan[int]:
    """Two workers, a map on their shards, rounds, a pipelined learner call."""
    workers = rxrl.actors(Worker, 2)
    learner = rxrl.actors(Learner, 1)
    return (rxrl.from_actors(workers, Worker.sample) | ops.map(lambda x: x + 1) | ops.barrier()
            | ops.call(learner, Learner.train, max_in_flight=2) | ops.take(rounds))


def test_on_the_reference_backend_every_pull_second_lands_in_one_operator() -> None:
    """Law: the operators' busy and waiting times add up to the driver's time pulling the plan
    (each pull's time is its operator's, less its inputs' pulls), which is within the wall
    time; items out and pulls are counted per operator."""
    timings = Timings()
    out = list(rxrl.run(plan(12), on_event=timings))
    timings.stop()
    stats = timings.stats()
    operators = stats["operators"]
    total = sum(s["busy_s"] + s["waiting_s"] for s in operators.values())
    assert total == pytest.approx(stats["threads"]["driver"], abs=1e-5)
    assert 0 < stats["pulling_s"] <= stats["wall_s"]
    assert len(out) == 12 and operators["0"]["items"] == 12
    assert operators["2"]["label"] == "barrier()" and operators["2"]["items"] >= 12
    # the workers' sleeps are inside from_actors' pulls (#4), not in the barrier's own time
    assert operators["4"]["busy_s"] >= 24 * 0.002 * 0.9
    assert operators["2"]["busy_s"] < operators["4"]["busy_s"]


def test_the_timeline_is_chrome_trace_json_whose_spans_nest() -> None:
    """The trace parses as JSON with complete events; on the driver's row every two spans are
    disjoint or one holds the other, and every span lies inside a pull of the root (#0)."""
    timings = Timings()
    list(rxrl.run(plan(5), on_event=timings))
    doc = json.loads(json.dumps(timings.chrome_trace()))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in spans)
    rows = {e["args"]["name"]: e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["tid"]}
    driver = sorted(((e["ts"], e["ts"] + e["dur"], e["name"]) for e in spans if e["tid"] == rows["driver"]),
                    key=lambda s: (s[0], -s[1]))
    eps = 1e-3  # microseconds, rounded
    for i, (_, a1, _) in enumerate(driver):
        for b0, b1, _ in driver[i + 1:]:
            if b0 >= a1 - eps:
                break
            assert b1 <= a1 + eps, "spans overlap without nesting"
    roots = [(a, b) for a, b, name in driver if name.startswith("#0 ")]
    assert all(any(r0 - eps <= a and b <= r1 + eps for r0, r1 in roots) for a, b, _ in driver)


@pytest.mark.parametrize("backend", ["rx", "ray"])
def test_concurrent_backends_count_each_actor_request_and_the_waits(
        backend: str, request: pytest.FixtureRequest) -> None:
    """On rx and Ray: the barrier sends a request per shard item and sees each done, the call
    one per round; the actors' requests add up to them; the driver's waits for the workers
    are the barrier's waiting time, not its busy time."""
    if backend == "ray":
        request.getfixturevalue("ray_session")
    timings = Timings()
    with rxrl.run(plan(10), backend, on_event=timings) as run:
        assert len(list(run)) == 10
    timings.stop()
    stats = timings.stats()
    barrier, call = stats["operators"]["2"], stats["operators"]["1"]
    assert barrier["sent"] >= 20 and barrier["done"] >= 20 and barrier["max_in_flight"] == 2
    assert call["sent"] >= 10 and 1 <= call["max_in_flight"] <= 2
    actors = stats["actors"]
    assert actors["Worker[0]"]["requests"] + actors["Worker[1]"]["requests"] == barrier["done"]
    assert actors["Learner[0]"]["requests"] == call["done"]
    assert barrier["waiting_s"] > barrier["busy_s"]
    assert all(0 <= a["utilization"] <= 1 for a in actors.values())


def test_events_of_another_process_are_placed_by_their_time_on_a_row_of_their_own() -> None:
    """Events with an ``origin`` (an aggregator's, sent with its items) are timed by their ``at``
    stamps, not by when the driver reports them, and nest on their own row: an aggregator's
    pull that began before a driver pull ended does not close it, and its requests in flight
    are its own (``max_in_flight`` per process, ``mean_in_flight`` summed)."""
    now = [100.0]
    timings = Timings(clock=lambda: now[0])
    wall0 = 100.0 - timings._offset  # the time.time() matching the clock's 100.0
    E = rxrl.Event

    def remote(kind: Any, node: int, at: float, item: Any = None) -> None:
        timings(E(kind, node, f"op{node}", None, item, "Worker[0]", "aggregator[0]", wall0 + at))

    timings(E("pull", 0, "op0"))  # the driver pulls #0 at 100
    remote("pull", 5, 1.0)        # the aggregator pulled #5 at 101 ...
    remote("sent", 5, 1.5, item=7)
    remote("sent", 5, 1.5, item=8)
    remote("done", 5, 2.5, item=7)
    remote("done", 5, 3.0, item=8)
    remote("emit", 5, 4.0)        # ... and it emitted at 104
    now[0] = 110.0
    timings(E("emit", 0, "op0"))  # the driver's pull took 10 s
    stats = timings.stats()
    assert stats["threads"] == {"driver": pytest.approx(10.0), "aggregator[0]": pytest.approx(3.0)}
    five = stats["operators"]["5"]
    assert (five["busy_s"], five["waiting_s"], five["items"]) == (pytest.approx(3.0), 0.0, 1)
    assert five["sent"] == five["done"] == 2 and five["max_in_flight"] == 2
    assert five["mean_in_flight"] == pytest.approx((1.0 + 1.5) / 10.0)
    assert stats["actors"]["Worker[0]"]["requests"] == 2
    rows = {e["args"]["name"] for e in timings.chrome_trace()["traceEvents"] if e["ph"] == "M"}
    assert {"driver", "aggregator[0]", "Worker[0]"} <= rows


def test_an_event_sent_from_another_process_keeps_small_items_and_names_its_origin() -> None:
    """`rxrl.events.portable`: numbers and strings travel as they are, anything else as its
    repr (at most 200 characters); the text of the event names where it happened."""
    from rxrl.events import portable

    sent = portable(rxrl.Event("emit", 3, "window(2)", None, list(range(1000))), "aggregator[1]")
    assert sent.origin == "aggregator[1]" and sent.at is not None
    assert isinstance(sent.item, str) and len(sent.item) == 200 and sent.item.startswith("[0, 1, 2")
    assert portable(rxrl.Event("choice", 4, "gather", None, 2, "[0, 2]"), "x").item == 2
    assert str(sent).startswith("aggregator[1]: #3 window(2) emit '[0, 1")
    assert str(portable(rxrl.Event("wait", -1, "", detail="Worker[0]"), "aggregator[1]")) == (
        "aggregator[1] wait: Worker[0]")


def test_without_timings_no_event_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off (no ``on_event``), a concurrent run reports nothing: no event, request or wait."""
    calls: list[str] = []
    monkeypatch.setattr(Reporter, "event", lambda self, e: calls.append("event"))
    monkeypatch.setattr(Reporter, "request", lambda self, *a: calls.append("request"))
    assert len(list(rxrl.run(plan(5), "rx"))) == 5
    assert calls == []


def test_train_profile_writes_stats_and_a_trace_and_show_prints_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``profile=True`` writes stats.json and profile.json; ``rxrl show RUN --stats`` prints the
    plan with each operator's numbers; a resumed session writes files of its own."""
    run_dir = tmp_path / "ppo"
    Trainer("ppo", run_dir, backend="reference", steps=768, settings=QUICK_PPO, loggers=["csv"],
            handle_signals=False, profile=True, checkpoint_every=256).run()
    stats = json.loads((run_dir / "stats.json").read_text())
    assert json.loads((run_dir / "profile.json").read_text())["traceEvents"]
    assert stats["operators"]["0"]["items"] == 3 and "#0 call(PPOLearner" in stats["plan"]
    assert main(["show", str(run_dir), "--stats"]) == 0
    shown = capsys.readouterr().out
    assert "3 out, busy" in shown and "from_actors(RolloutWorker" in shown
    Trainer("ppo", None, backend="reference", steps=1536, settings=QUICK_PPO, loggers=["csv"],
            handle_signals=False, profile=True, resume=run_dir).run()
    assert (run_dir / "stats-from-3.json").is_file() and (run_dir / "profile-from-3.json").is_file()
    assert main(["show", str(run_dir), "--stats"]) == 0
    assert "stats-from-3.json" in capsys.readouterr().out


def test_show_stats_of_a_run_without_a_profile_is_one_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory without stats.json: one line saying how to get one."""
    assert main(["show", str(tmp_path), "--stats"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train it with --profile" in err
