"""Reads a trackio project database as trackio reads it, and prints what it holds as one JSON object.

Usage: read_trackio.py DB_FILE
       read_trackio.py --make-legacy DB_FILE   (writes an empty database of trackio before run ids)
       read_trackio.py --hold-lock LOCK_FILE SECONDS   (holds trackio's project lock, as a writer does)
       read_trackio.py --image MEDIA_DIR FILE_PATH   (a trackio.Image's file: its size and mode, by Pillow)

The reading follows trackio's SQLiteStorage (Python's sqlite3): runs as get_runs lists them (run id and
name, in order of their first row's time), each run's rows as get_logs returns them (ordered by time,
then row id; the metrics' JSON parsed, top-level "NaN"/"Infinity"/"-Infinity" turned back into
numbers, which are printed here as those strings again), its configuration as get_run_config reads it,
and the tables' columns. Where the trackio package itself is installed, its SQLiteStorage reads the
same database too ("trackio" in the output; TRACKIO_DIR is set to the database's folder). Exits 1,
saying why, where trackio could not read a row (a timestamp that is not ISO 8601, a metrics value
that is not a JSON object, a step that is not an integer).
"""
import datetime
import fcntl
import json
import math
import os
import sqlite3
import sys
import time


def deserialize(metrics):
    special = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
    return {k: special.get(v, v) if isinstance(v, str) else v for k, v in metrics.items()}


def printable(value):
    """JSON has no NaN or infinities: printed as trackio stores them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def columns(conn, table):
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def read(db_file):
    conn = sqlite3.connect(db_file)
    conn.row_factory = sqlite3.Row
    out = {"metrics_columns": columns(conn, "metrics"), "configs_columns": columns(conn, "configs")}
    run_ids = "run_id" in out["metrics_columns"]
    key = "run_id" if run_ids else "run_name"
    runs = []
    query = (
        "SELECT run_id, run_name, MIN(timestamp) AS created_at FROM metrics GROUP BY run_id, run_name "
        "ORDER BY created_at ASC"
        if run_ids
        else "SELECT run_name, MIN(timestamp) AS created_at FROM metrics GROUP BY run_name ORDER BY created_at ASC"
    )
    for row in conn.execute(query):
        run_id = row["run_id"] if run_ids else row["run_name"]
        run = {"id": run_id, "name": row["run_name"], "logs": []}
        for log in conn.execute(
            f"SELECT timestamp, step, metrics, log_id FROM metrics WHERE {key} = ? ORDER BY timestamp, id", (run_id,)
        ):
            datetime.datetime.fromisoformat(log["timestamp"])  # as the dashboard parses it
            if not isinstance(log["step"], int):
                sys.exit(f"row step {log['step']!r} is not an integer")
            metrics = json.loads(log["metrics"])
            if not isinstance(metrics, dict):
                sys.exit(f"row metrics {log['metrics']!r} is not a JSON object")
            run["logs"].append(
                {"step": log["step"], "timestamp": log["timestamp"], "log_id": log["log_id"],
                 "metrics": printable(deserialize(metrics))}
            )
        config_key = "run_id" if "run_id" in out["configs_columns"] else "run_name"
        config = conn.execute(f"SELECT config FROM configs WHERE {config_key} = ?", (run_id,)).fetchone()
        run["config"] = printable(deserialize(json.loads(config["config"]))) if config else None
        runs.append(run)
    out["runs"] = runs
    out["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    try:
        out["trackio"] = read_with_trackio(db_file)
    except ImportError:
        pass
    return out


def read_with_trackio(db_file):
    os.environ["TRACKIO_DIR"] = os.path.dirname(os.path.abspath(db_file))
    from trackio.sqlite_storage import SQLiteStorage

    project = os.path.basename(db_file)[: -len(".db")]
    runs = []
    for run in SQLiteStorage.get_run_records(project):
        logs = SQLiteStorage.get_logs(project, run_id=run["id"])
        runs.append({
            "id": run["id"], "name": run["name"],
            "steps": [log["step"] for log in logs],
            "config": printable(SQLiteStorage.get_run_config(project, run_id=run["id"])),
        })
    return runs


def make_legacy(db_file):
    conn = sqlite3.connect(db_file)
    conn.execute("CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp TEXT NOT NULL, "
                 "run_name TEXT NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL)")
    conn.execute("CREATE TABLE configs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_name TEXT NOT NULL, "
                 "config TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE(run_name))")
    conn.commit()
    conn.close()


def image(media_dir, file_path):
    """What the dashboard shows of a trackio.Image: the file at MEDIA_DIR / file_path, opened by Pillow."""
    from PIL import Image

    with Image.open(os.path.join(media_dir, file_path)) as picture:
        picture.load()
        return {"format": picture.format, "size": list(picture.size), "mode": picture.mode}


def hold_lock(lock_file, seconds):
    with open(lock_file, "w") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(float(seconds))


def main():
    if sys.argv[1] == "--make-legacy":
        make_legacy(sys.argv[2])
    elif sys.argv[1] == "--image":
        json.dump(image(sys.argv[2], sys.argv[3]), sys.stdout)
    elif sys.argv[1] == "--hold-lock":
        hold_lock(sys.argv[2], sys.argv[3])
    else:
        json.dump(read(sys.argv[1]), sys.stdout)


if __name__ == "__main__":
    main()
