"""Convolutional trunks for image observations: the Nature CNN, the IMPALA ResNet, MinAtar's CNN.

Each takes a batch of images ``[B, C, H, W]`` (channels first, stacked frames on the channel
axis) as they come from the env, uint8 for Atari, and makes them float *inside* its forward:
divided by the space's upper bound when it is above 1 (255 for uint8 frames), as they are for
0/1 images (MinAtar). Nothing before the forward converts them, so fragments, replay and the
tensors a learner builds hold 1 byte per pixel, not 4.

Weights are orthogonal with gain sqrt(2) and zero biases (CleanRL's ``layer_init``, as the
MLP trunks of `rxrl.rl.models.policy`), drawn from a seeded generator: equal seeds give equal
networks in every process.

>>> import gymnasium as gym
>>> space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
>>> cnn = make_cnn("nature_cnn", space, torch.Generator().manual_seed(0))
>>> cnn(torch.zeros((2, 4, 84, 84), dtype=torch.uint8)).shape, cnn.out_dim, cnn.divisor
(torch.Size([2, 512]), 512, 255.0)
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rxrl.rl.config import BuiltTrunk

_GAIN = math.sqrt(2.0)


def pixel_divisor(space: gym.Space[Any]) -> float | None:
    """What a CNN divides ``space``'s images by: the largest upper bound when it is finite and
    above 1 (255 for uint8 frames), else None (0/1 images, or floats already scaled)."""
    high = float(np.max(space.high)) if isinstance(space, gym.spaces.Box) else math.inf
    return high if math.isfinite(high) and high > 1.0 else None


def _init(layer: nn.Conv2d | nn.Linear, generator: torch.Generator) -> nn.Conv2d | nn.Linear:
    nn.init.orthogonal_(layer.weight, _GAIN, generator=generator)
    assert layer.bias is not None
    nn.init.zeros_(layer.bias)
    return layer


def _conv(n_in: int, n_out: int, kernel: int, stride: int, generator: torch.Generator,
          padding: int = 0) -> nn.Conv2d:
    conv = nn.Conv2d(n_in, n_out, kernel, stride, padding)
    _init(conv, generator)
    return conv


def _conv_side(side: int, kernel: int, stride: int, padding: int = 0) -> int:
    return (side + 2 * padding - kernel) // stride + 1


class ImageTrunk(nn.Module):
    """A CNN trunk: ``[B, C, H, W]`` images (any dtype) to float features ``[B, out_dim]``,
    the pixels divided by `divisor` (None: not scaled) inside `forward`."""

    def __init__(self, body: nn.Module, out_dim: int, divisor: float | None) -> None:
        super().__init__()
        self.body, self.out_dim, self.divisor = body, out_dim, divisor

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Features ``[B, out_dim]`` of a batch of images (uint8 until here)."""
        x = images.float()
        if self.divisor is not None:
            x = x / self.divisor
        out: torch.Tensor = self.body(x)
        return out


def nature_cnn(shape: tuple[int, ...], generator: torch.Generator) -> tuple[nn.Sequential, int]:
    """Mnih et al. (2015): conv 32 8x8/4, 64 4x4/2, 64 3x3/1, linear 512, ReLU after each."""
    channels, height, width = shape
    h, w = height, width
    for kernel, stride in ((8, 4), (4, 2), (3, 1)):
        h, w = _conv_side(h, kernel, stride), _conv_side(w, kernel, stride)
    body = nn.Sequential(
        _conv(channels, 32, 8, 4, generator), nn.ReLU(),
        _conv(32, 64, 4, 2, generator), nn.ReLU(),
        _conv(64, 64, 3, 1, generator), nn.ReLU(),
        nn.Flatten(), _init(nn.Linear(64 * h * w, 512), generator), nn.ReLU())
    return body, 512


class _Residual(nn.Module):
    """IMPALA's residual block: ``x + conv(relu(conv(relu(x))))``, 3x3 convolutions."""

    def __init__(self, channels: int, generator: torch.Generator) -> None:
        super().__init__()
        self.conv0 = _conv(channels, channels, 3, 1, generator, padding=1)
        self.conv1 = _conv(channels, channels, 3, 1, generator, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.conv1(torch.relu(self.conv0(torch.relu(x))))
        return out


def impala_cnn(shape: tuple[int, ...], generator: torch.Generator) -> tuple[nn.Sequential, int]:
    """Espeholt et al. (2018): three stacks of 16, 32, 32 channels, each a 3x3 convolution, a
    3x3 max-pool of stride 2 and two residual blocks; then ReLU, linear 256, ReLU."""
    channels, h, w = shape
    layers: list[nn.Module] = []
    for width in (16, 32, 32):
        layers += [_conv(channels, width, 3, 1, generator, padding=1),
                   nn.MaxPool2d(3, 2, padding=1), _Residual(width, generator), _Residual(width, generator)]
        channels, h, w = width, _conv_side(h, 3, 2, 1), _conv_side(w, 3, 2, 1)
    layers += [nn.ReLU(), nn.Flatten(), _init(nn.Linear(channels * h * w, 256), generator), nn.ReLU()]
    return nn.Sequential(*layers), 256


def minatar_cnn(shape: tuple[int, ...], generator: torch.Generator) -> tuple[nn.Sequential, int]:
    """MinAtar's network (Young and Tian, 2019; CleanRL-style MinAtar baselines): conv 16
    3x3/1, ReLU, linear 128, ReLU."""
    channels, height, width = shape
    h, w = _conv_side(height, 3, 1), _conv_side(width, 3, 1)
    body = nn.Sequential(_conv(channels, 16, 3, 1, generator), nn.ReLU(), nn.Flatten(),
                         _init(nn.Linear(16 * h * w, 128), generator), nn.ReLU())
    return body, 128


_BODIES = {"nature_cnn": nature_cnn, "impala_cnn": impala_cnn, "minatar_cnn": minatar_cnn}


def make_cnn(trunk: BuiltTrunk, space: gym.Space[Any], generator: torch.Generator) -> ImageTrunk:
    """The CNN ``trunk`` names for images of ``space`` (a 3-D Box ``[C, H, W]`` that
    `rxrl.rl.config.resolve_trunk` accepted for it), weights drawn from ``generator``."""
    build = _BODIES.get(trunk)
    if build is None or not isinstance(space, gym.spaces.Box) or len(space.shape) != 3:
        raise ValueError(f"make_cnn: no CNN {trunk!r} for observations {space!r} (resolve_trunk first)")
    body, out_dim = build(space.shape, generator)
    return ImageTrunk(body, out_dim, pixel_divisor(space))


__all__ = ["ImageTrunk", "impala_cnn", "make_cnn", "minatar_cnn", "nature_cnn", "pixel_divisor"]
