"""Reads a DVCLive folder as DVC and DVCLive read it, and prints what it holds as one JSON object.

Usage: read_dvclive.py DIR DVC_YAML
DVC reads dvc.yaml and params.yaml as YAML (PyYAML's safe loader here; DVC's ruamel reads the same
values), metrics.json as strict JSON (as DVC's VS Code extension's JSON.parse does: DVCLive keeps
NaN and infinities as the strings str() makes, "nan", "inf"), and each plots/metrics/<name>.tsv as a
tab-separated table with a header (csv.DictReader, as DVCLive's own parse_metrics reads them back).
Exits 1, saying why, where a file is not what those readers take (a bare NaN or Infinity in
metrics.json, (a header other than "step\t<last part of the name>", a step that
is not an integer, rows of another width).
"""
import csv
import json
import os
import sys

import yaml


def strict(constant):
    sys.exit(f"metrics.json: {constant} is not JSON (DVCLive writes the string str() makes)")


def main():
    live_dir, dvc_yaml = sys.argv[1], sys.argv[2]
    out = {}
    if os.path.exists(dvc_yaml):
        with open(dvc_yaml, encoding="utf-8") as f:
            out["dvc.yaml"] = yaml.safe_load(f)
    params = os.path.join(live_dir, "params.yaml")
    if os.path.exists(params):
        with open(params, encoding="utf-8") as f:
            out["params"] = yaml.safe_load(f)
    metrics = os.path.join(live_dir, "metrics.json")
    if os.path.exists(metrics):
        with open(metrics, encoding="utf-8") as f:
            out["metrics"] = json.load(f, parse_constant=strict)
    tables = {}
    root = os.path.join(live_dir, "plots", "metrics")
    for folder, _, files in os.walk(root):
        for file in sorted(files):
            if not file.endswith(".tsv"):
                sys.exit(f"{file}: not a .tsv file in plots/metrics")
            path = os.path.join(folder, file)
            name = os.path.relpath(path, root)[: -len(".tsv")]
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f, delimiter="\t")
                if reader.fieldnames != ["step", os.path.basename(name)]:
                    sys.exit(f"{path}: header {reader.fieldnames}")
                rows = []
                for row in reader:
                    if None in row or len(row) != 2:
                        sys.exit(f"{path}: a row of another width: {row}")
                    rows.append([int(row["step"]), row[os.path.basename(name)]])
            tables[name] = rows
    out["tables"] = tables
    print(json.dumps(out, sort_keys=True))


main()
