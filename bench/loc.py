"""Lines of code: each rxrl algorithm plan against the distributed execution of the same
algorithm in the installed RLlib.

Counts logical source lines: not blank, not a comment, not a docstring (found with `ast`,
so nothing is imported). For rxrl, every ``rxrl/algos/*.py`` that defines ``plan``: the body
of ``plan`` and the whole module (config + plan). For RLlib (new API stack), the
algorithm-specific execution — ``training_step`` of the algorithm class, the equivalent of a
plan — and, separately, the generic distributed-execution functions it calls (parallel
sampling, the learner group's update, the weight sync), whose rxrl counterpart is the Ray
backend (also counted, as a whole, for scale). Algorithms RLlib no longer ships (A2C and
A3C left RLlib in 2.x) show "—".

    python bench/loc.py
"""

from __future__ import annotations

import ast
import importlib.util
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: RLlib's algorithm-specific execution: rxrl algorithm -> (module, qualified function)
RLLIB_ALGORITHM: dict[str, tuple[str, str]] = {
    "ppo": ("ray.rllib.algorithms.ppo.ppo", "PPO.training_step"),
    "impala": ("ray.rllib.algorithms.impala.impala", "IMPALA.training_step"),
    # on the new API stack APPO.training_step is IMPALA's (it returns super().training_step())
    "appo": ("ray.rllib.algorithms.impala.impala", "IMPALA.training_step"),
    # DQN.training_step only dispatches to the new stack's (RLlib 2.60 has no Ape-X of its own:
    # its Ape-X is DQN with several env runners and prioritized replay)
    "apex": ("ray.rllib.algorithms.dqn.dqn", "DQN._training_step_new_api_stack"),
    "dqn": ("ray.rllib.algorithms.dqn.dqn", "DQN._training_step_new_api_stack"),
    # RLlib's SAC is a DQN subclass and runs DQN's training step
    "sac": ("ray.rllib.algorithms.dqn.dqn", "DQN._training_step_new_api_stack"),
}

#: the generic distributed-execution functions PPO.training_step calls
RLLIB_GENERIC: list[tuple[str, str]] = [
    ("ray.rllib.execution.rollout_ops", "synchronous_parallel_sample"),
    ("ray.rllib.core.learner.learner_group", "LearnerGroup.update"),
    ("ray.rllib.core.learner.learner_group", "LearnerGroup.foreach_learner"),
    ("ray.rllib.core.learner.learner_group", "LearnerGroup._get_results"),
    ("ray.rllib.env.env_runner_group", "EnvRunnerGroup.sync_weights"),
    ("ray.rllib.env.env_runner_group", "EnvRunnerGroup.foreach_env_runner"),
]


def code_lines(source: str, first: int = 1, last: int | None = None) -> int:
    """Logical lines of `source` within lines `first..last`: no blanks, comments or docstrings."""
    docstring_lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            head = node.body[0]
            if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant) \
                    and isinstance(head.value.value, str):
                docstring_lines.update(range(head.lineno, (head.end_lineno or head.lineno) + 1))
    counted: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        for line in range(tok.start[0], tok.end[0] + 1):
            if line not in docstring_lines:
                counted.add(line)
    stop = last if last is not None else sys.maxsize
    return sum(first <= line <= stop for line in counted)


def find_function(tree: ast.Module, qualname: str) -> ast.FunctionDef | None:
    """The (method) definition called `qualname` ("f" or "Class.f") in `tree`."""
    scope: list[ast.stmt] = tree.body
    *classes, name = qualname.split(".")
    for cls in classes:
        found = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if found is None:
            return None
        scope = found.body
    return next((n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name), None)


def function_lines(path: Path, qualname: str) -> int | None:
    """Logical lines of the body of `qualname` in `path` (signature and decorators excluded)."""
    source = path.read_text()
    node = find_function(ast.parse(source), qualname)
    if node is None:
        return None
    return code_lines(source, node.body[0].lineno, node.end_lineno)


def module_path(module: str) -> Path | None:
    """Where `module` is installed, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def rel(path: Path) -> str:
    """`path` relative to the repo or to site-packages, for printing."""
    text = str(path)
    return text.split("site-packages/", 1)[-1] if "site-packages/" in text else str(path.relative_to(ROOT))


def main() -> None:
    """Print the table and say what was counted."""
    rows = ["| algorithm | rxrl plan body | rxrl module (config + plan) | RLlib algorithm-specific "
            "(training_step) | RLlib + generic execution it calls |", "|---|---:|---:|---:|---:|"]
    counted: list[str] = []
    generic_total = 0
    for module, qualname in RLLIB_GENERIC:
        path = module_path(module)
        n = function_lines(path, qualname) if path else None
        generic_total += n or 0
        if path:
            counted.append(f"{rel(path)}: {qualname} ({n if n is not None else 'not found'})")
    for path in sorted((ROOT / "rxrl" / "algos").glob("*.py")):
        plan = function_lines(path, "plan")
        if plan is None:
            continue
        algo = path.stem
        whole = code_lines(path.read_text())
        rllib = "—"
        total = "—"
        if algo in RLLIB_ALGORITHM:
            module, qualname = RLLIB_ALGORITHM[algo]
            rpath = module_path(module)
            n = function_lines(rpath, qualname) if rpath else None
            if n is not None and rpath is not None:
                rllib, total = str(n), str(n + generic_total)
                counted.insert(0, f"{rel(rpath)}: {qualname} ({n})")
        rows.append(f"| {algo} | {plan} | {whole} | {rllib} | {total} |")
    hand = ROOT / "bench" / "handwritten_ray_ppo.py"
    hand_lines = sum(function_lines(hand, f) or 0 for f in ("_train", "BatchLearner.train"))
    backend = ROOT / "rxrl" / "backends" / "ray"
    backend_lines = sum(code_lines(p.read_text()) for p in backend.glob("*.py"))
    print("\n".join(rows))
    print("\nLogical lines (no blanks, comments, docstrings). RLlib functions counted:")
    for line in counted:
        print(f"- {line}")
    print(f"For comparison, PPO hand-written on Ray (bench/handwritten_ray_ppo.py: _train + "
          f"BatchLearner.train): {hand_lines} lines.")
    apex = ROOT / "bench" / "handwritten_ray_apex.py"
    apex_parts = ("_train", "Shard.store", "Shard.sample_batches", "Shard.update", "Learner.train_batches")
    apex_lines = sum(function_lines(apex, f) or 0 for f in apex_parts)
    print(f"Ape-X hand-written on Ray (bench/handwritten_ray_apex.py: {' + '.join(apex_parts)}): "
          f"{apex_lines} lines.")
    print(f"rxrl's counterpart of the generic part, for scale: the whole Ray backend, "
          f"{rel(backend)}/*.py: {backend_lines} lines (shared by every plan).")


if __name__ == "__main__":
    main()
