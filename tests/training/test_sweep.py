"""``rxrl sweep`` and `rxrl.training.sweep`: search spaces, checks, and sweeps on Ray Tune —
random search, ASHA stopping trials early, PBT cloning checkpoints, a resume after an interrupt.

The sweeps use the session's Ray (``ray_session``: 4 CPUs) and a small PPO; a trial runs its
plan on the reference backend, so its records depend on its config alone.
"""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rxrl.algos.configs import parse_assignment, to_dict, with_settings
from rxrl.algos.on_policy.ppo import PPO
from rxrl.cli import main
from rxrl.training import sweep as lib
from rxrl.training.sweep import Dist, make_sweep, parse_dist, run_sweep
from tests.training.test_evaluation import QUICK_PPO

ALGO_ENV: dict[str, Any] = {"env": "CartPole-v1", "settings": QUICK_PPO}

# ------------------------------------------------------------------------------ the space


def test_distributions_parse() -> None:
    assert parse_dist("uniform(0, 1)") == Dist("uniform", (0.0, 1.0))
    assert parse_dist(" loguniform( 1e-4 ,1e-2 ) ") == Dist("loguniform", (1e-4, 1e-2))
    assert parse_dist("randint(1, 5)") == Dist("randint", (1, 5))
    assert parse_dist("choice(tanh, 'relu', [64, 64], true, None)") == Dist(
        "choice", ("tanh", "relu", [64, 64], True, None))
    assert parse_dist("grid(0.98,0.99)") == Dist("grid", (0.98, 0.99))


@pytest.mark.parametrize(("text", "message"), [
    ("loguniform(1e-2)", "loguniform takes 2 numbers (low, high), got 1"),
    ("lognormal(1, 2)", "unknown distribution 'lognormal'; choose one of uniform, loguniform, randint, "
                        "choice, grid"),
    ("uniform(1, 0)", "uniform(1, 0): low must be less than high"),
    ("loguniform(0, 1)", "loguniform(0, 1): low must be > 0"),
    ("randint(0.5, 2)", "randint takes 2 integers (low, high), got 0.5, 2"),
    ("choice()", "choice takes at least one value, got none"),
    ("choice(1,,2)", "an empty argument in (1,,2)"),
    ("uniform 0 1", "expected a distribution like loguniform(1e-4, 1e-2), got 'uniform 0 1'"),
    ("choice(a b)", "cannot read the value 'a b'"),
])
def test_bad_distributions_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_dist(text)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


numbers = st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: x != 0)
values = st.one_of(st.integers(-1000, 1000), numbers, st.booleans(), st.none(),
                   st.text(st.characters(codec="ascii", exclude_characters="\x00"), max_size=8),
                   st.lists(st.integers(1, 512), min_size=1, max_size=3))


@st.composite
def dists(draw: st.DrawFn) -> Dist:
    kind = draw(st.sampled_from(lib.DISTRIBUTIONS))
    if kind in ("choice", "grid"):
        return Dist(kind, tuple(draw(st.lists(values, min_size=1, max_size=4))))
    if kind == "randint":
        start = draw(st.integers(-100, 100))
        return Dist(kind, (start, start + draw(st.integers(1, 100))))
    low = draw(st.floats(1e-8, 1e3) if kind == "loguniform" else numbers)
    return Dist(kind, (low, low + draw(st.floats(1e-3, 1e3))))


@given(dists())
@example(Dist("choice", ("\\", 0)))  # a quoted string ending in an escaped backslash
def test_a_distribution_reads_back_from_its_text(dist: Dist) -> None:
    assert parse_dist(dist.text) == dist
    low, *_ = dist.args
    assert dist.clip(low) == low if not dist.discrete else dist.clip("x") == "x"


@given(dists(), st.floats(-1e7, 1e7, allow_nan=False))
def test_a_distribution_holds_what_it_can_draw_and_not_what_it_cannot(dist: Dist, x: float) -> None:
    """The law of `Dist.holds` (what `--defaults-first` checks a default with): every probe
    value and every value brought into range (`Dist.clip`) is held; a choice holds exactly its
    values; a range holds nothing outside it, and no text."""
    assert all(dist.holds(v) for v in dist.probes())
    if dist.discrete:
        assert dist.holds(x) == any(x == a and not isinstance(a, bool) for a in dist.args)
        return
    assert dist.holds(dist.clip(x))
    low, high = dist.args
    assert not dist.holds(low - 1) and not dist.holds(high + 1) and not dist.holds("x")


@given(st.one_of(values, st.text(max_size=8)))
def test_a_setting_reads_back_as_rxrl_train_reads_it(value: Any) -> None:
    assert parse_assignment(lib.setting_text("learner.lr", value)) == ("learner.lr", value)


def test_space_files_json_and_lines(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"lr": "loguniform(1e-4, 1e-2)",
                                                 "gamma": {"choice": [0.98, 0.99]}}))
    (tmp_path / "b.txt").write_text("# the space\nlr=loguniform(1e-4, 1e-2)\n\n"
                                    "gamma=choice(0.98, 0.99)  # two\n")
    expected = {"lr": Dist("loguniform", (1e-4, 1e-2)), "gamma": Dist("choice", (0.98, 0.99))}
    assert lib.read_space_file(tmp_path / "a.json") == expected
    assert lib.read_space_file(tmp_path / "b.txt") == expected
    (tmp_path / "c.txt").write_text("lr=loguniform(1e-2)\n")
    with pytest.raises(ValueError, match=r"bad --space 'lr=loguniform\(1e-2\)': loguniform takes 2"):
        lib.read_space_file(tmp_path / "c.txt")


# ----------------------------------------------------------------------------- the sweep


def test_make_sweep_resolves_keys_and_fills_in_the_schedule() -> None:
    sweep = make_sweep("ppo", steps=4096, space={"lr": "loguniform(1e-4, 1e-2)", "gamma": "grid(0.98, 0.99)"},
                       scheduler="asha", trials=4, **ALGO_ENV)
    assert list(sweep.space) == ["learner.lr", "gamma"]
    assert sweep.settings["learner.num_epochs"] == 1  # fixed settings resolved too
    assert (sweep.grid_size, sweep.trials, sweep.grace_period) == (2, 4, 512)  # an eighth
    assert lib.Sweep.from_json(json.loads(json.dumps(sweep.to_json()))) == sweep
    pbt = make_sweep("ppo", steps=4096, space={"lr": "loguniform(1e-4, 1e-2)"}, scheduler="pbt",
                     time_attr="iterations", perturbation_interval=2, trials=4, **ALGO_ENV)
    assert pbt.checkpoint_every == 2 * 256  # a checkpoint at each perturbation


@pytest.mark.parametrize(("options", "message"), [
    ({"space": {"lrr": "uniform(0, 1)"}}, "bad --space lrr: unknown setting 'lrr' for PPO; did you mean "
                                          "'learner.lr'?"),
    ({"trials": 0}, "--trials must be >= 1, got 0"),
    ({"search": "bayes"}, "unknown --search 'bayes'; choose one of random, grid, optuna"),
    ({"scheduler": "hyperband"}, "unknown --scheduler 'hyperband'; choose one of none, asha, pbt"),
    ({"space": {"gamma": "uniform(0.9, 1.5)"}},
     "--space gamma=uniform(0.9, 1.5): at 1.5: bad --set: PPO.gamma must be a number in [0.0, 1.0]"),
    ({"space": {"seed": "uniform(1, 4)"}},
     "--space seed=uniform(1.0, 4.0): at 1.0000000000000002: bad --set: seed must be int"),
    ({"search": "grid"}, "--search grid needs listed values (grid or choice), not learner.lr=loguniform"),
    ({"space": {"gamma": "grid(0.9, 0.99)"}, "trials": 3},
     "--trials 3: the grid has 2 points and each repeat runs them all"),
    ({"space": {"policy.hidden_sizes": "choice([32, 32], [64, 64])"}, "scheduler": "pbt"},
     "--scheduler pbt cannot perturb policy.hidden_sizes: a trial that clones another's checkpoint"),
    ({"scheduler": "pbt", "search": "optuna"}, "--scheduler pbt chooses the configs itself"),
    ({"settings": {**QUICK_PPO, "lr": 0.1}}, "learner.lr is both fixed (--set) and swept (--space)"),
    ({"steps": 100}, "--steps: one training iteration samples 256 env steps"),
    ({"target_return": float("nan")}, "--target-return must be a finite number, got nan"),
    ({"target_return": 100.0, "scheduler": "pbt", "trials": 4},
     "--target-return stops each trial at the target, and PBT trains its population"),
    ({"budget": 0}, "--budget must be >= 1 env step, got 0"),
    ({"defaults_first": True, "space": {"lr": "loguniform(1e-5, 1e-4)"}},
     "--defaults-first: learner.lr is 0.002 as it stands, which --space learner.lr=loguniform(1e-05, "
     "0.0001) cannot draw"),
    ({"defaults_first": True, "space": {"gamma": "grid(0.9, 0.99)"}},
     "--defaults-first: a grid runs each of its points already"),
])
def test_bad_sweeps_are_one_line_errors(options: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"env": "CartPole-v1", "settings": QUICK_PPO, "steps": 2048,
                            "space": {"lr": "loguniform(1e-4, 1e-2)"}, **options}
    with pytest.raises(ValueError) as e:
        make_sweep("ppo", **args)
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize(("argv", "message"), [
    (["--space", "lr=loguniform(1e-2)"],
     "bad --space 'lr=loguniform(1e-2)': loguniform takes 2 numbers (low, high), got 1"),
    (["--space", "lr=normal(0, 1)"], "bad --space 'lr=normal(0, 1)': unknown distribution 'normal'"),
    (["--space", "lrr=uniform(0,1)"], "bad --space lrr: unknown setting 'lrr' for PPO"),
    (["--space", "lr=uniform(1e-4,1e-2)", "--trials", "0"], "--trials must be >= 1, got 0"),
    (["--space", "lr=uniform(1e-4,1e-2)", "--search", "bayes"], "unknown --search 'bayes'"),
    (["--space", "lr=uniform(1e-4,1e-2)", "--scheduler", "fifo"], "unknown --scheduler 'fifo'"),
    (["--space", "lr=uniform(1e-4,1e-2)", "--out", "{tmp}/done"], "--out {tmp}/done already holds a sweep "
                                                            "(sweep.json): continue it with --resume"),
    (["--space", "lr=uniform(1e-4,1e-2)", "--resume"], "--resume: {tmp}/new holds no sweep (no sweep.json)"),
    (["--space-file", "{tmp}/none.txt"], "cannot read --space-file {tmp}/none.txt: No such file"),
])
def test_bad_command_lines_say_so_in_one_line(argv: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "sweep.json").write_text("{}")
    args = ["sweep", "ppo", "--out", str(tmp_path / "new"),
            *[a.replace("{tmp}", str(tmp_path)) for a in argv]]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("rxrl sweep: error: " + message.replace("{tmp}", str(tmp_path))), err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "new").exists()


def test_a_resume_must_be_the_same_sweep(tmp_path: Path) -> None:
    sweep = make_sweep("ppo", steps=2048, space={"lr": "loguniform(1e-4, 1e-2)"}, trials=4, **ALGO_ENV)
    tmp_path.joinpath(lib.SWEEP_FILE).write_text(json.dumps(sweep.to_json()))
    lib.check_out(sweep, tmp_path, resume=True)
    with pytest.raises(ValueError, match=r"that sweep has trials = 4, this one 5: give the options it was"):
        lib.check_out(attrs.evolve(sweep, trials=5), tmp_path, resume=True)


def test_a_sweep_still_going_holds_its_directory(tmp_path: Path) -> None:
    """One live sweep per directory: a second one (or a resume from another terminal) while a
    sweep holds ``--out`` is refused in one line, before Ray starts, and writes nothing."""
    import os

    from rxrl.training.lock import RunDirClaim

    sweep = make_sweep("ppo", steps=2048, space={"lr": "loguniform(1e-4, 1e-2)"}, trials=4, **ALGO_ENV)
    out = tmp_path / "s"
    held = RunDirClaim.take(out)  # what a running sweep holds
    try:
        for resume in (False, True):  # a sweep starting, then one that wrote its sweep.json
            with pytest.raises(ValueError, match=rf"^--out {out} is in use by another sweep "
                                                 rf"\(process {os.getpid()}\); wait for it to end, "
                                                 r"or choose a new --out$"):
                run_sweep(sweep, out, resume=resume)
            out.joinpath(lib.SWEEP_FILE).write_text(json.dumps(sweep.to_json()))
    finally:
        held.release()
    assert [p.name for p in out.iterdir()] == [lib.SWEEP_FILE]  # the holder's; its lock gone


def test_without_ray_tune_a_sweep_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray.tune", None)  # import ray.tune fails
    sweep = make_sweep("ppo", steps=2048, space={"lr": "loguniform(1e-4, 1e-2)"}, trials=4, **ALGO_ENV)
    with pytest.raises(ValueError, match=r'^rxrl sweep needs Ray Tune \(ray.tune is missing\): '
                                         r'pip install -e "\.\[tune\]"$'):
        run_sweep(sweep, tmp_path / "s")


# ------------------------------------------------------------------------------- sweeps


def rows(out: Path) -> list[dict[str, str]]:
    """results.csv's rows."""
    with (out / lib.RESULTS_FILE).open() as f:
        return list(csv.DictReader(f))


def metrics(run_dir: Path) -> list[dict[str, str]]:
    """A run's metrics.csv rows."""
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
def test_a_random_sweep_writes_results_best_and_a_run_per_trial(tmp_path: Path) -> None:
    sweep = make_sweep("ppo", steps=2048, trials=4, seed=1,
                       space={"lr": "loguniform(1e-4, 1e-2)", "gamma": "choice(0.98, 0.99)"}, **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    assert result.status == "completed" and len(result.rows) == 4
    table = rows(tmp_path / "s")
    assert [r["trial"] for r in table] == [r.trial for r in result.rows]
    assert all(r["status"] == "completed" and int(r["env_steps"]) >= 2048 for r in table)
    returns = [float(r["episode_return_mean"]) for r in table]
    assert returns == sorted(returns, reverse=True)  # best first
    for row in result.rows:  # an ordinary rxrl run each, under the sweep's directory
        assert row.run_dir.parent == (tmp_path / "s" / lib.RUNS_DIR).resolve()
        assert {"config.json", "metrics.csv", "checkpoint.pt", "summary.json"} <= {
            p.name for p in row.run_dir.iterdir()}
        assert json.loads((row.run_dir / "summary.json").read_text())["status"] == "completed"
    assert (tmp_path / "s" / lib.TUNE_DIR / "tuner.pkl").is_file()  # Tune's storage is the sweep's
    best = json.loads((tmp_path / "s" / lib.BEST_FILE).read_text())
    assert best["trial"] == table[0]["trial"] and result.best is not None
    # its --set values give the best trial's config
    config = with_settings(PPO(env="CartPole-v1"), dict(parse_assignment(s) for s in best["set"]))
    trained = json.loads((result.best.run_dir / "config.json").read_text())["config"]
    assert to_dict(config) == trained
    assert best["command"].startswith("rxrl train ppo --env CartPole-v1 --steps 2048 --set ")


@given(st.floats(-500, 500), st.floats(-500, 500), st.integers(0, 10_000), st.integers(0, 10_000))
def test_a_score_ranks_reaching_the_target_first_and_sooner_higher(
        target: float, ret: float, steps_a: int, steps_b: int) -> None:
    """The law of `lib.score` (budget 10,000 env steps): every return that reaches the target
    scores above every return that does not, and of two that reach it the sooner scores no
    lower; below the target the score is the return."""
    budget = 10_000
    if ret < target:
        assert lib.score(ret, steps_a, budget, target) == ret
        assert lib.score(ret, steps_a, budget, target) < lib.score(target, budget, budget, target)
    else:
        sooner, later = sorted((steps_a, steps_b))
        assert lib.score(ret, sooner, budget, target) >= lib.score(ret, later, budget, target) >= target
    assert lib.score(ret, steps_a, budget, None) == ret


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("ray_session")
def test_a_sweep_to_a_target_stops_each_trial_there_and_ranks_by_env_steps(tmp_path: Path) -> None:
    # one trial at a time, on the reference backend: each trial's records depend on its config
    sweep = make_sweep("ppo", steps=4096, space={"lr": "grid(1e-2, 3e-3, 1e-6)"}, max_concurrent=1,
                       target_return=35.0, **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    by_lr = {r.settings["learner.lr"]: r for r in result.rows}
    assert by_lr[1e-6].status == "completed" and by_lr[1e-6].reached is None  # never got there
    reached = [r for r in result.rows if r.reached is not None]
    assert len(reached) == 2, [(r.settings, r.status, r.episode_return_mean) for r in result.rows]
    for r in reached:  # stopped at the first record at the target: its run says so
        assert r.status == "reached target" and r.env_steps == r.reached and r.env_steps < 4096
        assert r.episode_return_mean >= 35.0
        summary = json.loads((r.run_dir / "summary.json").read_text())
        assert summary["status"] == "reached target"
        assert summary["reached_target"]["env_steps"] == r.reached
    # best first: the reached ones by env steps, then the rest by return
    assert result.rows[: len(reached)] == tuple(sorted(reached, key=lambda r: r.reached or 0))
    assert result.best == result.rows[0]
    best = json.loads((tmp_path / "s" / lib.BEST_FILE).read_text())
    assert best["reached_target_at"] == result.rows[0].reached and best["target_return"] == 35.0
    assert best["settings"] == {"learner.lr": 1e-2}  # the sooner of the two that reached 35
    assert "--target-return 35 " in best["command"]
    table = rows(tmp_path / "s")
    assert [r["reached_target_at"] for r in table] == [str(r.reached or "") for r in result.rows]


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
def test_a_budget_ends_the_sweep_once_the_trials_env_steps_add_up_to_it(tmp_path: Path) -> None:
    # one trial at a time: the first trains its 2,048 env steps, the second is cut short once
    # the two together reach 3,000, the other two never start
    sweep = make_sweep("ppo", steps=2048, space={"lr": "grid(3e-3, 1e-3, 3e-4, 1e-4)"}, max_concurrent=1,
                       budget=3000, **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    assert result.status == "completed"
    by_lr = {r.settings["learner.lr"]: r for r in result.rows}
    assert by_lr[3e-3].status == "completed" and by_lr[3e-3].env_steps >= 2048
    assert by_lr[1e-3].status == "budget spent" and 0 < by_lr[1e-3].env_steps < 2048
    assert by_lr[3e-3].env_steps + by_lr[1e-3].env_steps >= 3000  # the record that spent it
    # ... and no more than a record (one train batch) past it, with slack for one more
    assert by_lr[3e-3].env_steps + by_lr[1e-3].env_steps - 3000 < 2 * QUICK_PPO["train_batch_size"]
    not_run = [r for r in result.rows if r.status == "not started"]
    assert {r.settings["learner.lr"] for r in not_run} <= {3e-4, 1e-4}
    assert all(r.env_steps == 0 for r in not_run)
    assert {r["status"] for r in rows(tmp_path / "s")} >= {"completed", "budget spent"}
    summary = json.loads((by_lr[1e-3].run_dir / "summary.json").read_text())
    assert summary["env_steps_sampled"] == by_lr[1e-3].env_steps  # its run closed where Tune saw it


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("search", ["random", "optuna"])
def test_defaults_first_runs_the_config_as_it_stands_before_the_search_draws(
        tmp_path: Path, search: str) -> None:
    sweep = make_sweep("ppo", steps=512, trials=3, search=search, max_concurrent=1, defaults_first=True,
                       space={"lr": "loguniform(1e-4, 1e-2)", "gamma": "choice(0.9, 0.99)"}, **ALGO_ENV)
    assert lib.first_point(sweep) == {"learner.lr": PPO().learner.lr, "gamma": PPO().gamma}
    result = run_sweep(sweep, tmp_path / "s")
    # one trial at a time: the first to start wrote its config first
    first = min(result.rows, key=lambda r: (r.run_dir / "config.json").stat().st_mtime_ns)
    assert first.settings == {"learner.lr": PPO().learner.lr, "gamma": PPO().gamma}
    assert all(r.status == "completed" for r in result.rows)
    assert len({r.settings["learner.lr"] for r in result.rows}) == 3  # then it draws


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
def test_an_optuna_sweep(tmp_path: Path) -> None:
    sweep = make_sweep("ppo", steps=1024, trials=2, search="optuna", max_concurrent=1,
                       space={"lr": "loguniform(1e-4, 1e-2)", "activation": "choice(tanh, relu)"},
                       **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    assert [r.status for r in result.rows] == ["completed", "completed"]
    for r in result.rows:
        assert 1e-4 <= r.settings["learner.lr"] <= 1e-2
        config = json.loads((r.run_dir / "config.json").read_text())["config"]
        assert config["policy"]["activation"] == r.settings["policy.activation"]


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("ray_session")
def test_asha_stops_poor_trials_early(tmp_path: Path) -> None:
    # one trial at a time, the best first: ASHA's decisions follow from the trials' records,
    # which the reference backend makes depend on the config alone
    sweep = make_sweep("ppo", steps=2048, space={"lr": "grid(3e-3, 1e-5, 1e-4, 2e-5)"},
                       scheduler="asha", time_attr="iterations", grace_period=2, reduction_factor=2,
                       max_concurrent=1, **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    by_lr = {r.settings["learner.lr"]: r for r in result.rows}
    assert by_lr[3e-3].status == "completed" and by_lr[3e-3].env_steps >= 2048
    stopped = [r for r in result.rows if r.status == "stopped early"]
    assert stopped, [(r.settings, r.status, r.env_steps) for r in result.rows]
    for r in stopped:  # what Tune reported last: fewer steps than the budget; the run closed
        assert r.env_steps < 2048 and r.iterations in (2, 4)
        summary = json.loads((r.run_dir / "summary.json").read_text())
        assert summary["iterations"] == r.iterations


@pytest.mark.timeout(150)
@pytest.mark.usefixtures("ray_session")
def test_pbt_clones_a_better_trials_checkpoint(tmp_path: Path) -> None:
    sweep = make_sweep("ppo", steps=2048, trials=4, space={"lr": "loguniform(1e-4, 1e-2)"},
                       scheduler="pbt", perturbation_interval=512, **ALGO_ENV)
    result = run_sweep(sweep, tmp_path / "s")
    assert result.status == "completed"
    assert sum(r.exploits for r in result.rows) >= 1
    cloned = next(r for r in result.rows if r.exploits)
    notes = [json.loads(line) for line in (cloned.run_dir / "restores.jsonl").read_text().splitlines()]
    exploit = next(n for n in notes if n["exploit"])
    assert exploit["from_trial"] != cloned.trial
    assert exploit["from_trial"] in {r.trial for r in result.rows}
    low, high = sweep.space["learner.lr"].args
    assert low <= exploit["settings"]["learner.lr"] <= high  # perturbed, within the range
    iterations = [int(r["iteration"]) for r in metrics(cloned.run_dir)]
    assert iterations == list(range(1, len(iterations) + 1))  # resumed in place: each once


def tune_handles_sigint() -> bool:
    """Whether Tune's SIGINT handler is in place (a Tuner is running on the main thread)."""
    return getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "signal_interrupt_tune_run"


@contextlib.contextmanager
def interrupted_at(pattern: str, out: Path) -> Iterator[list[float]]:
    """Within the block, SIGINT the main thread (as Ctrl-C would) once a file matching
    ``pattern`` is in ``out`` and a Tuner runs; the list gets the time it was sent."""
    sent: list[float] = []
    done = threading.Event()
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def watch() -> None:
        while not done.wait(0.02):
            if next(out.glob(pattern), None) is not None and tune_handles_sigint():
                sent.append(time.monotonic())
                signal.pthread_kill(main_thread, signal.SIGINT)
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        done.set()
        thread.join()


@pytest.mark.timeout(150)
@pytest.mark.usefixtures("ray_session")
def test_an_interrupted_sweep_resumes_each_trial_from_its_checkpoint(tmp_path: Path) -> None:
    sweep = make_sweep("ppo", steps=4096, space={"lr": "grid(3e-3, 1e-3)"}, max_concurrent=1,
                       checkpoint_every=512, **ALGO_ENV)
    out = tmp_path / "s"
    with interrupted_at(f"{lib.TUNE_DIR}/*/checkpoint_000001", out) as sent:
        first = run_sweep(sweep, out)
    assert sent, "the sweep ended before it could be interrupted"
    assert (first.status, first.signal) == ("interrupted", signal.SIGINT)
    assert any(r.status == "unfinished" for r in first.rows)
    assert tune_handles_sigint() is False  # the handlers are as they were
    with pytest.raises(ValueError, match="already holds a sweep"):
        run_sweep(sweep, out)  # not over it without resume
    second = run_sweep(sweep, out, resume=True)
    assert second.status == "completed" and second.signal is None
    assert [r.status for r in second.rows] == ["completed", "completed"]
    resumed = [r for r in second.rows if (r.run_dir / "restores.jsonl").is_file()]
    assert resumed, "no trial resumed from a checkpoint"
    for r in resumed:
        note = json.loads((r.run_dir / "restores.jsonl").read_text().splitlines()[0])
        assert note["from_trial"] == r.trial and not note["exploit"] and note["iteration"] >= 2
        iterations = [int(row["iteration"]) for row in metrics(r.run_dir)]
        assert iterations == list(range(1, r.iterations + 1))  # each once: nothing lost, nothing twice
        assert json.loads((r.run_dir / "summary.json").read_text())["status"] == "completed"
    assert len(rows(out)) == 2 and json.loads((out / lib.BEST_FILE).read_text())["status"] == "completed"
