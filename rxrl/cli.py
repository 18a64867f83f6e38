"""The ``rxrl`` command line: ``rxrl demo`` (more verbs arrive with the RL layer)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

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
    parser = argparse.ArgumentParser(prog="rxrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="print and run a tiny sharded plan")
    demo.add_argument("--backend", default="reference", help="reference | rx | ray")
    return parser, {"demo": _demo}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rxrl`` console script."""
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a one-line error, never a traceback
        print(f"rxrl {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
