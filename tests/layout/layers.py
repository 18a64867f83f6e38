"""The layering rule of rxrl's packages, as data and a checker (docs/design-notes.md, "The layout").

Each module belongs to the layer with the longest prefix of its name; a module may import modules of
its own layer and of the layers listed before it, never those after. Imports under
``if TYPE_CHECKING:`` count too (a type-only upward import still ties a lower layer to an upper
one). Module-level imports must form no cycle, and the torch-free modules import no torch at
module level.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

#: layers, lowest first: (name, module prefixes)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves", ("rxrl.errors", "rxrl.ready", "rxrl.warmup", "rxrl._aliases", "rxrl._lazy")),
    ("envs", ("rxrl.envs",)),
    ("rl.config", ("rxrl.rl.config", "rxrl.rl.schedules")),
    ("rl.data", ("rxrl.rl.data",)),
    ("rl.models", ("rxrl.rl.models",)),
    ("rl.objectives", ("rxrl.rl.objectives",)),
    ("rl.replay", ("rxrl.rl.replay",)),
    ("rl.workers", ("rxrl.rl.workers",)),
    ("rl.learners", ("rxrl.rl.learners",)),
    ("rl", ("rxrl.rl",)),
    # the plan core: the typed front, the IR, the backends (imports no rl, no torch); above the
    # RL layer, so that rl imports nothing of the core but its leaves and runs anywhere, unplanned
    ("core", ("rxrl.events", "rxrl.schedule", "rxrl.graph", "rxrl.plan", "rxrl.ops", "rxrl.actors",
              "rxrl.sources", "rxrl.compile", "rxrl.show", "rxrl.run", "rxrl.interop", "rxrl.timings",
              "rxrl.backends")),
    ("package", ("rxrl",)),  # rxrl/__init__: the core's façade
    ("algos", ("rxrl.algos",)),
    ("training", ("rxrl.training",)),
    ("cli", ("rxrl.cli",)),
]
#: modules that must not import torch at module level: what a torch-free rollout worker loads
TORCH_FREE = ("rxrl.envs", "rxrl.rl.config", "rxrl.rl.schedules", "rxrl.rl.data",
              "rxrl.rl.models.forward", "rxrl.rl.models.initial", "rxrl.rl.workers.rollout",
              "rxrl.rl.workers.reply", "rxrl.rl.replay.sumtree", "rxrl.rl.replay.nstep")


#: façades: their lazy imports (in functions, under ``if TYPE_CHECKING``) may reach any layer —
#: ``rxrl.train`` is the training library's, named on the package — their module-level ones not
FACADES = frozenset({"rxrl"})


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the layer with the longest prefix of ``module``."""
    matches = [(len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
               if module == p or module.startswith(p + ".")]
    if not matches:
        raise ValueError(f"{module} is in no layer: add it to tests/layout/layers.py")
    return max(matches)[1]


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for the package at ``root`` (a directory named rxrl)."""
    out = {}
    for file in sorted(root.rglob("*.py")):
        parts = list(file.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = file
    return out


def imports(file: Path, module: str, known: set[str],
            top_level_only: bool = False) -> Iterator[tuple[str, int]]:
    """(imported rxrl module, line) for each import in ``file``; ``from pkg import name`` names
    the submodule when ``name`` is one. With ``top_level_only`` only the imports that run when
    the module is imported (not in functions, not under ``if TYPE_CHECKING``)."""
    tree = ast.parse(file.read_text())
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]
    nodes = _top_level(tree.body) if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in known else base), node.lineno


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node.test):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def violations(root: Path) -> list[str]:
    """Every import of the package at ``root`` that breaks the layering, one line each."""
    mods = modules(root)
    known = set(mods)
    out = []
    for module, file in mods.items():
        mine = layer_of(module)
        for target, line in imports(file, module, known, top_level_only=module in FACADES):
            if not target.startswith("rxrl"):
                continue
            theirs = layer_of(target)
            where = f"{file.relative_to(root.parent)}:{line}"
            if theirs > mine:
                out.append(f"{where}: {module} ({LAYERS[mine][0]}) imports {target} "
                           f"({LAYERS[theirs][0]}), an upper layer")
        if module.startswith(TORCH_FREE):
            for target, line in imports(file, module, known, top_level_only=True):
                if target == "torch" or target.startswith("torch."):
                    out.append(f"{file.relative_to(root.parent)}:{line}: {module} imports torch "
                               "at module level (a torch-free module)")
    return out + cycles(root)


def cycles(root: Path) -> list[str]:
    """Import cycles among module-level imports (what runs when a module is imported)."""
    mods = modules(root)
    known = set(mods)
    graph = {m: sorted({t for t, _ in imports(f, m, known, top_level_only=True)
                        if t in known and t != m}) for m, f in mods.items()}
    # a package's import of its own submodule, and a submodule's of its package, are Python's
    # normal order (the package runs first), not a cycle
    graph = {m: [t for t in ts if not m.startswith(t + ".")] for m, ts in graph.items()}
    out: list[str] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                out.append("import cycle: " + " -> ".join([*stack[stack.index(t):], t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)
    return out
