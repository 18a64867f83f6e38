"""The ``rxrl`` command line: ``train``, ``show``, ``eval``, ``export``, ``sweep``, ``plot``,
``replay`` and ``demo``.

Bad input gets a one-line error on stderr and exit status 1 (2 for malformed command lines,
as argparse does); set ``RXRL_DEBUG=1`` to see the traceback of an error instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rxrl.algos import MODULES
from rxrl.cli import sweep as cli_sweep
from rxrl.cli import tools as cli_tools
from rxrl.cli import train as cli_train
from rxrl.training.interrupts import INTERRUPTS, Terminated, exit_code
from rxrl.training.spelling import command_line

Command = Callable[[argparse.Namespace], int]


def _demo(args: argparse.Namespace) -> int:
    import rxrl
    from rxrl import ops

    plan = (rxrl.from_iterables([range(0, 6), range(100, 106)])
            | ops.map(lambda x: x * x) | ops.window(2) | ops.barrier() | ops.take(3))
    print("plan:")
    print(rxrl.show(plan, sites=False), end="\n\n")
    with rxrl.run(plan, args.backend) as run:
        for i, item in enumerate(run):
            print(f"round {i}: {item}")
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The argument parser and the function behind each sub-command."""
    parser = argparse.ArgumentParser(prog="rxrl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cli_train.add_arguments(sub.add_parser(
        "train", help=f"train an algorithm ({', '.join(MODULES)}) on an env",
        formatter_class=cli_train.AlgorithmsHelp,
        description="Train ALGO on ENV; progress on stderr; metrics.csv, TensorBoard files, "
                    "checkpoints and summary.json in the run directory (the library's "
                    "rxrl.train does the same from Python)."))
    cli_tools.add_show_arguments(sub.add_parser("show", help="print an algorithm's plan as a graph"))
    cli_tools.add_eval_arguments(sub.add_parser("eval", help="run a checkpoint's policy greedily"))
    cli_tools.add_export_arguments(sub.add_parser(
        "export", help="write a checkpoint's greedy policy as TorchScript, torch.export or ONNX"))
    cli_tools.add_plot_arguments(sub.add_parser("plot", help="plot learning curves of runs"))
    cli_tools.add_replay_arguments(sub.add_parser(
        "replay", help="rerun a recorded run (train --trace) on the reference backend"))
    cli_sweep.add_arguments(sub.add_parser(
        "sweep", help="a hyper-parameter sweep of an algorithm on Ray Tune",
        description="Train ALGO on ENV once per trial, settings drawn from a search space, on Ray "
                    "Tune (random, grid or Optuna search; ASHA or PBT); results.csv and best.json "
                    "in --out (pip install -e \".[tune]\")."))
    demo = sub.add_parser("demo", help="print and run a tiny sharded plan")
    demo.add_argument("--backend", default="reference", help="reference | rx | ray")
    return parser, {"train": cli_train.train, "show": cli_tools.show, "eval": cli_tools.evaluate,
                    "export": cli_tools.export, "sweep": cli_sweep.sweep,
                    "plot": cli_tools.plot, "replay": cli_tools.replay, "demo": _demo}


#: options whose value may be a negative number written like an option (``-1e9``)
NUMERIC_OPTIONS = ("--target-return",)


def join_negative_numbers(argv: Sequence[str]) -> list[str]:
    """``--target-return -1e9`` as ``--target-return=-1e9``: argparse reads only plain
    negative numbers (``-5``, ``-1.5``) as values, and takes ``-1e9`` for an option."""
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in NUMERIC_OPTIONS and i + 1 < len(args) and args[i + 1].startswith("-"):
            try:
                float(args[i + 1])
            except ValueError:
                pass
            else:
                out.append(f"{arg}={args[i + 1]}")
                i += 2
                continue
        out.append(arg)
        i += 1
    return out


_PACKAGE = str(Path(__file__).parents[1])


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None,
                  _default: Any = warnings.showwarning) -> None:
    """rxrl's own warnings (a restarted actor, a placement no node has) as one line on stderr,
    ``rxrl: warning: ...``; the others as Python shows them."""
    if filename.startswith(_PACKAGE):
        print(f"rxrl: warning: {message}", file=file or sys.stderr, flush=True)
        return
    _default(message, category, filename, lineno, file, line)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rxrl`` console script.

    SIGINT and SIGTERM end a command cleanly with status 130 or 143 (see `rxrl.training.interrupts`:
    a training run first finishes its iteration and checkpoints). The working directory is
    searched last for modules (``--env my_envs:Env-v0``), as ``python -m`` would search it
    first.
    """
    # Before Ray is imported (it reads this then): Ray's C++ failure signal handler would
    # answer a SIGTERM during start-up with a C++ stack trace and an abort (status 134).
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    parser, commands = build_parser()
    args = parser.parse_args(join_negative_numbers(sys.argv[1:] if argv is None else argv))
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    INTERRUPTS.install()
    INTERRUPTS.requested = None
    ray_before = ray_initialized()
    code = 1
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = run_command(args, commands)
        return code
    finally:
        if not ray_before:
            with INTERRUPTS.ignored():  # a signal now would leave Ray's agents orphaned
                try:
                    shutdown_ray()
                except RayUnresponsive:
                    if argv is None:  # the process's own command: Ray's exit hook would wait
                        for stream in (sys.stdout, sys.stderr):  # for it again; exit now
                            stream.flush()
                        os._exit(code)
        if argv is None:  # the process's own command: it exits next, with ``code``
            INTERRUPTS.exiting(code)
        else:
            INTERRUPTS.uninstall()


def run_command(args: argparse.Namespace, commands: dict[str, Command]) -> int:
    """Run the parsed command; its exit status (a signal's ``128 + signum``, 1 on an error,
    which is printed as one line, never a traceback, unless ``RXRL_DEBUG`` is set)."""
    try:
        with command_line():  # errors name flags (--steps), not parameters (steps=)
            return commands[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return exit_code(signal.SIGINT)
    except Terminated as e:
        print("terminated", file=sys.stderr)
        return exit_code(e.signum)
    except Exception as e:  # a one-line error, never a traceback
        if os.environ.get("RXRL_DEBUG"):
            raise
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"rxrl {args.command}: error: {message}", file=sys.stderr)
        return 1


def ray_initialized() -> bool:
    """Whether Ray is initialised in this process (without importing it)."""
    if "ray" not in sys.modules:
        return False
    import ray

    return bool(ray.is_initialized())


class RayUnresponsive(Exception):
    """`shutdown_ray` gave up waiting for Ray."""


def shutdown_ray() -> None:
    """Shut down the Ray this command started, before the process exits: Ray's own exit hook
    runs after rxrl's signal handlers are gone, so a second SIGTERM arriving then killed the
    process half-way and left the raylet's agents orphaned for a minute."""
    if ray_initialized():
        import ray

        from rxrl.backends.ray.connect import CLOSE_TIMEOUT_S, within

        if not within(CLOSE_TIMEOUT_S, ray.shutdown):  # its processes were stopped under it
            print(f"rxrl: Ray did not shut down within {CLOSE_TIMEOUT_S:.0f} s; exiting without it",
                  file=sys.stderr)
            raise RayUnresponsive


if __name__ == "__main__":
    sys.exit(main())
