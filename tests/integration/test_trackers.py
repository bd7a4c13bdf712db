"""``tracking.trackers`` end to end: TensorBoard, W&B (offline) and MLflow (its file store in the
run directory) each read back with their own formats and clients: the run id as the run's name,
the tags, the recipe as configuration, the training curve and the final figures."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import clustertune as ct
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, read_jsonl, with_


def _wandb_records(path: Path) -> list[Any]:
    """The protobuf records of an offline W&B run file (``run-<id>.wandb``): a 7-byte header,
    then 32 KiB blocks of chunks (crc32, length, type: full / first / middle / last)."""
    from wandb.proto import wandb_internal_pb2

    raw, block, pos, out, part = path.read_bytes(), 32768, 7, [], b""
    assert raw[:4] == b":W&B"
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # the tail of a block too short for a chunk header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos:pos + 7])
        if kind == 0:
            break
        part += raw[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(part)
            out.append(rec)
            part = b""
    return out


def test_each_tracker_gets_the_run_its_name_tags_config_curve_and_final_figures(runs_root: Path) -> None:
    recipe = with_(TINY_CAUSAL, train={"max_steps": 8, "log_every": 4},
                   tracking={"trackers": ["tensorboard", "wandb", "mlflow"], "tags": ["smoke", "tiny"]})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    losses = {r["step"]: r["loss"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"}
    assert sorted(losses) == [4, 8]

    # TensorBoard: its own event reader.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run.paths.trackers / "clustertune"))
    events.Reload()
    tb = {e.step: e.value for e in events.Scalars("train/loss")}
    assert tb.keys() == losses.keys() and all(abs(tb[s] - losses[s]) < 1e-5 for s in tb)
    assert events.Scalars("final/steps")[0].value == 8

    # W&B offline: the run file's records.
    [wb_file] = list((run.paths.trackers / "wandb").glob("offline-run-*/run-*.wandb"))
    records = _wandb_records(wb_file)
    [wb_run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert wb_run.display_name == run.id and list(wb_run.tags) == ["smoke", "tiny"]
    config = {u.key: u.value_json for r in records if r.WhichOneof("record_type") == "config" for u in r.config.update}
    assert config["train.max_steps"] == "8" and config["name"] == '"tiny"'
    history = [{i.key or "/".join(i.nested_key): i.value_json for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    wb_loss = {int(h["_step"]): float(h["train/loss"]) for h in history if "train/loss" in h}
    assert wb_loss.keys() == losses.keys() and all(abs(wb_loss[s] - losses[s]) < 1e-5 for s in wb_loss)
    assert any("final/tokens_per_s" in h for h in history)

    # MLflow: its own client on the file store in the run directory.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(run.paths.trackers / "mlruns").resolve().as_uri())
    [ml] = client.search_runs([client.get_experiment_by_name("clustertune").experiment_id])
    assert ml.info.run_name == run.id
    assert ml.data.tags["clustertune.run_id"] == run.id and ml.data.tags["smoke"] == "true"
    assert ml.data.params["train.max_steps"] == "8"
    ml_loss = {m.step: m.value for m in client.get_metric_history(ml.info.run_id, "train/loss")}
    assert ml_loss.keys() == losses.keys()
    assert ml.data.metrics["final/steps"] == 8 and "final/eval_loss" in ml.data.metrics

    # A second run in the same process writes into its own directory, not the first one's.
    second = ct.run(ct.load_recipe(with_(recipe, name="again")), show_progress=False)
    assert (second.paths.trackers / "mlruns").is_dir()
    assert list((second.paths.trackers / "wandb").glob("offline-run-*/run-*.wandb"))
    [only] = client.search_runs([client.get_experiment_by_name("clustertune").experiment_id])
    assert only.info.run_name == run.id
