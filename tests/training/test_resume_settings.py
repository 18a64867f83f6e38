"""A resume that changes what the checkpoint's learner state depends on is refused in one
line naming the setting; other settings may change (issue 27, item 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rxrl.algos import MODULES, get
from rxrl.algos.configs import paths
from rxrl.training import Trainer
from rxrl.training.setup import prepare
from tests.cli.helpers import QUICK, rxrl_cli

#: per algorithm: a setting the learner state depends on whose change keeps every tensor's
#: shape (so that only this check can catch it), and one a resume may change
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "ppo": ({"policy.activation": "relu"}, {"learner.lr": 1e-4}),
    "impala": ({"policy.activation": "relu"}, {"learner.ent_coef": 0.0}),
    "dqn": ({"learner.q_net.activation": "tanh"}, {"learner.lr": 1e-4}),
    "sac": ({"learner.log_std_max": 1.0}, {"learner.tau": 0.01}),
    "two-trainer": ({"dqn.n_step": 5}, {"ppo.lr": 1e-4}),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A short reference run per algorithm of `CASES`, checkpointed at its end."""
    out = {}
    for algo in CASES:
        run = tmp_path_factory.mktemp("runs") / algo
        trainer = Trainer(algo, run, backend="reference", steps=get(algo).config().iteration_sample().steps,
                          loggers=[], handle_signals=False)
        trainer.run()
        out[algo] = run
    return out


@pytest.mark.parametrize("algo", sorted(CASES))
def test_a_resume_changing_the_learner_states_settings_is_refused(
        algo: str, checkpoints: dict[str, Path]) -> None:
    """Refused, naming the setting and both values; a learning setting may change."""
    changed, allowed = CASES[algo]
    (path, value), = changed.items()
    with pytest.raises(ValueError) as e:
        prepare(algo, resume=checkpoints[algo], steps=10**6, settings=changed)
    message = str(e.value)
    assert "\n" not in message and f"{path} is " in message and repr(value) in message
    setup = prepare(algo, resume=checkpoints[algo], steps=10**6, settings=allowed)
    (key, new), = allowed.items()
    assert key in paths(setup.algo.config) and f"={new!r}" in repr(setup.config)


def test_every_algorithm_declares_existing_settings() -> None:
    """Each `Algorithm.state_settings` entry names at least one of its config's settings (a
    typo would silently let a resume change the architecture)."""
    for name in MODULES:
        spec = get(name)
        own = paths(spec.config)
        for entry in spec.state_settings:
            assert any(spec.depends_on(p) for p in own if p == entry or p.startswith(entry)), (name, entry)


def test_through_the_console_script(tmp_path: Path) -> None:
    """``rxrl train --resume RUN --set policy.activation=relu``: one line, exit 1."""
    run = tmp_path / "ppo"
    done = rxrl_cli("train", "ppo", "--backend", "reference", "--steps", "256", "--out", run, *QUICK)
    assert done.returncode == 0, done.stderr
    again = rxrl_cli("train", "ppo", "--backend", "reference", "--resume", run, "--steps", "1000",
                     "--set", "policy.activation=relu")
    assert again.returncode == 1
    assert again.stderr == (f"rxrl train: error: --resume {run}: policy.activation is 'tanh' in the "
                            "checkpoint, 'relu' here; the learner state was trained with it, so a "
                            "resume cannot change it (drop that setting, or start a new run)\n")
