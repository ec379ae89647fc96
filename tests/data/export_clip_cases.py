"""Gradients clipped by PyTorch's own torch.nn.utils.clip_grad_norm_, for tests/cpp/test_clip_grad.cpp
to reproduce bit for bit. Values are written as float.hex() strings (exact; 'inf' for infinity).

Run with Debian's python3-torch: python3 export_clip_cases.py OUTPUT_DIR
"""
import json
import math
import sys
from pathlib import Path

import torch


def hexes(tensor):
    return [float(v).hex() for v in tensor.flatten().tolist()]


def clip_case(grads, max_norm, norm_type):
    params = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    return {
        "norm_type": float(norm_type).hex(),
        "max_norm": float(max_norm).hex(),
        "shapes": [list(g.shape) for g in grads],
        "grads": [hexes(g) for g in grads],
        "clipped": [hexes(p.grad) for p in params],
        "total_norm": float(total).hex(),
    }


def main(out_dir):
    torch.manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    cases = []
    for scale in (0.01, 1.0, 30.0):
        for norm_type in (2.0, 1.0, 3.5, math.inf):
            for max_norm in (0.5, 1.0, 1000.0):
                cases.append(clip_case([torch.randn(shape) * scale for shape in shapes], max_norm, norm_type))
    # torch's edge values: max_norm inf (the norm, no clipping) and 0; norm types 0 (count of the
    # gradients that are not all zero), negative and -inf (the smallest magnitude); one zero gradient.
    for norm_type in (0.0, -1.0, -math.inf, 2.0):
        for max_norm in (math.inf, 0.0, 1.0):
            grads = [torch.randn(7, 5), torch.randn(3), torch.zeros(4)]
            cases.append(clip_case(grads, max_norm, norm_type))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "clip_cases.json").write_text(json.dumps({"torch": torch.__version__, "cases": cases}))


if __name__ == "__main__":
    main(sys.argv[1])
