"""Learner groups: where n data-parallel learners meet, and the allreduce that keeps them equal.

A learner group is n copies of one learner (same seed, same config, so the same initial
weights and the same minibatch order). Every copy receives the whole train batch; in each
minibatch, rank r evaluates the loss on its share of the rows only (`Collective.part`),
weighted by that share, and the ranks sum their gradients (with the loss statistics) with one
allreduce before every optimizer step. Every rank then clips and steps on the same summed
gradient — the gradient of the whole minibatch — so the copies stay equal to each other and,
up to float rounding, to one learner on the whole batch (the law tests/rl/test_learner_group.py
checks). A rank whose share of a minibatch is empty adds zeros and still takes part: no rank
waits for one that has nothing to do.

The ranks meet through a `Rendezvous`: a torch ``TCPStore`` served by the process that opened
it (the driver, which builds the plan), to which each rank connects at its first step. Sums run
on gloo for CPU learners and NCCL for CUDA ones on distinct GPUs; CUDA ranks that share a GPU
(``learner_gpus=0.5``: two learners on one chip) sum on gloo too, through host memory, since
NCCL refuses two ranks on one device (torch.distributed process groups made
directly, not the process-global default group, so that several ranks may share a process:
the reference and rx backends run a group's members on threads of the driver's process,
`rxrl.ops.call_all`).
"""

from __future__ import annotations

import datetime
import sys
import threading
from collections.abc import Sequence
from typing import Any

import attrs
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, TCPStore

from rxrl.rl.data.batch import SampleBatch
from rxrl.rl.objectives.losses import TensorBatch, normalized

#: the servers of the rendezvous this process opened, by port (they live as long as it does:
#: a rank that restarts may connect again)
_SERVERS: dict[int, TCPStore] = {}
_LOCK = threading.Lock()


def _node_ip() -> str:
    """This node's address as Ray knows it when Ray runs here (the driver's, which the ranks
    connect to from any node), else the loopback address."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return str(ray.util.get_node_ip_address())
    return "127.0.0.1"


@attrs.frozen
class Rendezvous:
    """Where the ``size`` members of one learner group meet: ``host:port`` of a ``TCPStore``
    that `open` started in this process. Pickles as its address; the server stays here."""

    host: str
    port: int
    size: int
    timeout_s: float = 300.0

    @staticmethod
    def open(size: int, timeout_s: float = 300.0) -> Rendezvous:
        """Start a rendezvous server for ``size`` members on a free port of this process."""
        if size < 1:
            raise ValueError(f"Rendezvous.open: size must be >= 1, got {size}")
        server = TCPStore("0.0.0.0", 0, is_master=True, wait_for_workers=False,
                               timeout=datetime.timedelta(seconds=timeout_s))
        with _LOCK:
            _SERVERS[server.port] = server
        return Rendezvous(_node_ip(), server.port, size, timeout_s)


class Collective:
    """Rank ``rank`` of the group that meets at ``rendezvous``: sums tensors across the group.

    Connects at the first `allreduce_` (all ranks then wait for each other, for at most
    ``rendezvous.timeout_s`` seconds: a rank that never comes is an error naming it, never a
    hang). Pickles as its rendezvous and rank (a copy connects anew).
    """

    def __init__(self, rendezvous: Rendezvous, rank: int, *, local_data: bool = False) -> None:
        if not 0 <= rank < rendezvous.size:
            raise ValueError(f"Collective: rank must be in [0, {rendezvous.size}), got {rank}")
        self.rendezvous, self.rank, self.size = rendezvous, rank, rendezvous.size
        #: whether each rank trains on data of its own (DD-PPO: a minibatch is all this rank's,
        #: weighted 1 / size) rather than on its part of one batch every rank holds
        self.local_data = local_data
        self._group: Any = None
        #: whether CUDA tensors go through host memory to be summed (ranks sharing a GPU, on gloo)
        self._via_host = False

    def __reduce__(self) -> tuple[Any, ...]:
        return Collective, (self.rendezvous, self.rank), {"local_data": self.local_data}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.local_data = bool(state["local_data"])

    def part(self, rows: int) -> slice:
        """This rank's rows of a minibatch of ``rows``: consecutive, the first ``rows % size``
        ranks one row more (possibly none)."""
        base, extra = divmod(rows, self.size)
        start = self.rank * base + min(self.rank, extra)
        return slice(start, start + base + (1 if self.rank < extra else 0))

    def shard(self, minibatch: SampleBatch | TensorBatch,
              normalize_advantages: bool) -> tuple[SampleBatch | TensorBatch | None, float]:
        """This rank's rows of ``minibatch`` (a `SampleBatch`, or a `TensorBatch` gathered on the
        learner's device) (`part`; None when it has none) and their share of
        it, with the advantages already standardized over the whole minibatch when
        ``normalize_advantages`` (as one learner would: the loss is then taken without it).
        With ``local_data``: the whole minibatch (standardized by itself), share ``1 / size``."""
        if self.local_data:  # all of it is this rank's: one of ``size`` equal shares
            if normalize_advantages:
                minibatch = minibatch.with_columns(advantages=_standardized(minibatch.advantages))
            return minibatch, 1.0 / self.size
        rows = self.part(len(minibatch))
        if rows.stop == rows.start:
            return None, 0.0
        part = minibatch.slice(rows.start, rows.stop)
        if normalize_advantages:
            part = part.with_columns(advantages=_standardized(minibatch.advantages)[rows])
        return part, (rows.stop - rows.start) / len(minibatch)

    def _connect(self, device: torch.device) -> Any:
        r = self.rendezvous
        timeout = datetime.timedelta(seconds=r.timeout_s)
        try:
            store = TCPStore(r.host, r.port, is_master=False, timeout=timeout)
            scoped = PrefixStore(f"rxrl-learners-{r.port}", store)
            if device.type == "cuda":
                if backend_for(self._gpus(scoped, device)) == "nccl":
                    return dist.ProcessGroupNCCL(scoped, self.rank, self.size,
                                                 dist.ProcessGroupNCCL.Options())
                self._via_host = True
            return dist.ProcessGroupGloo(scoped, self.rank, self.size, timeout)
        except (RuntimeError, dist.DistStoreError) as e:
            raise RuntimeError(f"learner group rank {self.rank} of {self.size}: could not meet the "
                               f"others at {r.host}:{r.port} within {r.timeout_s:g} s: {e}") from e

    def _gpus(self, store: Any, device: torch.device) -> list[str]:
        """Every rank's GPU (its UUID), exchanged through the rendezvous store."""
        props = torch.cuda.get_device_properties(device)
        gpu = getattr(props, "uuid", f"{_node_ip()}-{props.name}-{device.index}")
        store.set(f"gpu-{self.rank}", str(gpu))
        return [store.get(f"gpu-{r}").decode() for r in range(self.size)]

    def allreduce_(self, tensor: torch.Tensor) -> None:
        """Replace ``tensor`` by its sum over the group's ranks (every rank gets the same bits)."""
        if self.size == 1:
            return
        if self._group is None:
            self._group = self._connect(tensor.device)
        try:
            if tensor.is_cuda and self._via_host:  # ranks share a GPU: gloo sums in host memory
                summed = tensor.cpu()
                self._group.allreduce([summed]).wait()
                tensor.copy_(summed)
                return
            self._group.allreduce([tensor]).wait()
        except RuntimeError as e:
            raise RuntimeError(f"learner group rank {self.rank} of {self.size}: the gradient "
                               f"allreduce failed (a rank stopped or timed out "
                               f"after {self.rendezvous.timeout_s:g} s): {e}") from e

    def sum_gradients_(self, parameters: Sequence[torch.Tensor], stats: Sequence[float]) -> list[float]:
        """Sum the ``parameters``' gradients (a missing one counts as zeros; afterwards every
        parameter has one) and the float ``stats`` over the group, in one allreduce; returns
        the summed stats."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        device = grads[0].device if grads else torch.device("cpu")
        flat = torch.cat([g.reshape(-1) for g in grads]
                         + [torch.tensor(list(stats), dtype=grads[0].dtype if grads else torch.float32,
                                         device=device)])
        self.allreduce_(flat)
        offset = 0
        for p, g in zip(parameters, grads, strict=True):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n
        return [float(v) for v in flat[offset:].tolist()]


def _standardized(advantages: Any) -> Any:
    """``normalized`` advantages, of the same kind (numpy array or tensor) as given."""
    if isinstance(advantages, torch.Tensor):
        return normalized(advantages)
    return normalized(torch.as_tensor(advantages)).numpy()


def backend_for(gpus: Sequence[str]) -> str:
    """The collective backend of CUDA ranks on ``gpus`` (one id per rank): ``"nccl"`` when each
    has a GPU of its own, ``"gloo"`` (the sum then goes through host memory) when two share
    one — NCCL refuses that ("Duplicate GPU detected")."""
    return "nccl" if len(set(gpus)) == len(gpus) else "gloo"


__all__ = ["Collective", "Rendezvous", "backend_for"]
