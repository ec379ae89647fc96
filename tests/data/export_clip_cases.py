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


def main(out_dir):
    torch.manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    cases = []
    for scale in (0.01, 1.0, 30.0):
        for norm_type in (2.0, 1.0, 3.5, math.inf):
            for max_norm in (0.5, 1.0, 1000.0):
                grads = [torch.randn(shape) * scale for shape in shapes]
                params = [torch.nn.Parameter(torch.zeros(shape)) for shape in shapes]
                for p, g in zip(params, grads):
                    p.grad = g.clone()
                total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
                cases.append({
                    "norm_type": float(norm_type).hex(),
                    "max_norm": float(max_norm).hex(),
                    "shapes": [list(s) for s in shapes],
                    "grads": [hexes(g) for g in grads],
                    "clipped": [hexes(p.grad) for p in params],
                    "total_norm": float(total).hex(),
                })
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "clip_cases.json").write_text(json.dumps({"torch": torch.__version__, "cases": cases}))


if __name__ == "__main__":
    main(sys.argv[1])
