"""Histograms as torch's SummaryWriter.add_histogram makes them, for the tests to compare with.

Runs torch's own make_histogram (taken out of torch/utils/tensorboard/summary.py, whose imports need
the tensorboard package, which Debian lacks) with numpy, on the bins add_histogram gives it:
SummaryWriter's default_bins for "tensorflow" (restated from writer.py: three lines), or a number.

usage: torch_histogram.py CASES.json
CASES.json: a list of {"values": [float.hex() texts], "bins": "tensorflow" or an int, "max_bins": int or null}
Prints a JSON list, per case either {"error": text} or the HistogramProto's fields, every float as
repr() text (exact, NaN included).
"""
import ast
import importlib.util
import json
import os
import sys

import numpy as np


def torch_make_histogram():
    torch_dir = os.path.dirname(importlib.util.find_spec("torch").origin)
    path = os.path.join(torch_dir, "utils", "tensorboard", "summary.py")
    text = open(path).read()
    node = next(n for n in ast.parse(text, path).body if isinstance(n, ast.FunctionDef) and n.name == "make_histogram")
    source = ast.get_source_segment(text, node)
    # torch 1.13 (Debian 12's) asks np.greater for int32 output, which numpy 1.24 refuses (torch 2.x
    # dropped the dtype): the same 0/1 flags either way.
    source = source.replace("np.greater(counts, 0, dtype=np.int32)", "np.greater(counts, 0)")
    namespace = {"np": np, "HistogramProto": lambda **fields: fields}
    exec(compile(source, path, "exec"), namespace)
    return namespace["make_histogram"]


def default_bins():
    v = 1e-12
    buckets, neg_buckets = [], []
    while v < 1e20:
        buckets.append(v)
        neg_buckets.append(-v)
        v *= 1.1
    return neg_buckets[::-1] + [0] + buckets


def main():
    make_histogram = torch_make_histogram()
    out = []
    for case in json.load(open(sys.argv[1])):
        values = np.array([float.fromhex(v) for v in case["values"]], dtype=float)
        bins = default_bins() if case["bins"] == "tensorflow" else int(case["bins"])
        try:
            h = make_histogram(values, bins, case.get("max_bins"))
        except ValueError as e:
            out.append({"error": str(e)})
            continue
        out.append({k: (repr(float(v)) if not isinstance(v, list) else [repr(float(x)) for x in v]) for k, v in h.items()})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
