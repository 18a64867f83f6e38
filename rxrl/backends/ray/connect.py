"""Connecting the Ray backend to Ray: a local Ray that imports what the driver imports, or a
cluster that answers within a deadline.

- **Import path.** Ray workers import the driver's classes and functions by module name, and
  by default see only the driver's script directory and working directory. `connect` hands
  them the rest of the driver's ``sys.path`` (what pytest, a notebook or ``sys.path.append``
  added), through ``JobConfig._py_driver_sys_path`` — the list Ray itself fills with those two
  directories (a ``runtime_env`` would do the same but costs ~0.7 s of worker start-up, as
  its workers cannot be the pre-started ones). On a cluster the same paths help only the
  nodes that have them: ship code with ``runtime_env={"working_dir": ...}`` or
  ``{"py_modules": [...]}`` in ``init_options``.
- **Deadline.** Ray's own connect blocks in C++ for minutes when nothing listens at the
  address; `connect` first checks that the address accepts a TCP connection within
  ``CONNECT_TIMEOUT_S`` and raises `RayConnectError` otherwise.
- **Signals.** ``ray.init`` installs its own SIGTERM handlers (one exits with status 15);
  `connect` keeps them out, so the process's handlers stay as they were. A SIGINT/SIGTERM
  that arrives while a local Ray is starting is held until it has started, then delivered:
  a Ray interrupted half-way leaves its agent processes behind. (Ray's C++ core also
  installs a failure signal handler while it starts, which prints a stack trace on SIGTERM
  and may abort the driver; it can only be turned off before ``import ray``, by
  ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1``, which the ``rxrl`` command sets.)
- **A lean local Ray.** A local Ray started with ``include_dashboard=False`` and
  ``log_to_driver=False`` (as ``rxrl train`` starts it) starts without the three Python
  processes that serve only what those options turn off: the API server (with the dashboard
  off it runs usage statistics alone, and ``ray.init`` waits ~1 s for it before it even
  starts the raylet), the log monitor (it forwards worker output to drivers) and the
  autoscaler monitor (a single local node has nothing to scale): ~0.4 s of CPU each on 2 cores,
  and the wait (docs/benchmarks.md, "Start-up"). Ray 2.60 starts them from these three
  ``Node`` methods, which `connect` replaces for the duration of ``ray.init`` only. The driver
  of a lean local Ray also registers Ray's serializer add-ons only for the packages it has
  imported (`rxrl.backends.ray.addons`: pyarrow and pydantic cost 15-30 MB in every process).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import socket
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import ray
from ray._private import ray_constants
from ray.job_config import JobConfig

from rxrl import warmup
from rxrl.backends.ray import addons
from rxrl.errors import RxrlError

#: how long `connect` waits for the address of an existing cluster to accept a connection
CONNECT_TIMEOUT_S = 10.0
#: how long closing a run, and the ``rxrl`` command's shutdown of its local Ray, wait for Ray
CLOSE_TIMEOUT_S = 15.0
#: addresses that start a new local Ray (``None`` does so when no cluster is found)
LOCAL = (None, "local")
#: the ``ray._private.node.Node`` methods that start the processes a lean local Ray goes without
LEAN_SKIPS = ("start_api_server", "start_log_monitor", "start_monitor")
#: what the driver imports while ``ray.init`` waits for Ray's processes, instead of after
#: it: Ray's serializer add-ons import pydantic (~0.2 s) when the driver first serializes
#: (not for a lean local Ray, whose add-ons import nothing: `rxrl.backends.ray.addons`)
DRIVER_WARM = ("ray._common.pydantic_compat",)
#: how often, and how long, a local node's start polls the GCS for its raylet's registration
#: before Ray's own, once-a-second, check (`_prompt_node_registration`; a raylet that has not
#: registered by then is left to Ray's check, which gives up after 30 s and says why)
NODE_POLL_S, NODE_WAIT_S = 0.02, 10.0

log = logging.getLogger(__name__)


class RayConnectError(RxrlError, ConnectionError):
    """No Ray cluster answered at the address given."""


def connect(address: str | None, init_options: dict[str, Any] | None = None,
            timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Initialise Ray unless it already is (then ``address``/``init_options`` are ignored).

    See the module docstring: the driver's import path reaches the workers, an address where
    no Ray answers fails within ``timeout_s`` seconds, and signal handlers are kept.
    """
    if ray.is_initialized():
        if address is not None or init_options:
            log.warning("Ray is already initialised: ignoring address=%r and init_options=%r",
                        address, init_options)
        return
    options = dict(init_options or {})
    if address not in LOCAL and address != "auto":
        probe(address, timeout_s)
    options["job_config"] = with_import_path(options.get("job_config"), import_path())
    handlers = _python_handlers()
    held: contextlib.AbstractContextManager[list[int]] = (
        _held_signals() if address in LOCAL else contextlib.nullcontext([]))
    local = address in LOCAL
    lean = _lean(options) if local else contextlib.nullcontext()
    prompt = _prompt_node_registration() if local else contextlib.nullcontext()
    group = _own_process_group() if local else contextlib.nullcontext()
    warm: tuple[str, ...] = DRIVER_WARM
    if local and is_lean(options):  # the driver too registers add-ons for imported packages only
        addons.install()
        warm = ()
    with held as arrived, _without_ray_sigterm_handlers(), lean, prompt, group, _importing(warm):
        try:
            ray.init(address=address, **options)
        finally:
            _restore(handlers)
    for signum in arrived:  # now that Ray is up (and knows how to shut down), deliver it
        signal.raise_signal(signum)


@contextlib.contextmanager
def _importing(modules: tuple[str, ...]) -> Iterator[None]:
    """Import ``modules`` and do the `rxrl.warmup` work in a thread while the block runs
    (``ray.init`` mostly waits for Ray's processes, without the GIL), and wait for the thread
    at the end: the work is done, or failed harmlessly (it is then done, or its error
    raised, where it is used)."""
    def work() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        warmup.run_deferred()

    thread = threading.Thread(target=work, name="rxrl-import", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def local_ray_lost(node_id: str | None = None, node_alive: bool | None = None) -> str | None:
    """Why the local Ray this process started has stopped under it — ``"its raylet exited
    (SIGTERM)"`` — or None: running, or not started by this process (a cluster's processes are
    not the driver's to watch). Read from the driver's own child processes, without asking the
    GCS: the calls that would ask it block for a minute once it is gone. ``node_id`` and
    ``node_alive``, what the GCS said of a node, also count: the local node no longer alive
    means its raylet is stopping, though its process has not exited yet."""
    node: Any = getattr(ray._private.worker, "_global_node", None)
    if node is None or not getattr(node, "all_processes", None):
        return None
    try:
        dead = node.dead_processes()
    except Exception:  # Ray's private API changed: not known
        return None
    for kind, process in dead:
        if kind in (ray_constants.PROCESS_TYPE_RAYLET, ray_constants.PROCESS_TYPE_GCS_SERVER):
            code = process.returncode
            how = f"status {code}"
            if code < 0:
                with contextlib.suppress(ValueError):
                    how = signal.Signals(-code).name
            return f"its {kind} exited ({how})"
    if node_alive is False and node_id is not None and node_id == getattr(node, "node_id", None):
        return "its node is no longer alive: the raylet is stopping"
    return None


def within(seconds: float, fn: Callable[[], object]) -> bool:
    """Run ``fn`` in a daemon thread; whether it ended within ``seconds`` (its exception, if it
    raised one, is raised here). Ray's calls have no deadline of their own and a Ray whose
    processes are stopping answers none: a call that does not return is left in its thread
    rather than hold the driver."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=run, name="rxrl-within", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return False
    if raised:
        raise raised[0]
    return True


def probe(address: str, timeout_s: float) -> None:
    """Raise `RayConnectError` unless ``address`` (``host:port`` or ``ray://host:port``)
    accepts a TCP connection within ``timeout_s``; other forms are left to Ray."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise RayConnectError(
            f"no Ray cluster at address {address!r} ({why} within {timeout_s:g} s): start one "
            "there with `ray start --head`, or give the address `ray status` prints") from None


def import_path() -> list[str]:
    """The driver's ``sys.path`` directories that a Ray worker would not have by itself
    (the interpreter's own library and site-packages directories are left out)."""
    own = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
           if (p := sysconfig.get_paths().get(key))}
    prefixes = tuple(str(Path(p).resolve()) + os.sep
                     for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    out: list[str] = []
    for entry in sys.path:
        path = Path(entry or os.getcwd()).resolve()
        text = str(path)
        if (path in own or text.startswith(prefixes) or not path.is_dir() or text in out):
            continue
        out.append(text)
    return out


def with_import_path(job_config: JobConfig | None, paths: list[str]) -> JobConfig:
    """``job_config`` (or a new one) whose workers also search ``paths``."""
    config = job_config if job_config is not None else JobConfig()
    known: list[str] = config._py_driver_sys_path
    config._py_driver_sys_path = [*known, *(p for p in paths if p not in known)]
    return config


def _python_handlers() -> dict[int, Any]:
    """The current SIGINT/SIGTERM handlers that are Python callables (not SIG_DFL/SIG_IGN)."""
    return {sig: h for sig in (signal.SIGINT, signal.SIGTERM)
            if callable(h := signal.getsignal(sig))}


def _restore(handlers: dict[int, Any]) -> None:
    with contextlib.suppress(ValueError):  # not the main thread: nothing was replaced
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _without_ray_sigterm_handlers() -> Iterator[None]:
    """Within the block, Ray installs no SIGTERM handler: ``ray.init`` sets two (one exits
    with status 15, the local node's kills its processes and exits with 1), and a SIGTERM
    while it starts would run them half-way. Ray 2.60 sets both through this one function;
    its atexit hook still shuts the local node down when the process ends."""
    utils: Any = ray._private.utils
    original = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = original


@contextlib.contextmanager
def _prompt_node_registration() -> Iterator[None]:
    """Within the block, a local node's start notices its raylet's registration within
    `NODE_POLL_S`. Ray 2.60 asks the GCS for it with ``services.get_node``, whose retry
    sleeps a whole second: the raylet is seldom registered at the first ask (0.1 s after its
    start), so ``ray.init`` took 1 s more than the raylet needed (2 s under load). Here the
    GCS's node table is polled first, then Ray's own call finds the node at once."""
    services: Any = ray._private.services
    original = services.get_node

    def get_node(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # Ray's own call then waits, and reports, as it would
            gcs_address, node_id = args  # Ray 2.60's call; another shape is left to Ray
            state_module: Any = ray._private.state
            state = state_module.GlobalState()
            state._initialize_global_state(services._get_gcs_client_options(gcs_address))
            try:
                wait_registered(lambda: state.node_table(), node_id, NODE_POLL_S, NODE_WAIT_S)
            finally:
                state.disconnect()
        return original(*args, **kwargs)

    services.get_node = get_node
    try:
        yield
    finally:
        services.get_node = original


def wait_registered(node_table: Callable[[], list[dict[str, Any]]], node_id: str,
                    poll_s: float, wait_s: float) -> bool:
    """Poll ``node_table()`` every ``poll_s`` until it lists ``node_id`` alive (True) or
    ``wait_s`` passed (False)."""
    deadline = time.monotonic() + wait_s
    while True:
        if any(n.get("NodeID") == node_id and n.get("Alive", True) for n in node_table()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def is_lean(init_options: dict[str, Any]) -> bool:
    """Whether a local Ray started with ``init_options`` goes without the processes that serve
    only the dashboard and worker output on the driver (see the module docstring)."""
    return (init_options.get("include_dashboard") is False
            and init_options.get("log_to_driver") is False)


def _lean(init_options: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Within the block, a local Ray that `is_lean` starts without the `LEAN_SKIPS` processes."""
    return _skipping(LEAN_SKIPS) if is_lean(init_options) else contextlib.nullcontext()


@contextlib.contextmanager
def _skipping(methods: tuple[str, ...]) -> Iterator[None]:
    node: Any = ray._private.node.Node
    originals = {name: getattr(node, name) for name in methods if hasattr(node, name)}
    for name in originals:
        setattr(node, name, lambda self, *args, **kwargs: None)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(node, name, original)


@contextlib.contextmanager
def _own_process_group() -> Iterator[None]:
    """Within the block, the processes Ray starts (its GCS and raylet, and so the raylet's
    agents and workers) start in a process group of their own, where the kernel ends them with
    the driver (Linux: Ray's fate sharing); elsewhere nothing changes. A signal to the driver's
    group — Ctrl-C in a terminal, `timeout`, ``kill -- -PGID`` — then reaches the driver alone,
    which stops at a checkpoint and shuts its Ray down, instead of reaching a raylet that exits
    at once and takes the run's actors with it (Ray already does this on Windows)."""
    services: Any = ray._private.services
    original = services.ConsolePopen
    utils: Any = ray._private.utils
    if not sys.platform.startswith("linux") or not utils.detect_fate_sharing_support():
        yield
        return

    class OwnGroupPopen(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen
    try:
        yield
    finally:
        services.ConsolePopen = original


@contextlib.contextmanager
def _held_signals() -> Iterator[list[int]]:
    """Within the block, SIGINT/SIGTERM are recorded (in the yielded list), not handled."""
    arrived: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    try:
        previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: signals are not ours to hold
        yield arrived
        return
    try:
        yield arrived
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is hold:  # ray.init may have installed its own
                signal.signal(sig, handler)


__all__ = ["CLOSE_TIMEOUT_S", "CONNECT_TIMEOUT_S", "LEAN_SKIPS", "RayConnectError", "connect", "import_path",
           "is_lean", "local_ray_lost", "probe", "with_import_path", "within"]
