"""Printing a plan: an indented text graph (``str(plan)``), Graphviz dot, or Mermaid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rxrl import graph as g
from rxrl.compile import Step, compile_plan
from rxrl.plan import Plan, Shards

#: what ``render(..., annotate=)`` appends to an operator's line, from its occurrence number
Annotate = Callable[[int], str]


def _fmt(node: g.Node, nid: int, ids: bool, sites: bool, annotate: Annotate | None = None) -> str:
    text = node.label
    if node.shards is not None:
        text += f"  [×{node.shards} shards]"
    if ids:
        text = f"#{nid} {text}"
    if sites:
        text += f"  @ {node.site}"
    if annotate is not None:
        text += f"  {annotate(nid)}"
    return text


def _lines(step: Step, shown: set[int], show_ids: bool, sites: bool,
           annotate: Annotate | None) -> list[str]:
    chain: list[Step] = []
    while isinstance(step.node, g.Unary) and not isinstance(step.node, g.Split):
        chain.append(step)
        (step,) = step.inputs
    lines = [_fmt(step.node, step.id, show_ids, sites, annotate)]
    inputs, more = step.inputs, ""
    if isinstance(step.node, g.Aggregate) and len(inputs) > 2:  # one sub-plan stands for all
        inputs = inputs[:1]
        parts = "; ".join(g.Subset(input=step.node.source, indices=p, site="").params()
                          for p in step.node.parts[1:])
        more = f"└─ ({len(step.inputs) - 1} more sub-plans like it, over shards {parts})"
    for k, child in enumerate(inputs):
        last = k == len(inputs) - 1 and not more
        if child.id in shown:  # a split's other branches: drawn once, where first reached
            sub = [f"{_fmt(child.node, child.id, show_ids, False)}  (shared: see above)"]
        else:
            shown.add(child.id)
            sub = _lines(child, shown, show_ids, sites, annotate)
        lines.append(("└─ " if last else "├─ ") + sub[0])
        lines.extend(("   " if last else "│  ") + line for line in sub[1:])
    if more:
        lines.append(more)
    lines.extend("| " + _fmt(op.node, op.id, show_ids, sites, annotate) for op in reversed(chain))
    return lines


def render(node: g.Node, *, ids: bool = False, sites: bool = False,
           annotate: Annotate | None = None) -> str:
    """The plan as text, sources first, one operator per line; ``ids`` shows occurrence numbers
    (the ``node`` of events and choice points), ``sites`` where each operator was built, and
    ``annotate(nid)`` text appended to each line (``rxrl.timings.annotate``: its timings).

    >>> import rxrl
    >>> from rxrl import ops
    >>> a = rxrl.from_iterables([[1], [2]]) | ops.map(str) | ops.barrier()
    >>> print(render((ops.zip(a, rxrl.from_iterable("xy")) | ops.take(1)).node, ids=True))
    #1 zip()
    ├─ #4 from_iterables(2 iterables)  [×2 shards]
    │  | #3 map(str)  [×2 shards]
    │  | #2 barrier()
    └─ #5 from_iterable('xy')
    | #0 take(1)
    """
    return "\n".join(_lines(compile_plan(node, check=False).root, set(), ids, sites, annotate))


def show(plan: Plan[Any] | Shards[Any], fmt: str = "text", *, ids: bool = False,
         sites: bool = False) -> str:
    """The plan's graph as ``text``, ``dot`` (Graphviz) or ``mermaid``.

    In text, ``ids`` prefixes each operator with its occurrence number (the ``node`` of
    events and trace choice points) and ``sites`` appends where it was built.
    """
    node = plan.node
    if fmt == "text":
        return render(node, ids=ids, sites=sites)
    steps = list(compile_plan(node, check=False).steps())  # a split is drawn once, with n outputs
    edges = sorted({(child.id, s.id) for s in steps for child in s.inputs})
    nodes = [(s.id, s.node) for s in steps]
    if fmt == "dot":
        out = ["digraph plan {", "  rankdir=TB;", "  node [shape=box, fontname=monospace];"]
        out += [f'  n{i} [label="{_escape(n)}"];' for i, n in nodes]
        out += [f"  n{a} -> n{b};" for a, b in edges]
        return "\n".join([*out, "}"])
    if fmt == "mermaid":
        out = ["flowchart TD"]
        out += [f'  n{i}["{_escape(n)}"]' for i, n in nodes]
        out += [f"  n{a} --> n{b}" for a, b in edges]
        return "\n".join(out)
    raise ValueError(f"unknown format {fmt!r}; choose text, dot or mermaid")


def _escape(node: g.Node) -> str:
    label = node.label + (f" ×{node.shards}" if node.shards is not None else "")
    return label.replace("\\", "\\\\").replace('"', "'")
