"""Runs exported policies as a user's serving process would: with torch alone (TorchScript, pt2) or
onnxruntime alone (ONNX), rxrl unimportable (and torch too, for ONNX).

``python exported_runner.py FORMAT OBS.npy MODEL OUT.npy [OBS.npy MODEL OUT.npy ...]``: each
MODEL's actions on the observations in its OBS.npy, saved to its OUT.npy.

A recurrent MODEL takes an ``.npz`` in place of OBS.npy: ``obs`` (``[T, B, *obs_shape]``, a
rollout of ``B`` envs), ``starts`` (``[T, B]`` bool: the row's env starts an episode at that
step) and ``state`` (``[B, S]``, the zero state the model starts from). The model is stepped
through the rollout as a serving loop would — a row's state zeroed where its episode starts,
each step's returned state passed to the next — and OUT (an ``.npz``) gets ``actions``
(``[T, B, ...]``) and ``states`` (``[T, B, S]``, the state each step returned).
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any


class Refuse(importlib.abc.MetaPathFinder):
    """Makes the named top-level packages unimportable."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        """Refuse ``fullname`` if its top-level package is refused."""
        if fullname.partition(".")[0] in self.names:
            raise ImportError(f"{fullname} must not be imported to run an exported policy")


def main(argv: list[str]) -> None:
    """Run each model on the observations."""
    fmt, triples = argv[0], argv[1:]
    refused = {"rxrl", "gymnasium", "ray"} | ({"torch"} if fmt == "onnx" else set())
    for name in list(sys.modules):
        assert name.partition(".")[0] not in refused, name
    sys.meta_path.insert(0, Refuse(refused))
    import numpy as np

    for obs_file, model, out in zip(triples[::3], triples[1::3], triples[2::3], strict=True):
        if obs_file.endswith(".npz"):
            run_recurrent(fmt, obs_file, model, out)
            continue
        obs = np.load(obs_file)
        if fmt == "onnx":
            import onnxruntime  # type: ignore[import-untyped]

            session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
            actions = session.run(["action"], {"obs": obs})[0]
        else:
            import torch

            load = torch.jit.load if fmt == "torchscript" else lambda f: torch.export.load(f).module()
            policy = load(model)
            with torch.no_grad():
                actions = policy(torch.as_tensor(obs)).numpy()
        np.save(out, actions)
    assert not any(n.partition(".")[0] in refused for n in sys.modules)


def run_recurrent(fmt: str, inputs: str, model: str, out: str) -> None:
    """Step a recurrent MODEL through the rollout in ``inputs`` (module docstring)."""
    import numpy as np

    with np.load(inputs) as data:
        obs, starts, state = data["obs"], data["starts"], data["state"]
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["obs", "state"]

        def step(o: Any, s: Any) -> tuple[Any, Any]:
            action, new = session.run(["action", "state_out"], {"obs": o, "state": s})
            return action, new
    else:
        import torch

        policy = (torch.jit.load(model) if fmt == "torchscript"  # type: ignore[no-untyped-call]
                  else torch.export.load(model).module())

        def step(o: Any, s: Any) -> tuple[Any, Any]:
            with torch.no_grad():
                action, new = policy(torch.as_tensor(o), torch.as_tensor(s))
            return action.numpy(), new.numpy()
    actions, states = [], []
    for t in range(len(obs)):
        state = np.where(starts[t][:, None], np.float32(0.0), state)  # an episode starts: zeros
        action, state = step(obs[t], state)
        actions.append(action)
        states.append(state)
    np.savez(out, actions=np.stack(actions), states=np.stack(states))


if __name__ == "__main__":
    main(sys.argv[1:])
