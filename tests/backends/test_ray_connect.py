"""Connecting to Ray (issue 14, items 2 and 7): the workers of a Ray that rxrl starts import
what the driver imports; an address where no Ray runs fails promptly in one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rxrl.backends.ray.connect import (
    RayConnectError,
    import_path,
    probe,
    wait_registered,
    with_import_path,
    within,
)
from rxrl.errors import ActorError
from rxrl.training.machine import explain_actor_error
from tests.cli.helpers import environment, rxrl_cli

#: a pytest file whose actor class lives in a directory only pytest put on sys.path
ACTORS_TEST = '''\
import rxrl
from rxrl import ops


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def test_actors_of_this_file_run_on_ray() -> None:
    group = rxrl.actors(Counter, 2)
    plan = rxrl.from_actors(group, Counter.next) | ops.barrier() | ops.take(2)
    options = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
    assert list(rxrl.run(plan, "ray", init_options=options)) == [[1, 1], [2, 2]]
'''


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(300)
def test_actor_classes_of_a_test_file_elsewhere_run_on_a_ray_that_rxrl_starts(tmp_path: Path) -> None:
    suite, elsewhere = tmp_path / "suite", tmp_path / "elsewhere"
    suite.mkdir()
    elsewhere.mkdir()
    (suite / "test_actors.py").write_text(ACTORS_TEST)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(suite / "test_actors.py")], cwd=elsewhere, env=environment(),
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_the_import_path_is_what_the_driver_added_to_the_interpreter_s_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    paths = import_path()
    assert str(tmp_path.resolve()) in paths
    assert not any(p.startswith((sys.base_prefix, sys.prefix)) for p in paths)
    config = with_import_path(None, paths)
    assert config._py_driver_sys_path == paths
    assert with_import_path(config, [str(tmp_path)])._py_driver_sys_path == paths  # no repeats


def test_an_address_where_nothing_listens_is_refused_at_once() -> None:
    port = closed_port()
    with pytest.raises(RayConnectError, match=rf"^no Ray cluster at address '127.0.0.1:{port}' "
                                              r"\(Connection refused within 10 s\): start one"):
        probe(f"127.0.0.1:{port}", 10.0)
    with pytest.raises(RayConnectError, match=r"^no Ray cluster at address 'ray://127.0.0.1:"):
        probe(f"ray://127.0.0.1:{port}", 10.0)
    probe("auto", 0.01)  # forms Ray resolves itself are left to Ray


@pytest.mark.timeout(120)
def test_train_with_an_address_where_no_ray_runs_fails_in_one_line(tmp_path: Path) -> None:
    port = closed_port()
    done = rxrl_cli("train", "ppo", "--address", f"127.0.0.1:{port}", "--out", tmp_path / "run",
                    timeout=100)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"rxrl train: error: --address 127.0.0.1:{port}: no Ray cluster at address "
        f"'127.0.0.1:{port}' (Connection refused within 10 s): start one there with `ray start "
        "--head`, or give the address `ray status` prints")
    assert not (tmp_path / "run").exists()  # nothing made: the same --out works next time


def test_a_module_the_ray_workers_cannot_import_is_one_line_naming_it_and_how_to_ship_it() -> None:
    raised = ActorError("creating actor Worker[0] (group built at my_plan.py:12) failed: "
                        "ray::Host.__init__() (pid=1, ip=10.0.0.2)\n  File ...\n"
                        "RaySystemError: System error: No module named 'my_actors'\ntraceback: ...")
    on_cluster = explain_actor_error(raised, "ray://head:10001")
    assert str(on_cluster) == (
        "the Ray workers cannot import module 'my_actors' (actor Worker[0]): ship it to the "
        "cluster (Ray's runtime_env: {'working_dir': DIR} or {'py_modules': [DIR]}), or install "
        "it on every node")
    assert "install it (pip install -e)" in str(explain_actor_error(raised, None))
    other = ActorError("actor Worker[0] died: out of memory")
    assert explain_actor_error(other, None) is other


def test_the_wait_for_a_raylet_s_registration_polls_until_it_is_listed_or_gives_up() -> None:
    """`_prompt_node_registration`'s poll (Ray's own check sleeps 1 s between asks)."""
    tables: list[list[dict[str, object]]] = [[], [{"NodeID": "b", "Alive": True}],
                                             [{"NodeID": "a", "Alive": False}],
                                             [{"NodeID": "a", "Alive": True}]]
    asked: list[int] = []

    def table() -> list[dict[str, object]]:
        asked.append(1)
        return tables[min(len(asked), len(tables)) - 1]

    assert wait_registered(table, "a", poll_s=0.001, wait_s=10.0)
    assert len(asked) == 4
    assert not wait_registered(lambda: [], "a", poll_s=0.001, wait_s=0.01)


PROMPT_PROBE = """
import importlib, ray
connecting = importlib.import_module("rxrl.backends.ray.connect")
seen = []
real = connecting.wait_registered
connecting.wait_registered = lambda *args: seen.append(real(*args)) or seen[-1]
connecting.connect("local", {"include_dashboard": False, "log_to_driver": False, "num_cpus": 1})
ray.shutdown()
print(seen)
"""


@pytest.mark.timeout(180)
def test_a_local_ray_s_start_goes_through_the_prompt_registration_wait() -> None:
    """The patch sits on a private Ray function (`services.get_node`): if Ray stops calling it,
    ``ray.init`` goes back to its 1-s retry silently — this says so."""
    done = subprocess.run([sys.executable, "-c", PROMPT_PROBE], env=environment(),
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[True]"


def test_within_says_whether_a_call_ended_in_time_and_raises_its_error() -> None:
    """`within`: a call that does not return is left in its thread, not waited for."""
    release = threading.Event()
    began = time.monotonic()
    assert not within(0.2, release.wait)
    assert time.monotonic() - began < 5
    release.set()
    assert within(5.0, lambda: None)
    empty: dict[str, int] = {}
    with pytest.raises(KeyError):
        within(5.0, lambda: empty["missing"])


LOST_PROBE = """
import os, signal, time
import ray
import rxrl
from rxrl import ops
from rxrl.backends.ray.connect import connect, local_ray_lost


class Slow:
    def work(self, x: int) -> int:
        time.sleep(0.2)
        return x


connect("local", {"include_dashboard": False, "log_to_driver": False, "num_cpus": 2})
node = ray._private.worker._global_node
assert local_ray_lost() is None
assert all(os.getpgid(p.process.pid) != os.getpgrp() for ps in node.all_processes.values() for p in ps)
raylet = node.all_processes["raylet"][0].process
run = rxrl.run(rxrl.from_iterable(range(1000)) | ops.call(rxrl.actors(Slow, 1), Slow.work), "ray")
assert next(run) == 0
os.kill(raylet.pid, signal.SIGTERM)
began = time.monotonic()
try:
    list(run)
except rxrl.BackendStoppedError as e:
    print("raised", round(time.monotonic() - began, 1), str(e))
run.close()
raylet.wait(60)
print("lost", local_ray_lost())
"""


@pytest.mark.timeout(180)
def test_a_local_ray_stopped_under_a_run_is_one_backend_stopped_error_at_once() -> None:
    """The raylet of the local Ray a run started is stopped (SIGTERM) mid-run: the run raises
    `BackendStoppedError` naming it at once — no restart tried, no minute of waiting on a
    GCS that will not answer — and `local_ray_lost` says how it ended once it has. Ray's GCS
    and raylet run in process groups of their own (a signal to the driver's group does not
    reach them)."""
    done = subprocess.run([sys.executable, "-c", LOST_PROBE], env=environment(),
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    raised = next(line for line in done.stdout.splitlines() if line.startswith("raised"))
    seconds = float(raised.split()[1])
    assert seconds < 20 and "the local Ray this run started has stopped" in raised, raised
    assert done.stdout.strip().splitlines()[-1] == "lost its raylet exited (status 0)"
