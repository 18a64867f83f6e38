"""Errors name an option the way its caller gave it: ``rxrl.Trainer(steps=...)`` reads
``steps``, ``rxrl train --steps`` reads ``--steps`` (`rxrl.training.spelling`).

The command line's own wording is checked end to end in tests/cli/test_bad_input.py; here the
same checks are made from Python, and each once more inside `command_line` (what the CLI runs
its commands in), so that both spellings come from the one check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rxrl.errors import ActorError
from rxrl.training import Trainer
from rxrl.training.export import export_policy
from rxrl.training.machine import explain_actor_error
from rxrl.training.spelling import command_line, given, option, settings


def test_a_name_and_a_value_are_spelled_as_the_caller_gave_them() -> None:
    assert (option("--steps", "steps"), given("--steps", "steps", 5)) == ("steps", "steps=5")
    assert given("--out", "run_dir", Path("runs/a")) == "run_dir='runs/a'"
    assert settings("lr", "gamma") == "the settings lr / gamma"
    with command_line():
        assert (option("--steps", "steps"), given("--steps", "steps", 5)) == ("--steps", "--steps 5")
        assert given("--out", "run_dir", Path("runs/a")) == "--out runs/a"
        assert settings("lr", "gamma") == "--set lr / gamma"
    assert option("--steps", "steps") == "steps"  # the block is left: Python's names again


#: a Trainer's bad options: (keyword arguments, the message from Python, from the command line)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "steps below 1": ({"steps": -5}, "steps must be >= 1, got -5", "--steps must be >= 1, got -5"),
    "a budget below one iteration": (
        {"backend": "rx", "workers": 100, "steps": 20_000},
        "steps: one training iteration samples 51,200 env steps (100 workers × 8 envs × 64 steps), "
        "more than the 20,000 left to train: raise steps, or lower workers or the settings "
        "num_envs_per_worker / fragment_length",
        "--steps: one training iteration samples 51,200 env steps (100 workers × 8 envs × 64 "
        "steps), more than the 20,000 left to train: raise --steps, or lower --workers or --set "
        "num_envs_per_worker / fragment_length"),
    "more workers than the machine holds": (
        {"workers": 100_000}, "workers=100000: use at most ", "--workers 100000: use at most "),
    "a bad setting": ({"settings": {"gamma": 2.0}}, "bad settings: ", "bad --set: "),
    "checkpoint_every below 1": (
        {"checkpoint_every": 0}, "checkpoint_every must be >= 1, got 0",
        "--checkpoint-every must be >= 1, got 0"),
    "worker_restarts below -1": (
        {"worker_restarts": -2}, "worker_restarts must be >= 0", "--worker-restarts must be >= 0"),
    "a target that is not a number": (
        {"target_return": float("nan")}, "target_return must be a finite number",
        "--target-return must be a finite number"),
    "a trace in no directory": (
        {"trace": "/nonexistent-dir/t.json"}, "cannot write trace='/nonexistent-dir/t.json': no directory",
        "cannot write --trace /nonexistent-dir/t.json: no directory"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_trainers_bad_option_is_named_by_its_parameter_from_python(case: str) -> None:
    kwargs, python, cli = CASES[case]
    with pytest.raises(ValueError) as from_python:
        Trainer("ppo", **kwargs)
    assert str(from_python.value).startswith(python)
    assert "--" not in str(from_python.value)
    with command_line(), pytest.raises(ValueError) as from_cli:
        Trainer("ppo", **kwargs)
    assert str(from_cli.value).startswith(cli)


def test_an_example_value_is_shown_bare() -> None:
    """Where a message shows how to give an option (any value: a placeholder), Python's
    spelling is ``worker_restarts=N``, the command line's ``--worker-restarts N``."""
    dead = ActorError("actor w[0] died: its group has no restart policy (group.with_restarts(n) "
                      "restarts dead actors)")
    assert str(explain_actor_error(dead, None)).endswith(
        "no restarts were allowed (worker_restarts=N restarts rollout workers)")
    with command_line():
        assert str(explain_actor_error(dead, None)).endswith(
            "no restarts were allowed (--worker-restarts N restarts rollout workers)")
    with pytest.raises(ValueError, match=r"or train on a Ray cluster \(address=ADDRESS\)$"):
        Trainer("ppo", workers=100_000)
    with command_line(), pytest.raises(ValueError, match=r"or train on a Ray cluster \(--address ADDRESS\)$"):
        Trainer("ppo", workers=100_000)


def test_a_run_directory_that_holds_a_run_is_named_with_run_dir_and_resume(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ValueError) as from_python:
        Trainer("ppo", tmp_path)
    assert str(from_python.value) == (
        f"run_dir='{tmp_path}' already holds a run (summary.json): continue it with "
        f"resume='{tmp_path}', or choose a new run_dir")
    with command_line(), pytest.raises(ValueError) as from_cli:
        Trainer("ppo", tmp_path)
    assert str(from_cli.value) == (
        f"--out {tmp_path} already holds a run (summary.json): continue it with --resume "
        f"{tmp_path}, or choose a new --out")


def test_export_names_out_and_overwrite_from_python(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^out='[^']*' is a directory; name the file to write$"):
        export_policy(tmp_path / "run", tmp_path)
    (tmp_path / "p.onnx").write_bytes(b"")
    with pytest.raises(ValueError, match=r"exists; remove it or pass overwrite=True to overwrite it$"):
        export_policy(tmp_path / "run", tmp_path / "p.onnx", "onnx")
    flag = r"exists; remove it or pass --force to overwrite it$"
    with command_line(), pytest.raises(ValueError, match=flag):
        export_policy(tmp_path / "run", tmp_path / "p.onnx", "onnx")


def test_a_sweep_trial_trains_inside_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep names its flags (docs/sweeps.md), its trials too: the trainer of a trial, made
    inside Tune's worker, is made and run inside `command_line`."""
    from ray import tune

    from rxrl.training import sweep_tune
    from rxrl.training.spelling import on_command_line

    seen: list[tuple[str, bool]] = []

    class Recording:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.append(("made", on_command_line()))

        def run(self) -> None:
            seen.append(("run", on_command_line()))

    class Context:
        def get_trial_id(self) -> str:
            return "trial-0"

    monkeypatch.setattr(sweep_tune, "Trainer", Recording)
    monkeypatch.setattr(tune, "get_context", Context)  # the module the trial's body reads
    monkeypatch.setattr(tune, "get_checkpoint", lambda: None)
    job = sweep_tune.TrialJob("ppo", None, 1000, {}, "reference", 1000, str(tmp_path))
    sweep_tune.run_trial({}, job)
    assert seen == [("made", True), ("run", True)]
    assert not on_command_line()
