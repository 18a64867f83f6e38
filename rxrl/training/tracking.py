"""Experiment trackers as loggers: Weights & Biases and MLflow (optional extras).

Both get every row `rxrl.training.loggers` writes, finite values only (a NaN, say the return
before the first episode ends, is left out rather than logged as a gap). Each keeps its
tracker's run id in the run directory (``wandb_id``, ``mlflow_id``): a run resumed in place
continues the same tracker run; a new run, or one resumed into a new directory, starts one.

Neither touches its library's global "active run": each works on the run object it made (W&B's
``reinit="create_new"``, MLflow's `MlflowClient` with explicit run ids), so two rxrl runs in
one process, or a user's own W&B/MLflow run around them, do not clash.

The libraries are imported when a logger is made (not when rxrl is), and a missing one is an
ImportError of one line naming the extra to install; `require` is that check without the
import, for checking a run's loggers before it starts.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import secrets
import string
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rxrl.training.loggers import COUNTS, RunInfo

if TYPE_CHECKING:
    import mlflow
    import wandb.sdk.wandb_run

#: logger name -> (the module it needs, the extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {"wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow")}
#: the file in the run directory that holds the W&B run id
WANDB_ID_FILE = "wandb_id"
#: the file in the run directory that holds the MLflow run id
MLFLOW_ID_FILE = "mlflow_id"


def _missing(logger: str) -> ImportError:
    module, extra = EXTRAS[logger]
    return ImportError(f'the {logger} logger needs {module}: pip install -e ".[{extra}]"')


def require(logger: str) -> None:
    """Raise the one-line ImportError if ``logger`` (``"wandb"`` or ``"mlflow"``) lacks its
    library; cheap (looks the package up, does not import it)."""
    module = EXTRAS[logger][0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a module without spec
        found = False
    if not found:
        raise _missing(logger)


def _import(logger: str, module: str) -> Any:
    require(logger)
    try:
        return importlib.import_module(module)
    except ImportError:
        raise _missing(logger) from None


def _finite(row: Mapping[str, float]) -> Iterator[tuple[str, float]]:
    for key, value in row.items():
        if math.isfinite(value):
            yield key, value


def _read_id(path: Path) -> str | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return text or None


def _write_id(path: Path, run_id: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(run_id + "\n")
    tmp.replace(path)


# ------------------------------------------------------------------------------ W&B


def _new_wandb_id() -> str:
    """A fresh run id as W&B makes them: 8 lowercase letters and digits."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


class WandbLogger:
    """Weights & Biases (``pip install -e ".[wandb]"``): one W&B run per rxrl run.

    ``wandb.init`` at the first row: project ``$WANDB_PROJECT`` (else ``rxrl``), the run
    directory's name, files under the run directory, config ``{"algo": ..., **config}``;
    ``WANDB_MODE`` and W&B's other variables apply as usual (``WANDB_MODE=offline``: nothing
    leaves the machine; ``wandb sync`` uploads later). Every metric is plotted against
    ``env_steps_sampled`` (logged as a column, not as W&B's step), so a run resumed in place,
    whose rows after the checkpoint are trained again at env steps already logged, keeps all
    its rows. `close` finishes the run.
    """

    def __init__(self, run: RunInfo) -> None:
        self.run = run
        self.id_file = run.out / WANDB_ID_FILE
        self._wandb = _import("wandb", "wandb")
        #: the W&B run id (None until the first row)
        self.run_id: str | None = None
        self._run: wandb.sdk.wandb_run.Run | None = None

    def _open(self) -> wandb.sdk.wandb_run.Run:
        previous = _read_id(self.id_file) if self.run.resumed is not None else None
        run_id = previous or _new_wandb_id()
        _write_id(self.id_file, run_id)
        wb_run: wandb.sdk.wandb_run.Run = self._wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "rxrl", name=self.run.name,
            dir=str(self.run.out), config={"algo": self.run.algo, **self.run.config},
            id=run_id, resume="allow", reinit="create_new")
        self.run_id = run_id
        wb_run.define_metric("env_steps_sampled")
        wb_run.define_metric("*", step_metric="env_steps_sampled")
        return wb_run

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Log the row's finite values (counts as integers) as one W&B history row."""
        if self._run is None:
            self._run = self._open()
        self._run.log({k: int(v) if k in COUNTS else v for k, v in _finite(row)})

    def close(self) -> None:
        """Finish the W&B run (if started)."""
        if self._run is not None:
            wb_run, self._run = self._run, None
            wb_run.finish()


# ------------------------------------------------------------------------------ MLflow

_BAD_NAME_CHARS = re.compile(r"[^\w./\- ]")


def mlflow_name(key: str) -> str:
    """``key`` as a name MLflow takes for a metric or a param: characters but alphanumerics,
    ``_ - . /`` and spaces become ``_``; empty, ``.`` and ``..`` path parts are dropped (a
    leading or doubled ``/``); at most 250 characters. ``train/policy_loss`` stays as it is."""
    name = _BAD_NAME_CHARS.sub("_", key)
    name = "/".join(part for part in name.split("/") if part not in ("", ".", ".."))
    return (name or "_")[:250]


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as ``{"a.b": "value"}``: nested mappings flattened with dots, every
    value stringified (``str``)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = str(value)
    return flat


def _param_value_limit() -> int:
    try:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH
    except ImportError:  # moved: the oldest limit MLflow had
        return 500
    return int(MAX_PARAM_VAL_LENGTH)


class MLflowLogger:
    """MLflow (``pip install -e ".[mlflow]"``): one MLflow run per rxrl run.

    Tracking URI ``$MLFLOW_TRACKING_URI``, else the file store ``mlruns/`` in the run
    directory (MLflow 3 refuses a file store unless ``MLFLOW_ALLOW_FILE_STORE`` is set: for
    this default the logger sets it to ``true`` if unset); experiment
    ``$MLFLOW_EXPERIMENT_NAME``, else ``rxrl`` (made if missing). A new run logs its algorithm
    and flattened config as params (values cut to MLflow's length limit); every row's finite
    values are metrics at ``step`` = env steps sampled, under `mlflow_name` names. Resumed in
    place it continues its MLflow run, whose history keeps the first session's rows after the
    checkpoint too (MLflow cannot delete them): at such a step the later value is the one
    trained again. `close` marks the run finished.
    """

    def __init__(self, run: RunInfo) -> None:
        self.run = run
        self.id_file = run.out / MLFLOW_ID_FILE
        _import("mlflow", "mlflow")
        env_uri = os.environ.get("MLFLOW_TRACKING_URI")
        if env_uri:
            self.tracking_uri = env_uri
        else:
            self.tracking_uri = "file:" + str((run.out / "mlruns").resolve())
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "rxrl"
        self.run_id: str | None = None
        self._client: mlflow.MlflowClient | None = None
        self._names: dict[str, str] = {}

    def _experiment_id(self, client: mlflow.MlflowClient) -> str:
        from mlflow.exceptions import MlflowException

        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(client.create_experiment(self.experiment))
        except MlflowException:  # made meanwhile by another process
            found = client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return str(found.experiment_id)

    def _resume(self, client: mlflow.MlflowClient) -> str | None:
        from mlflow.exceptions import MlflowException

        previous = _read_id(self.id_file) if self.run.resumed is not None else None
        if previous is None:
            return None
        try:
            client.get_run(previous)
        except MlflowException:
            print(f"resuming: MLflow run {previous} not found at {self.tracking_uri}; "
                  "starting a new one", file=self.run.stream)
            return None
        client.update_run(previous, status="RUNNING")
        return previous

    def _open(self) -> mlflow.MlflowClient:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        run_id = self._resume(client)
        if run_id is None:
            created = client.create_run(self._experiment_id(client), run_name=self.run.name)
            run_id = str(created.info.run_id)
            self._log_params(client, run_id)
        _write_id(self.id_file, run_id)
        self.run_id = run_id
        return client

    def _log_params(self, client: mlflow.MlflowClient, run_id: str) -> None:
        from mlflow.entities import Param

        limit = _param_value_limit()
        params: dict[str, str] = {}
        for key, value in flatten({"algo": self.run.algo, **self.run.config}).items():
            params.setdefault(mlflow_name(key), value[:limit])
        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow's most params in one batch
            client.log_batch(run_id, params=items[i:i + 100])

    def _name(self, key: str) -> str:
        name = self._names.get(key)
        if name is None:
            name = base = mlflow_name(key)
            taken = set(self._names.values())
            n = 1
            while name in taken:  # two columns made alike: keep them apart
                n += 1
                name = f"{base[:245]}_{n}"
            self._names[key] = name
        return name

    def write(self, row: Mapping[str, float], step: int) -> None:
        """Log the row's finite values as metrics at ``step``."""
        from mlflow.entities import Metric

        if self._client is None:
            self._client = self._open()
        assert self.run_id is not None
        now = int(time.time() * 1000)
        metrics = [Metric(self._name(k), float(v), now, step) for k, v in _finite(row)]
        for i in range(0, len(metrics), 1000):  # MLflow's most metrics in one batch
            self._client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def close(self) -> None:
        """Mark the MLflow run finished (if started)."""
        if self._client is not None:
            client, self._client = self._client, None
            assert self.run_id is not None
            client.set_terminated(self.run_id)


__all__ = ["EXTRAS", "MLFLOW_ID_FILE", "WANDB_ID_FILE", "MLflowLogger", "WandbLogger", "flatten",
           "mlflow_name", "require"]
