"""`rxrl.training.machine`: a refusal's numbers are what the run would really do (issue 27,
items 3 and 6)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from rxrl.algos import MODULES, get
from rxrl.training import Trainer
from rxrl.training.machine import PROCESS_MB, WORKERS_PER_CORE, check_machine, check_overshoot

#: settings that keep one iteration cheap on the reference backend
SMALL = {"maml": {"tasks_per_worker": 2, "num_envs_per_worker": 2}}
#: the algorithms whose first record is exactly one iteration's sample (the others report at
#: least that: a fragment stored before the learner starts, or rounds sampled ahead)
EXACT = ("a3c", "maml", "two-trainer", "ma-ppo")


def product(shape: str) -> int:
    """The product of the numbers a shape names (``"2 workers × 8 envs"`` -> 16)."""
    return math.prod(int(n.replace(",", "")) for n in re.findall(r"(?:^|× )([\d,]+)", shape))


@pytest.mark.parametrize("algo", sorted(MODULES))
def test_the_stated_shape_multiplies_to_the_steps(algo: str) -> None:
    """Law: the factors a refusal names multiply to the env steps it states, for every
    registered algorithm's defaults and for a non-default shape."""
    make = get(algo).config
    for config in (make(), make(num_workers=3, num_envs_per_worker=5)):
        sample = config.iteration_sample()
        assert product(sample.shape) == sample.steps, (algo, sample)


@pytest.mark.parametrize("algo", sorted(MODULES))
def test_one_iteration_samples_at_least_what_the_refusal_says(algo: str, tmp_path: Path) -> None:
    """The first record of a run has sampled at least ``iteration_sample().steps`` env steps
    (exactly that many where an iteration is one sample), so a budget below it overshoots."""
    trainer = Trainer(algo, tmp_path / "run", backend="reference", settings=SMALL.get(algo, {}),
                      steps=10**6, loggers=[], handle_signals=False)
    expected = trainer.config.iteration_sample().steps
    trainer.start()
    try:
        record = trainer.step()
    finally:
        trainer.close()
    assert record is not None
    if algo in EXACT:
        assert record.env_steps_sampled == expected
    else:
        assert record.env_steps_sampled >= expected


def test_maml_refusal_names_what_maml_samples() -> None:
    """Issue 27 item 3: MAML's refusal computes its own sample (tasks, episodes, both passes)
    and names the settings MAML uses, not fragment_length."""
    config = get("maml").config()
    with pytest.raises(ValueError) as e:
        check_overshoot(config, 20_000)
    message = str(e.value)
    stated = int(re.search(r"samples ([\d,]+) env steps", message)[1].replace(",", ""))  # type: ignore[index]
    assert stated == 2 * 2 * 10 * 20 * 100  # workers, tasks, episodes, horizon, both passes
    shape = re.search(r"\((.*)\), more than", message)[1]  # type: ignore[index]
    assert product(shape) == stated
    assert "fragment_length" not in message and "tasks_per_worker" in message


@pytest.mark.parametrize(("cores", "memory_mb"), [(2, 24_000), (2, 2_000), (64, 10_000), (1, math.inf)])
def test_worker_limit_is_one_number(cores: int, memory_mb: float) -> None:
    """Issue 27 item 6: the limit a refusal states is accepted, one more is refused with the
    same limit, whichever of memory and cores binds."""
    config = get("ppo").config
    with pytest.raises(ValueError) as e:
        check_machine(config(num_workers=10_000), cores, memory_mb)
    limit = int(re.search(r"use at most (\d+) workers", str(e.value))[1])  # type: ignore[index]
    assert limit == min(WORKERS_PER_CORE * cores,
                        int(memory_mb // PROCESS_MB) - 1 if math.isfinite(memory_mb) else 10**9)
    check_machine(config(num_workers=limit), cores, memory_mb)  # accepted
    with pytest.raises(ValueError) as again:
        check_machine(config(num_workers=limit + 1), cores, memory_mb)
    assert f"use at most {limit} workers" in str(again.value)
