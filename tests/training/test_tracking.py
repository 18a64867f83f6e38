"""The W&B and MLflow loggers, against the real libraries: W&B offline (its run files read
back record by record), MLflow's file store in the run directory (read with `MlflowClient`).

Nothing leaves the machine: W&B runs offline with every directory of its inside tmp_path and
its server address on a closed loopback port, and any socket this process opens to an address
off the machine fails the test.
"""

from __future__ import annotations

import csv
import importlib
import io
import ipaddress
import json
import math
import socket
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
import pytest
import wandb

from rxrl.training.checkpoint import Counters
from rxrl.training.loggers import LOGGERS, RunInfo, make_loggers
from rxrl.training.tracking import (
    MLFLOW_ID_FILE,
    WANDB_ID_FILE,
    MLflowLogger,
    WandbLogger,
    flatten,
    mlflow_name,
    require,
)
from rxrl.training.trainer import Trainer

#: W&B's generated protobuf classes (untyped: no stubs), for its protobuf major version
pb: Any = importlib.import_module("wandb.proto.wandb_internal_pb2")
CONFIG: dict[str, Any] = {"lr": 3e-4, "model": {"hidden": [64, 64], "activation": "tanh"},
                          "env": "CartPole-v1", "note": "x" * 10_000}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """W&B offline and silent, its files in tmp_path; MLflow on its default store; no
    connection off the machine."""
    home = tmp_path / "wandb-home"
    for var, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true",
                       "WANDB_DIR": str(home), "WANDB_CONFIG_DIR": str(home / "config"),
                       "WANDB_CACHE_DIR": str(home / "cache"), "WANDB_DATA_DIR": str(home / "data"),
                       "WANDB_BASE_URL": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(var, value)
    for var in ("WANDB_PROJECT", "WANDB_API_KEY", "WANDB_RUN_ID", "WANDB_RESUME",
                "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.delenv(var, raising=False)  # and unset again afterwards, if a test set it
    home.mkdir()
    connect = socket.socket.connect

    def loopback(host: str) -> bool:
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:  # a host name
            return False

    def local_only(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
            raise AssertionError(f"a test tried to reach {address}")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
    yield


# ---------------------------------------------------------------------------- readers


def read_wandb_file(path: Path) -> list[Any]:
    """The records of a W&B run file (``run-ID.wandb``): a LevelDB-style log, 32 KiB blocks of
    chunks (7-byte header: CRC, length, type), after a 7-byte ``:W&B`` file header. A file still
    being written gives its whole records so far."""
    data = path.read_bytes()
    if len(data) < 7:
        return []
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0)
    block, pos, pending, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if (length == 0 and kind == 0) or pos + 7 + length > len(data):
            break
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def finished_records(path: Path, timeout: float = 60.0) -> list[Any]:
    """The records of a W&B run file once its last (``exit``) record is on disk: W&B's service
    process may still be writing it when ``finish()`` returns."""
    deadline = time.monotonic() + timeout
    while True:
        records = read_wandb_file(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        assert time.monotonic() < deadline, f"{path} has no exit record after {timeout} s"
        time.sleep(0.05)


def wandb_sessions(run_dir: Path) -> list[tuple[str, list[dict[str, Any]], list[Any]]]:
    """Each offline W&B session in ``run_dir`` (oldest first): its run id, its history rows
    (W&B's own ``_`` columns left out) and all its records."""
    sessions = []
    for run_file in (run_dir / "wandb").glob("offline-run-*/run-*.wandb"):
        records = finished_records(run_file)
        [run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        rows = [{item.key or "/".join(item.nested_key): json.loads(item.value_json)
                 for item in r.history.item if not (item.key or item.nested_key[0]).startswith("_")}
                for r in records if r.WhichOneof("record_type") == "history"]
        sessions.append((run.start_time.ToNanoseconds(), run.run_id, rows, records))
    return [(run_id, rows, records) for _, run_id, rows, records in sorted(sessions)]


def read_csv(path: Path) -> list[dict[str, float]]:
    with path.open(newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def finite(row: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in row.items() if math.isfinite(v)}


def mlflow_client(run_dir: Path) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(tracking_uri="file:" + str((run_dir / "mlruns").resolve()))


def mlflow_history(client: mlflow.MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    """``key``'s (step, value) pairs in the order logged."""
    history = client.get_metric_history(run_id, mlflow_name(key))
    return [(m.step, m.value) for m in sorted(history, key=lambda m: m.timestamp)]


def synthetic(iteration: int, loss: float, ret: float = math.nan) -> dict[str, float]:
    return {"iteration": float(iteration), "env_steps_sampled": 1000.0 * iteration,
            "episode_return_mean": ret, "train/policy_loss": loss, "weird key: (a+b)": 1.5}


def write(logger: WandbLogger | MLflowLogger, rows: list[dict[str, float]]) -> None:
    try:
        for row in rows:
            logger.write(row, int(row["env_steps_sampled"]))
    finally:
        logger.close()


# ---------------------------------------------------------------------------- W&B


def test_wandb_logs_each_row_offline_against_env_steps(tmp_path: Path) -> None:
    out = tmp_path / "run-a"
    out.mkdir()
    logger = WandbLogger(RunInfo(out, "ppo", CONFIG))
    rows = [synthetic(1, 0.5), synthetic(2, 0.25, 10.0), synthetic(3, 0.125, 12.5)]
    write(logger, rows)
    run_id = (out / WANDB_ID_FILE).read_text().strip()
    assert logger.run_id == run_id
    [(session_id, logged, records)] = wandb_sessions(out)
    assert session_id == run_id
    assert logged == [finite(r) for r in rows]  # NaN left out
    assert isinstance(logged[0]["iteration"], int) and isinstance(logged[0]["env_steps_sampled"], int)
    [run_record] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (run_record.project, run_record.display_name) == ("rxrl", "run-a")
    config = {item.key: json.loads(item.value_json) for item in run_record.config.update}
    assert config["algo"] == "ppo"
    assert config["model"] == CONFIG["model"]
    metrics = [r.metric for r in records if r.WhichOneof("record_type") == "metric"]
    assert any(m.glob_name == "*" and m.step_metric == "env_steps_sampled" for m in metrics)
    assert wandb.run is None  # the logger's run was never the global one


def test_wandb_project_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "elsewhere")
    out = tmp_path / "run"
    out.mkdir()
    write(WandbLogger(RunInfo(out, "ppo", {})), [synthetic(1, 0.5)])
    [(_, _, records)] = wandb_sessions(out)
    assert [r.run.project for r in records if r.WhichOneof("record_type") == "run"] == ["elsewhere"]


def test_wandb_leaves_the_users_own_run_alone(tmp_path: Path) -> None:
    mine = wandb.init(project="mine", dir=str(tmp_path))  # the global run
    try:
        assert wandb.run is mine
        out = tmp_path / "run"
        out.mkdir()
        write(WandbLogger(RunInfo(out, "ppo", {})), [synthetic(1, 0.5), synthetic(2, 0.4)])
        assert wandb.run is mine
        mine.log({"still": 1.0})  # not finished by the logger
    finally:
        mine.finish()
    assert len(wandb_sessions(out)) == 1


def test_wandb_resume_in_place_continues_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    first = [synthetic(1, 0.5), synthetic(2, 0.4), synthetic(3, 0.3)]
    write(WandbLogger(RunInfo(out, "ppo", CONFIG)), first)
    run_id = (out / WANDB_ID_FILE).read_text().strip()
    # resumed from the checkpoint at iteration 2: iteration 3 is trained again, at the same steps
    again = [synthetic(3, 0.9), synthetic(4, 0.8)]
    second = WandbLogger(RunInfo(out, "ppo", CONFIG, resumed=Counters(iteration=2, env_steps_sampled=2000)))
    write(second, again)
    assert second.run_id == run_id == (out / WANDB_ID_FILE).read_text().strip()
    sessions = wandb_sessions(out)
    assert [s[0] for s in sessions] == [run_id, run_id]
    assert [s[1] for s in sessions] == [[finite(r) for r in first], [finite(r) for r in again]]
    # a new run in the same directory (not a resume) is a new W&B run
    third = WandbLogger(RunInfo(out, "ppo", CONFIG))
    write(third, [synthetic(1, 0.1)])
    assert third.run_id not in (None, run_id)
    assert (out / WANDB_ID_FILE).read_text().strip() == third.run_id


# ---------------------------------------------------------------------------- MLflow


def test_mlflow_logs_params_once_and_metrics_at_env_steps(tmp_path: Path) -> None:
    out = tmp_path / "run-a"
    out.mkdir()
    logger = MLflowLogger(RunInfo(out, "ppo", CONFIG))
    assert logger.tracking_uri == "file:" + str((out / "mlruns").resolve())
    rows = [synthetic(1, 0.5), synthetic(2, 0.25, 10.0), synthetic(3, 0.125, 12.5)]
    write(logger, rows)
    run_id = (out / MLFLOW_ID_FILE).read_text().strip()
    assert logger.run_id == run_id
    client = mlflow_client(out)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "run-a"
    assert client.get_experiment(run.info.experiment_id).name == "rxrl"
    params = run.data.params
    assert params["algo"] == "ppo"
    assert params["lr"] == "0.0003"
    assert params["model.hidden"] == "[64, 64]" and params["model.activation"] == "tanh"
    assert params["note"] == "x" * 6000  # MLflow's longest param value
    for key in rows[0]:
        assert mlflow_history(client, run_id, key) == [
            (int(r["env_steps_sampled"]), r[key]) for r in rows if math.isfinite(r[key])]
    assert set(run.data.metrics) == {mlflow_name(k) for k in rows[0]}
    assert mlflow.active_run() is None


def test_mlflow_uri_and_experiment_from_the_environment(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "elsewhere"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:" + str(store))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "exp")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a file store the user chose
    out = tmp_path / "run"
    out.mkdir()
    write(MLflowLogger(RunInfo(out, "ppo", {})), [synthetic(1, 0.5)])
    assert not (out / "mlruns").exists()
    client = mlflow.MlflowClient(tracking_uri="file:" + str(store))
    run = client.get_run((out / MLFLOW_ID_FILE).read_text().strip())
    assert client.get_experiment(run.info.experiment_id).name == "exp"


def test_two_mlflow_runs_in_one_process_do_not_clash(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    la, lb = MLflowLogger(RunInfo(a, "ppo", {"x": 1})), MLflowLogger(RunInfo(b, "sac", {"x": 2}))
    for i in (1, 2):
        la.write(synthetic(i, 0.1 * i), 1000 * i)
        lb.write(synthetic(i, 0.2 * i), 1000 * i)
    la.close()
    assert mlflow_client(b).get_run(str(lb.run_id)).info.status == "RUNNING"
    lb.close()
    assert la.run_id != lb.run_id
    assert mlflow_history(mlflow_client(a), str(la.run_id), "train/policy_loss") == [(1000, 0.1), (2000, 0.2)]
    assert mlflow_history(mlflow_client(b), str(lb.run_id), "train/policy_loss") == [(1000, 0.2), (2000, 0.4)]
    assert mlflow_client(b).get_run(str(lb.run_id)).data.params == {"algo": "sac", "x": "2"}


def test_mlflow_resume_in_place_continues_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    first = [synthetic(1, 0.5), synthetic(2, 0.4), synthetic(3, 0.3)]
    write(MLflowLogger(RunInfo(out, "ppo", CONFIG)), first)
    run_id = (out / MLFLOW_ID_FILE).read_text().strip()
    second = MLflowLogger(RunInfo(out, "ppo", CONFIG, resumed=Counters(iteration=2, env_steps_sampled=2000)))
    second.write(synthetic(3, 0.9), 3000)
    client = mlflow_client(out)
    assert second.run_id == run_id
    assert client.get_run(run_id).info.status == "RUNNING"
    second.write(synthetic(4, 0.8), 4000)
    second.close()
    assert (out / MLFLOW_ID_FILE).read_text().strip() == run_id
    # the first session's row at 3000 stays (MLflow deletes nothing); the one trained again follows
    assert mlflow_history(client, run_id, "train/policy_loss") == [
        (1000, 0.5), (2000, 0.4), (3000, 0.3), (3000, 0.9), (4000, 0.8)]
    assert client.get_run(run_id).info.status == "FINISHED"
    assert len(client.search_runs([client.get_run(run_id).info.experiment_id])) == 1
    # resumed in place, but the id names no run here: a new run, said so
    (out / MLFLOW_ID_FILE).write_text("0" * 32 + "\n")
    stream = io.StringIO()
    third = MLflowLogger(RunInfo(out, "ppo", CONFIG, resumed=Counters(iteration=4, env_steps_sampled=4000),
                                 stream=stream))
    write(third, [synthetic(5, 0.7)])
    assert third.run_id not in (None, run_id, "0" * 32)
    assert "not found" in stream.getvalue()


def test_mlflow_names() -> None:
    assert mlflow_name("train/policy_loss") == "train/policy_loss"
    assert mlflow_name("episode_return_mean") == "episode_return_mean"
    assert mlflow_name("weird key: (a+b)") == "weird key_ _a_b_"
    assert mlflow_name("/a//b/./c/../d") == "a/b/c/d"
    assert mlflow_name("..") == "_"
    assert len(mlflow_name("k" * 400)) == 250
    assert flatten({"a": {"b": 1, "c": {"d": [1]}}, "e": {}, "f": None}) == {
        "a.b": "1", "a.c.d": "[1]", "e": "{}", "f": "None"}


def test_mlflow_keeps_columns_apart_that_sanitize_alike(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    logger = MLflowLogger(RunInfo(out, "ppo", {}))
    write(logger, [{"env_steps_sampled": 1000.0, "a:b": 1.0, "a(b": 2.0}])
    metrics = mlflow_client(out).get_run(str(logger.run_id)).data.metrics
    assert metrics == {"env_steps_sampled": 1000.0, "a_b": 1.0, "a_b_2": 2.0}


# ---------------------------------------------------------------------------- through a run


def test_a_training_run_logs_the_same_rows_to_csv_wandb_and_mlflow(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = Trainer("ppo", out, backend="reference", steps=3000, settings={"num_workers": 1},
                     loggers=["csv", "wandb", "mlflow"], handle_signals=False).run()
    assert result.status == "completed"
    rows = read_csv(out / "metrics.csv")
    assert len(rows) >= 2
    wandb_id = (out / WANDB_ID_FILE).read_text().strip()
    [(session_id, logged, _)] = wandb_sessions(out)
    assert session_id == wandb_id
    assert logged == [finite(r) for r in rows]
    mlflow_id = (out / MLFLOW_ID_FILE).read_text().strip()
    client = mlflow_client(out)
    assert client.get_run(mlflow_id).info.status == "FINISHED"
    for key in rows[0]:
        assert mlflow_history(client, mlflow_id, key) == [
            (int(r["env_steps_sampled"]), r[key]) for r in rows if math.isfinite(r[key])], key

    # resumed in place: the same W&B and MLflow runs go on
    resumed = Trainer("ppo", resume=out, backend="reference", steps=5000,
                      loggers=["csv", "wandb", "mlflow"], handle_signals=False).run()
    assert resumed.status == "completed"
    rows_after = read_csv(out / "metrics.csv")
    assert len(rows_after) > len(rows) and rows_after[:len(rows)] == rows
    assert (out / WANDB_ID_FILE).read_text().strip() == wandb_id
    assert (out / MLFLOW_ID_FILE).read_text().strip() == mlflow_id
    sessions = wandb_sessions(out)
    assert [s[0] for s in sessions] == [wandb_id, wandb_id]
    assert sessions[1][1] == [finite(r) for r in rows_after[len(rows):]]
    for key in rows_after[0]:
        assert mlflow_history(client, mlflow_id, key) == [
            (int(r["env_steps_sampled"]), r[key]) for r in rows_after if math.isfinite(r[key])], key
    assert len(client.search_runs([client.get_run(mlflow_id).info.experiment_id])) == 1


# ---------------------------------------------------------------------------- missing libraries


@pytest.mark.parametrize("name", ["wandb", "mlflow"])
def test_a_missing_library_is_one_line_naming_the_extra(name: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, name, None)
    message = f'the {name} logger needs {name}: pip install -e ".[{name}]"'
    out = tmp_path / "run"
    out.mkdir()
    info = RunInfo(out, "ppo", {})
    with pytest.raises(ImportError) as raised:
        require(name)
    assert str(raised.value) == message
    for make in (lambda: LOGGERS[name](info), lambda: make_loggers(["csv", name], info),
                 lambda: (WandbLogger if name == "wandb" else MLflowLogger)(info)):
        with pytest.raises(ImportError) as raised:
            make()
        assert str(raised.value) == message
        assert raised.value.__cause__ is None and "\n" not in message
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("name", ["wandb", "mlflow"])
def test_require_passes_when_installed(name: str) -> None:
    require(name)
