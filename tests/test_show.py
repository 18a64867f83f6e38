"""Plans print as readable graphs: text, Graphviz dot and Mermaid."""

from __future__ import annotations

import pytest

import rxrl
from rxrl import ops
from tests.conformance.harness import Counter


def plan() -> rxrl.Plan[int]:
    group = rxrl.actors(Counter, 2)
    sampled = rxrl.from_actors(group, Counter.next) | ops.window(2) | ops.barrier()
    return (ops.union(sampled | ops.map(len), rxrl.from_iterable([1, 2]), mode="async")
            | ops.broadcast(group, Counter.bump))


def test_text_shows_sources_first_and_shards() -> None:
    assert rxrl.show(plan()) == "\n".join([
        "union(mode='async')",
        "├─ from_actors(Counter×2, Counter.next)  [×2 shards]",
        "│  | window(2)  [×2 shards]",
        "│  | barrier()",
        "│  | map(len)",
        "└─ from_iterable([1, 2])",
        "| broadcast(Counter×2, Counter.bump)",
    ])
    assert repr(plan()) == rxrl.show(plan())


def test_sites_point_at_the_line_that_built_each_operator() -> None:
    text = rxrl.show(plan(), sites=True)
    assert "window(2)  [×2 shards]  @ tests/test_show.py:14" in text


def test_dot_and_mermaid_draw_every_edge() -> None:
    dot = rxrl.show(plan(), "dot")
    assert dot.startswith("digraph plan {") and dot.count("->") == 6
    mermaid = rxrl.show(plan(), "mermaid")
    assert mermaid.startswith("flowchart TD") and mermaid.count("-->") == 6


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format 'svg'"):
        rxrl.show(plan(), "svg")
