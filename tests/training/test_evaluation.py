"""Evaluation beside training (`rxrl.training.evaluation`): eval columns in every row, the
evaluated returns those of ``rxrl eval`` on the same learner state and seeds, a refusal for the
algorithms it does not support, and a Ray run with evaluation on.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import rxrl
from rxrl.algos import get
from rxrl.cli import main
from rxrl.cli.tools import episode_returns
from rxrl.rl.data.metrics import Metrics
from rxrl.training import Callback, Trainer
from rxrl.training.checkpoint import CheckpointClock, save_checkpoint, training_plan
from rxrl.training.evaluation import (
    COLUMNS,
    EVAL_SEED_OFFSET,
    Evaluation,
    Evaluator,
    evaluation_settings,
    greedy_policy,
)
from rxrl.training.spelling import command_line

#: a small PPO: 256 env steps per iteration
QUICK_PPO: dict[str, Any] = {"num_workers": 1, "num_envs_per_worker": 2, "fragment_length": 64,
                             "train_batch_size": 256, "num_epochs": 1, "minibatch_size": 128}


class States(Callback):
    """Keeps every checkpoint's learner state, by iteration."""

    def __init__(self) -> None:
        self.states: dict[int, Mapping[str, Any]] = {}

    def on_checkpoint(self, trainer: Trainer, path: Path, record: Metrics, state: Mapping[str, Any]) -> None:
        """Keep ``state``."""
        self.states[record.iteration] = state


def rows_of(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def evaluated(rows: list[dict[str, str]]) -> dict[int, dict[str, str]]:
    """The rows' evaluations, by the iteration they evaluated."""
    return {int(float(r["eval/iteration"])): r for r in rows if r["eval/iteration"] != "nan"}


def check_against_rxrl_eval(trainer: Trainer, states: States, rows: list[dict[str, str]],
                            tmp_path: Path, capsys: pytest.CaptureFixture[str], interval: int) -> int:
    """Every evaluation of a checkpoint iteration has the returns ``rxrl eval`` gives that
    checkpoint with the same seed; the number of such evaluations."""
    compared = 0
    for iteration, row in evaluated(rows).items():
        if iteration not in states.states:
            continue
        seed, episodes = int(float(row["eval/seed"])), int(float(row["eval/episodes"]))
        assert seed == trainer.config.seed + EVAL_SEED_OFFSET + (iteration // interval - 1) * episodes
        state = states.states[iteration]
        act = greedy_policy(trainer.algo, trainer.config, state)
        returns = episode_returns(trainer.config.env, dict(trainer.config.env_kwargs), act, episodes, seed)
        assert float(row["eval/return_mean"]) == pytest.approx(sum(returns) / len(returns), abs=1e-9)
        assert float(row["eval/return_min"]) == min(returns)
        assert float(row["eval/return_max"]) == max(returns)
        # and the command line, on that checkpoint written to disk
        ckpt = tmp_path / f"ckpt-{iteration}.pt"
        from rxrl.training.checkpoint import Counters

        save_checkpoint(ckpt, trainer.algo.name, trainer.config, state, Counters(iteration=iteration))
        capsys.readouterr()
        assert main(["eval", str(ckpt), "--episodes", str(episodes), "--seed", str(seed)]) == 0
        assert f"mean return {sum(returns) / len(returns):.1f} ±" in capsys.readouterr().out
        compared += 1
    return compared


def test_a_reference_ppo_run_evaluates_as_rxrl_eval_does(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    states = States()
    trainer = Trainer("ppo", tmp_path / "r", backend="reference", steps=4096, settings=QUICK_PPO,
                      loggers=["csv"], handle_signals=False, checkpoint_every=512,
                      evaluation_interval=2, evaluation_episodes=3, callbacks=[states])
    result = trainer.run()
    assert result.status == "completed"
    rows = rows_of(tmp_path / "r")
    assert len(rows) == 16
    assert all(set(COLUMNS) <= set(r) for r in rows)  # the header has them from the first row
    assert math.isnan(float(rows[0]["eval/return_mean"]))
    done = evaluated(rows)
    assert sorted(done) == list(range(2, 15, 2))  # the last one is still in flight at the end
    assert all(int(float(r["eval/episodes"])) == 3 for r in done.values())
    assert check_against_rxrl_eval(trainer, states, rows, tmp_path, capsys, 2) >= 3
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["evaluation"]["iteration"] == 14 and summary["evaluation"]["episodes"] == 3


def test_a_reference_dqn_run_evaluates_its_greedy_q_as_rxrl_eval_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    states = States()
    # a checkpoint every record: the evaluated iterations (the reference's schedule defers the
    # evaluators' results, so the inbox drops some requests) are all checkpoint iterations
    trainer = Trainer("dqn", tmp_path / "d", backend="reference", steps=1500,
                      settings={"num_workers": 1}, loggers=["csv"], handle_signals=False,
                      checkpoint_every=1, evaluation_interval=1, evaluation_episodes=2,
                      callbacks=[states])
    assert trainer.run().status == "completed"
    rows = rows_of(tmp_path / "d")
    assert all(set(COLUMNS) <= set(r) for r in rows)
    assert len(evaluated(rows)) >= 5
    assert check_against_rxrl_eval(trainer, states, rows, tmp_path, capsys, 1) >= 2


def test_evaluation_refuses_the_algorithms_it_does_not_support(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="evaluation during training does not support 'maml'"):
        Trainer("maml", tmp_path / "m", backend="reference", evaluation_interval=1)
    with pytest.raises(ValueError, match="does not support 'ma-ppo'"):
        training_plan(get("ma-ppo"), get("ma-ppo").config(), None, CheckpointClock(1, 1),
                      evaluation=Evaluation(1))
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("kwargs", "parameter", "flag"), [
    ({"interval": -1}, "evaluation_interval must be an integer >= 0",
     "--eval-interval must be an integer >= 0"),
    ({"interval": 2, "workers": 0}, "evaluation_workers must be an integer >= 1",
     "--eval-workers must be an integer >= 1"),
    ({"interval": 0, "episodes": 0}, "evaluation_episodes must be an integer >= 1",
     "--eval-episodes must be an integer >= 1"),
])
def test_evaluation_settings_are_checked(kwargs: dict[str, int], parameter: str, flag: str) -> None:
    """A bad setting is named as the caller gave it: the Trainer's parameter from Python, the
    flag from ``rxrl train``."""
    with pytest.raises(ValueError, match=f"^{parameter}"):
        evaluation_settings(**kwargs)
    with command_line(), pytest.raises(ValueError, match=f"^{flag}"):
        evaluation_settings(**kwargs)
    assert evaluation_settings(None) is None and evaluation_settings(0) is None


def test_the_plan_shows_the_evaluation_branch() -> None:
    algo = get("ppo")
    plan = training_plan(algo, algo.config(), None, CheckpointClock(1000, 1000),
                         evaluation=Evaluation(5, workers=2))
    text = rxrl.show(plan)
    assert "Evaluator×2" in text and "EvalInbox" in text


def test_an_evaluator_is_deterministic_in_its_seed() -> None:
    algo = get("ppo")
    config = algo.config()
    from rxrl.algos.common import env_spaces
    from rxrl.rl.models.policy import make_policy

    spaces = env_spaces(config, "ppo")
    state = {"policy": make_policy(spaces.observation, spaces.action, config.policy, 3).state_dict()}
    a = Evaluator("ppo", config).evaluate(state, 2, seed=123, iteration=7, env_steps=99)
    b = Evaluator("ppo", config).evaluate(state, 2, seed=123)
    assert (a.return_mean, a.return_min, a.length_mean) == (b.return_mean, b.return_min, b.length_mean)
    assert (a.iteration, a.env_steps, a.episodes, a.seed) == (7, 99, 2, 123)


@pytest.mark.timeout(120)
def test_a_ray_ppo_run_with_evaluation_has_eval_columns(tmp_path: Path, ray_session: None) -> None:
    trainer = Trainer("ppo", tmp_path / "ray", backend="ray", steps=3072, settings=QUICK_PPO,
                      loggers=["csv"], handle_signals=False, evaluation_interval=1,
                      evaluation_episodes=2)
    assert trainer.run().status == "completed"
    rows = rows_of(tmp_path / "ray")
    assert len(rows) == 12 and all(set(COLUMNS) <= set(r) for r in rows)
    assert evaluated(rows), "no evaluation came back during the run"
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["evaluation"] is not None


@pytest.mark.parametrize(("algo", "steps"), [("a2c", 2000), ("a3c", 2000), ("impala", 3000),
                                             ("appo", 3000), ("apex", 3000), ("ddppo", 3000)])
def test_every_single_agent_algorithm_reports_evaluations_beside_training(
        tmp_path: Path, algo: str, steps: int) -> None:
    """The evaluation branch on the other single-agent plans (reference backend): rows carry
    finite eval/return_mean once an evaluation arrived, of an iteration already trained."""
    from rxrl.training.trainer import Trainer

    result = Trainer(algo, tmp_path / "r", backend="reference", steps=steps, loggers=["csv"],
                     handle_signals=False, evaluation_interval=2, evaluation_episodes=1,
                     settings={"num_workers": 1}).run()
    assert result.status == "completed"
    with (tmp_path / "r" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    evaluated = [(int(r["iteration"]), float(r["eval/iteration"])) for r in rows
                 if r["eval/return_mean"] not in ("", "nan")]
    assert evaluated, algo
    assert all(0 < of <= it and of % 2 == 0 for it, of in evaluated)


def test_a_traced_run_with_evaluation_replays_exactly(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The trace of a run with evaluation on holds its evaluation settings, so ``rxrl replay``
    rebuilds the plan that ran (its evaluation branch included: the async union's choices
    between the two) and reproduces every record; the evaluations are not records."""
    trace = tmp_path / "run.trace.json"
    Trainer("ppo", tmp_path / "rx", backend="rx", steps=1536, settings=QUICK_PPO, loggers=["csv"],
            handle_signals=False, evaluation_interval=1, evaluation_episodes=2, trace=trace).run()
    assert json.loads(trace.read_text())["evaluation"] == {"interval": 1, "workers": 1, "episodes": 2}
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    assert "identical: all 6 recorded iterations reproduced exactly" in capsys.readouterr().out
