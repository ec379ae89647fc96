"""Reads an MLflow file store as MLflow's FileStore reads it, and prints what it found as JSON.

Used by tests/capi/test_tracking_mlflow.cpp on the store that log_with "mlflow" writes. The rules
restated here are those of mlflow/store/tracking/file_store.py: meta.yaml files loaded with PyYAML's
safe loader (experiment and run fields that Experiment / RunInfo need), a metric file's lines as
"<timestamp> <value> <step>" (2 or 3 fields), parameter and tag files read whole, names checked as
mlflow.utils.validation checks them. Where the mlflow package itself is installed, its MlflowClient
reads the same store and must agree.

usage: read_mlflow_store.py STORE_FOLDER
"""
import json
import os
import posixpath
import re
import sys

import yaml

NAME = re.compile(r"^[/\w.\- ]*$")
EXPERIMENT_KEYS = ("experiment_id", "name", "artifact_location", "lifecycle_stage", "creation_time",
                   "last_update_time")
RUN_KEYS = ("run_uuid", "run_id", "run_name", "experiment_id", "user_id", "status", "start_time", "end_time",
            "lifecycle_stage", "artifact_uri")
STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


def check_name(name):
    norm = posixpath.normpath(name)
    assert NAME.match(name), name
    assert not (norm != name or norm == "." or norm.startswith("..") or norm.startswith("/")), name


def meta(folder):
    with open(os.path.join(folder, "meta.yaml")) as f:
        return yaml.safe_load(f)


def files_under(folder):
    found = {}
    if not os.path.isdir(folder):
        return found
    for here, _, names in os.walk(folder):
        for name in names:
            key = os.path.relpath(os.path.join(here, name), folder)
            check_name(key)
            with open(os.path.join(here, name)) as f:
                found[key] = f.read()
    return found


def metric_history(text):
    history = []
    for line in text.splitlines():
        parts = line.strip().split(" ")
        assert len(parts) in (2, 3), line
        history.append([int(parts[0]), repr(float(parts[1])), int(parts[2]) if len(parts) == 3 else 0])
    return history


def read_store(root):
    experiments = {}
    for exp_id in sorted(os.listdir(root)):
        folder = os.path.join(root, exp_id)
        if exp_id == ".trash" or not os.path.isdir(folder):
            continue
        m = meta(folder)
        for key in EXPERIMENT_KEYS:
            assert key in m, (folder, key)
        assert str(m["experiment_id"]) == exp_id
        runs = {}
        for run_id in sorted(os.listdir(folder)):
            run_folder = os.path.join(folder, run_id)
            if run_id in ("tags", "datasets", "traces") or not os.path.isdir(run_folder):
                continue
            r = meta(run_folder)
            for key in RUN_KEYS:
                assert key in r, (run_folder, key)
            assert r["run_id"] == r["run_uuid"] == run_id and str(r["experiment_id"]) == exp_id
            assert isinstance(r["start_time"], int) and (r["end_time"] is None or isinstance(r["end_time"], int))
            runs[run_id] = {
                "run_name": r["run_name"],
                "status": STATUS[r["status"]],
                "user_id": r["user_id"],
                "artifact_uri": r["artifact_uri"],
                "ended": r["end_time"] is not None and r["end_time"] >= r["start_time"],
                "params": files_under(os.path.join(run_folder, "params")),
                "tags": files_under(os.path.join(run_folder, "tags")),
                "metrics": {k: metric_history(v) for k, v in files_under(os.path.join(run_folder, "metrics")).items()},
            }
        experiments[exp_id] = {
            "name": m["name"],
            "lifecycle_stage": m["lifecycle_stage"],
            "artifact_location": m["artifact_location"],
            "tags": files_under(os.path.join(folder, "tags")),
            "runs": runs,
        }
    return experiments


def read_with_mlflow(root, experiments):
    """The same store through MLflow's own client, where the package is installed: it must agree."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        return False
    client = MlflowClient(tracking_uri="file://" + os.path.abspath(root))
    for exp_id, experiment in experiments.items():
        assert client.get_experiment(exp_id).name == experiment["name"]
        for run_id, run in experiment["runs"].items():
            theirs = client.get_run(run_id)
            assert theirs.info.status == run["status"], (theirs.info.status, run["status"])
            assert theirs.info.run_name == run["run_name"]
            assert dict(theirs.data.params) == run["params"]
            for key, history in run["metrics"].items():
                got = [[m.timestamp, repr(m.value), m.step] for m in client.get_metric_history(run_id, key)]
                assert got == history, (key, got, history)
    return True


def main():
    root = sys.argv[1]
    experiments = read_store(root)
    mlflow_read = read_with_mlflow(root, experiments)
    json.dump({"experiments": experiments, "read_by_mlflow": mlflow_read}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
