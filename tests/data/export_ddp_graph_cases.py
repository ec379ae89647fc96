"""Gradients that PyTorch's DistributedDataParallel gives where the autograd graph decides what it
reduces, for tests/dist/test_dist_ddp_graph.cpp to reproduce bit for bit on 2 and 3 processes (Gloo):

- find_unused_parameters with a model of two outputs whose loss reads only the first: the second
  head's parameters get no gradient, and DDP's output sink (_DDPSink) is what lets the Reducer
  finish and average the others; and with a layer the forward uses only where the batch's first
  value is positive, so the unused parameters change from step to step and from process to process
  (what find_unused_parameters is for: the Reducer then reports a graph that is not static);
- static_graph: the first averaging backward reduces at its end, a parameter the forward never uses
  is found then and never waited for, with and without find_unused_parameters, and with gradient
  accumulation (no_sync on the first micro-step of each window). There PyTorch's DDP itself fails
  (an internal assert, expect_autograd_hooks_): its sink queues the delayed allreduce in a no_sync
  backward too (1.13: every forward while its iteration count is 1; 2.x: the first forward of
  all), so this fixture runs the no_sync micro-steps on the module itself, which is what no_sync's
  forward computes, and the library queues it only from an averaging backward.

Every parameter's gradient is recorded on every process after each backward (null: none), then SGD
steps at each window's end.

Run with Debian's python3-torch: python3 export_ddp_graph_cases.py OUTPUT_DIR
"""
import contextlib
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from ddp_fixture import batch, hex_values, recorded_inputs, run_on_processes

STEPS = 6
ROWS = 4
CASES = [
    {"name": "find_unused_first_output", "model": "heads", "find_unused_parameters": True},
    {"name": "static_graph", "model": "joined", "static_graph": True},
    {"name": "static_graph_find_unused", "model": "joined", "static_graph": True, "find_unused_parameters": True},
    {"name": "static_graph_accumulate", "model": "joined", "static_graph": True, "accumulation": 2},
    {"name": "find_unused_changing", "model": "branching", "find_unused_parameters": True},
]
MODELS = {"heads": "ddp_graph_heads.pt", "joined": "ddp_graph_joined.pt", "branching": "ddp_graph_branching.pt"}


class Heads(torch.nn.Module):
    """Two outputs from one trunk, and a layer the forward never calls."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(6, 16)
        self.head = torch.nn.Linear(16, 3)
        self.aux = torch.nn.Linear(16, 2)
        self.spare = torch.nn.Linear(6, 4)

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return self.head(h), self.aux(h)


class Joined(Heads):
    """Both heads in one output (5 classes); the spare layer still unused."""

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return torch.cat([self.head(h), self.aux(h)], dim=1)


class Branching(torch.nn.Module):
    """A layer added in only where the batch's first value is positive."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(6, 16)
        self.head = torch.nn.Linear(16, 3)
        self.extra = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        out = self.head(h)
        if bool(x[0, 0] > 0):
            out = out + self.extra(h)
        return out


def run_case(case, rank, model_dir):
    model = torch.jit.load(os.path.join(model_dir, MODELS[case["model"]]))
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, find_unused_parameters=case.get("find_unused_parameters", False),
        static_graph=case.get("static_graph", False))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    accumulation = case.get("accumulation", 1)
    steps = []
    for step in range(STEPS):
        x, y = batch(step, rank, ROWS)
        window_end = (step + 1) % accumulation == 0
        with contextlib.nullcontext() if window_end else ddp.no_sync():
            out = ddp(x) if window_end or not case.get("static_graph") else model(x)
            logits = out[0] if isinstance(out, tuple) else out
            # Accelerate's backward divides the loss by the accumulation steps.
            (F.cross_entropy(logits, y) / accumulation).backward()
        steps.append({name: None if p.grad is None else hex_values(p.grad) for name, p in model.named_parameters()})
        if window_end:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return {"steps": steps}


def run_cases(rank, model_dir):
    return {case["name"]: run_case(case, rank, model_dir) for case in CASES}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.script(Heads()).save(str(out / MODELS["heads"]))
    torch.manual_seed(0)
    torch.jit.script(Joined()).save(str(out / MODELS["joined"]))
    torch.manual_seed(0)
    torch.jit.script(Branching()).save(str(out / MODELS["branching"]))
    document = {"models": MODELS, "steps": STEPS, "rows": ROWS, "cases": CASES, "runs": {}, "inputs": {}}
    for world in (2, 3):
        document["inputs"][str(world)] = recorded_inputs(world, STEPS, ROWS)
        document["runs"][str(world)] = run_on_processes(world, run_cases, str(out))
    (out / "ddp_graph_cases.json").write_text(json.dumps(document))


if __name__ == "__main__":
    main()
