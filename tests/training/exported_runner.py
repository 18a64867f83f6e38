"""Runs exported policies as a user's serving process would: with torch alone (TorchScript, pt2) or
onnxruntime alone (ONNX), rxrl unimportable (and torch too, for ONNX).

``python exported_runner.py FORMAT OBS.npy MODEL OUT.npy [OBS.npy MODEL OUT.npy ...]``: each
MODEL's actions on the observations in its OBS.npy, saved to its OUT.npy.
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


if __name__ == "__main__":
    main(sys.argv[1:])
