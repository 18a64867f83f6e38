"""``rxrl export``: a checkpoint's greedy policy as a file that torch alone or onnxruntime alone runs.

The exported graph is `rxrl.rl.models.greedy.GreedyPolicy`: raw env observations in (a batch,
``[B, *obs_shape]``, the env's own dtype), env actions out (int64 ``[B]`` for a Discrete space,
its ``start`` added; float32 ``[B, d]`` for a Box, clipped to its bounds) — the observation
normalization, the deterministic head and the action squashing/clipping are inside, so the
actions equal ``rxrl eval``'s. Three formats:

- ``torchscript``: a traced module; ``torch.jit.load(FILE)(obs)``.
- ``pt2``: a `torch.export` program (torch's successor to TorchScript, which torch 2.13
  deprecates); ``torch.export.load(FILE).module()(obs)``.
- ``onnx``: an ONNX graph (opset 18, dynamic batch) from torch's exporter; input ``obs``,
  output ``action``; ``onnxruntime.InferenceSession(FILE).run(None, {"obs": obs})``. Needs
  the ``onnx`` extra (``pip install -e ".[onnx]"``) to export, onnxruntime only to run.

A recurrent actor-critic (``policy.recurrent`` ``lstm`` or ``gru``) exports as
`rxrl.rl.models.greedy.RecurrentGreedyPolicy`, a step that also takes and returns its state:
``(obs [B, *obs_shape], state [B, S] float32) -> (action, state_out [B, S])``, ``S`` being
`Exported.state_size` (the actor core's state, ``policy.core_state_size``: ``2 *
recurrent_size`` for an LSTM, ``recurrent_size`` for a GRU; the critic's core is not in the
file). Start every episode from zeros, pass each step's ``state_out`` to the next step, and
zero a row of it when that row's env starts a new episode — as ``rxrl eval`` does:

- ``torchscript`` / ``pt2``: ``action, state = policy(obs, state)``, ``state`` first
  ``torch.zeros(B, S)``.
- ``onnx``: inputs ``obs`` and ``state``, outputs ``action`` and ``state_out`` (both inputs
  with a dynamic batch); ``action, state = session.run(None, {"obs": obs, "state": state})``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rxrl.algos import Algorithm
from rxrl.algos.common import RolloutSettings
from rxrl.training.checkpoint import load_checkpoint
from rxrl.training.spelling import given, option

#: the formats `export_policy` writes
FORMATS = ("torchscript", "pt2", "onnx")
#: the ONNX opset of an exported graph
ONNX_OPSET = 18


@attrs.frozen
class Exported:
    """What `export_policy` wrote: the file, its format, the algorithm and env, the
    observation input's shape (after the batch dimension) and dtype, and the floats of
    recurrent state per row the file takes and returns (0: a stateless policy, whose file
    takes observations alone)."""

    path: Path
    format: str
    algo: str
    env: str
    obs_shape: tuple[int, ...]
    obs_dtype: str
    state_size: int = 0

    def describe(self) -> str:
        """One line for the command line."""
        shape = ", ".join(["B", *map(str, self.obs_shape)])
        if not self.state_size:
            return (f"wrote {self.path} ({self.format}: {self.algo} {self.env}, obs [{shape}] "
                    f"{self.obs_dtype} -> greedy env actions)")
        return (f"wrote {self.path} ({self.format}: {self.algo} {self.env}, obs [{shape}] "
                f"{self.obs_dtype}, state [B, {self.state_size}] float32 -> greedy env actions, "
                f"next state; a zero state starts an episode)")


def greedy_module(algo: Algorithm, config: RolloutSettings, learner_state: Any) -> Any:
    """The `GreedyPolicy` of a learner state: the algorithm's own (`Algorithm.greedy_module`:
    DQN's argmax Q, SAC's squashed mean) or the config's actor-critic's (a
    `RecurrentGreedyPolicy`, ``(obs, state) -> (actions, new_state)``, for a recurrent one; its
    ``state_size`` says how many floats of state a row carries). ValueError (one line) for a
    multi-agent algorithm or a state that does not fit its config."""
    from rxrl.training.evaluation import PolicyMismatch, load_actor_critic

    if algo.evaluate is not None:
        raise ValueError(f"{algo.name} has no single greedy policy to export (its policies are per agent)")
    if algo.greedy_module is not None:
        try:
            module = algo.greedy_module(config, learner_state)
        except ValueError as e:
            raise PolicyMismatch(str(e)) from e
    else:
        from rxrl.algos.common import env_spaces
        from rxrl.rl.models.greedy import actor_critic_greedy

        spaces = env_spaces(config, algo.name)
        policy = load_actor_critic(algo, config, learner_state)
        module = actor_critic_greedy(policy, spaces.observation, spaces.action)
    return module.eval().requires_grad_(False)  # outputs a user can call .numpy() on


def example_observations(config: RolloutSettings, n: int, seed: int = 0) -> np.ndarray[Any, Any]:
    """``n`` observations an env of ``config`` visits under random actions (reset when an
    episode ends), stacked ``[n, *obs_shape]`` in the env's dtype: inputs for tracing and for
    checking an export against ``rxrl eval``'s policy."""
    from rxrl.envs.vector import make_env

    env: Any = make_env(config.env, config.env_kwargs, training=False)  # preprocessed as eval's
    env.action_space.seed(seed)
    out: list[np.ndarray[Any, Any]] = []
    try:
        obs, _ = env.reset(seed=seed)
        while len(out) < n:
            out.append(np.asarray(obs))
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()
    return np.stack(out)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Torch's exporters' deprecation warnings and registry chatter, silenced."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def state_size(module: Any) -> int:
    """Floats of recurrent state per row that a greedy module takes and returns: its
    ``state_size`` (`RecurrentGreedyPolicy`), 0 for a module of observations alone."""
    return int(getattr(module, "state_size", 0))


def write_module(module: Any, example: np.ndarray[Any, Any], out: Path, fmt: str) -> None:
    """Serialize ``module`` (traced on ``example``, a batch of observations, and — for a
    recurrent module, `state_size` > 0 — a zero state per row) to ``out`` as ``fmt``; the file
    is written whole or not at all (a temporary beside it, renamed)."""
    import torch

    tmp = out.with_name(f".{out.name}.tmp")
    x = torch.as_tensor(example)
    size = state_size(module)
    inputs: tuple[Any, ...] = (x,) if not size else (x, torch.zeros(len(x), size, dtype=torch.float32))
    names = (["obs"], ["action"]) if not size else (["obs", "state"], ["action", "state_out"])
    try:
        with _quiet(), torch.no_grad():
            batch = torch.export.Dim("batch", min=1)
            dynamic = tuple({0: batch} for _ in inputs)
            if fmt == "torchscript":
                traced = torch.jit.trace(module, inputs, check_trace=False)  # type: ignore[no-untyped-call]
                torch.jit.save(traced, str(tmp))
            elif fmt == "pt2":
                torch.export.save(torch.export.export(module, inputs, dynamic_shapes=dynamic), str(tmp))
            else:
                program = torch.onnx.export(module, inputs, dynamo=True, input_names=names[0],
                                            output_names=names[1], dynamic_shapes=dynamic,
                                            opset_version=ONNX_OPSET, external_data=False,
                                            verbose=False)
                assert program is not None
                program.save(str(tmp), external_data=False)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def _check_onnx_installed() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise ValueError(f'exporting ONNX needs the onnx extra (pip install -e ".[onnx]"): '
                         f"no module {e.name!r}") from None


def export_policy(checkpoint: str | Path, out: str | Path, fmt: str = "torchscript",
                  overwrite: bool = False) -> Exported:
    """Write the greedy policy of ``checkpoint`` (a ``checkpoint.pt`` or a run directory) to
    ``out`` as ``fmt`` (`FORMATS`); see the module docstring for what the file computes.

    Raises ValueError (one line) for an unknown format, a missing or corrupt checkpoint, a
    multi-agent algorithm, an existing ``out`` (unless ``overwrite``), or a missing extra.

    >>> export_policy("runs/ppo", "ppo.onnx", "onnx")  # doctest: +SKIP
    Exported(path=PosixPath('ppo.onnx'), format='onnx', algo='ppo', env='CartPole-v1', ...)
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose {', '.join(FORMATS)}")
    target = Path(out)
    if target.is_dir() or str(out).endswith(("/", os.sep)):
        raise ValueError(f"{given('--out', 'out', out)} is a directory; name the file to write")
    if target.exists() and not overwrite:
        raise ValueError(f"{target} exists; remove it or pass {option('--force', 'overwrite=True')} "
                         "to overwrite it")
    if not target.parent.is_dir():
        raise ValueError(f"cannot write {target}: no directory {target.parent}")
    if fmt == "onnx":
        _check_onnx_installed()
    ckpt = load_checkpoint(checkpoint)
    try:
        module = greedy_module(ckpt.algo, ckpt.config, ckpt.learner_state)
    except ValueError as e:
        if ckpt.algo.evaluate is not None:
            raise
        raise ValueError(f"corrupt checkpoint {ckpt.path}: {e}") from e
    example = example_observations(ckpt.config, 2)
    write_module(module, example, target, fmt)
    return Exported(target, fmt, ckpt.algo.name, ckpt.config.env, tuple(example.shape[1:]),
                    str(example.dtype), state_size(module))


__all__ = ["FORMATS", "ONNX_OPSET", "Exported", "example_observations", "export_policy", "greedy_module",
           "state_size", "write_module"]
