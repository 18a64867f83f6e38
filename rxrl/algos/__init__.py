"""The algorithms, each one module ending in one ``SPEC``: ``ALGORITHMS[name]`` and ``get(name)``.

An algorithm's module lives in the folder of its family (``on_policy``, ``vtrace``,
``qlearning``, ``multi_agent``, ``meta``); `MODULES` names it, and the registry imports it when
it is first looked up, so that ``rxrl train ppo`` imports PPO's module and not the others (nor,
through them, torch: docs/design-notes.md, "The start-up's critical path"). Everything else
about an algorithm (its config, plan, budget, summary) is its `Algorithm` spec.

>>> from rxrl.algos import get
>>> algo = get("ppo")
>>> algo.config().env, algo.name
('CartPole-v1', 'ppo')
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from rxrl.algos.spec import Algorithm, Snapshot

#: algorithm name -> the module whose ``SPEC`` it is
MODULES: Mapping[str, str] = {
    "ppo": "rxrl.algos.on_policy.ppo",
    "a2c": "rxrl.algos.on_policy.a2c",
    "a3c": "rxrl.algos.on_policy.a3c",
    "ddppo": "rxrl.algos.on_policy.ddppo",
    "impala": "rxrl.algos.vtrace.impala",
    "appo": "rxrl.algos.vtrace.appo",
    "ma-ppo": "rxrl.algos.multi_agent.ma_ppo",
    "two-trainer": "rxrl.algos.multi_agent.two_trainer",
    "maml": "rxrl.algos.meta.maml",
    "dqn": "rxrl.algos.qlearning.dqn",
    "apex": "rxrl.algos.qlearning.apex",
    "sac": "rxrl.algos.qlearning.sac",
}


class Registry(Mapping[str, Algorithm]):
    """``name -> Algorithm``: the ``SPEC`` of the module `MODULES` names, imported when first
    looked up."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self._modules = dict(modules)
        self._built: dict[str, Algorithm] = {}

    def __getitem__(self, name: str) -> Algorithm:
        if name not in self._built:
            spec = importlib.import_module(self._modules[name]).SPEC
            if not isinstance(spec, Algorithm) or spec.name != name:
                raise TypeError(f"{self._modules[name]}.SPEC must be the Algorithm {name!r}, got {spec!r}")
            self._built[name] = spec
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


ALGORITHMS: Mapping[str, Algorithm] = Registry(MODULES)


def get(name: str) -> Algorithm:
    """The algorithm called ``name``; a ValueError lists the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {sorted(ALGORITHMS)}") from None


#: ``rxrl.algos.ppo`` and the like (the layout before algorithms were grouped by family): each
#: algorithm module as an attribute of this package, imported when first named
_ATTRIBUTES = {**{name.replace("-", "_"): module for name, module in MODULES.items()},
               "qsteps": "rxrl.algos.qlearning.steps"}


def __getattr__(name: str) -> Any:
    """``rxrl.algos.ppo`` and the like, imported when first named (PEP 562)."""
    if name in _ATTRIBUTES:
        return importlib.import_module(_ATTRIBUTES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALGORITHMS", "MODULES", "Algorithm", "Registry", "Snapshot", "get"]
