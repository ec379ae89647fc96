"""Gradients that PyTorch's PowerSGD DDP communication hooks give, for tests/dist/test_dist_power_sgd.cpp
to reproduce bit for bit: a TorchScript network (matrices of three shapes, two alike, and biases; and
a wide one, whose gradients DDP reduces in two buckets) is
trained with DistributedDataParallel on 2 and on 3 processes (Gloo), its hook registered as
Accelerate registers it (PowerSGDState(None, **comm_state_option), fp16_compress_wrapper for
comm_wrapper "fp16"), and every parameter's gradient is recorded on every process after each
backward, then SGD steps. A case PyTorch cannot run here records the step that failed and why
(1.13 has no half-precision matmul on the CPU, which the fp16 wrapper needs). Also numpy's RandomState draws, which seed PowerSGD's projections.

PyTorch's batched_powerSGD_hook has failed since 1.12: its _orthogonalize asserts a batch of
matrices and is handed one matrix. Its cases here run that hook with the one matrix handed over as
a batch of one (a view: the same arithmetic), which is what the library does.

Run with Debian's python3-torch: python3 export_power_sgd_cases.py OUTPUT_DIR
"""
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as power_sgd

from ddp_fixture import batch, hex_values, recorded_inputs, run_on_processes

STEPS = 6
ROWS = 4
CASES = [
    {"name": "layerwise", "hook": "power_sgd", "state": {"start_powerSGD_iter": 2}},
    # Rank 3: the QR orthogonalisation; fc1 no longer worth compressing; fresh projections every step.
    {"name": "layerwise_rank3_cold", "hook": "power_sgd",
     "state": {"matrix_approximation_rank": 3, "start_powerSGD_iter": 2, "warm_start": False,
               "orthogonalization_epsilon": 1e-8, "random_seed": 7}},
    {"name": "layerwise_batched_shapes", "hook": "power_sgd",
     "state": {"start_powerSGD_iter": 3, "batch_tensors_with_same_shape": True, "min_compression_rate": 1.5,
               "use_error_feedback": False}},
    {"name": "layerwise_fp16_wrapper", "hook": "power_sgd", "wrapper": "fp16",
     "state": {"matrix_approximation_rank": 2, "start_powerSGD_iter": 2}},
    {"name": "batched", "hook": "batched_power_sgd", "state": {"start_powerSGD_iter": 2}},
    {"name": "batched_rank3_cold", "hook": "batched_power_sgd",
     "state": {"matrix_approximation_rank": 3, "start_powerSGD_iter": 2, "warm_start": False,
               "use_error_feedback": False, "random_seed": 123}},
    # 2.1 MiB of parameters: DDP's rebuild makes two buckets (1 MiB first), each compressed apart.
    {"name": "layerwise_two_buckets", "model": "wide", "hook": "power_sgd",
     "state": {"matrix_approximation_rank": 2, "start_powerSGD_iter": 2}},
    {"name": "batched_two_buckets", "model": "wide", "hook": "batched_power_sgd", "state": {"start_powerSGD_iter": 2}},
]
RANDINT_SEEDS = [0, 7, 123, 4294967295]
MODELS = {"net": "power_sgd_net.pt", "wide": "power_sgd_wide.pt"}


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, 512)
        self.fc4 = torch.nn.Linear(512, 3)

    def forward(self, x):
        return self.fc4(torch.tanh(self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.fc3 = torch.nn.Linear(16, 16)
        self.fc4 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc4(torch.tanh(self.fc3(torch.relu(self.fc2(torch.tanh(self.fc1(x)))))))


def recorded(t):
    """A gradient's exact values; a large one's as the CRC-32 of its float32 bytes (little-endian)."""
    t = t.detach().contiguous()
    if t.numel() <= 4096:
        return hex_values(t)
    return {"numel": t.numel(), "crc32": zlib.crc32(t.numpy().tobytes())}


def orthogonalize_one_or_batch(original):
    def orthogonalize(matrices, epsilon=0):
        original(matrices.unsqueeze(0) if matrices.dim() == 2 else matrices, epsilon)
    return orthogonalize


def one_bucket_at_a_time(hook):
    """PyTorch's hook, waited for before the next bucket's: its callbacks wait for their allreduces on
    Gloo's worker threads, so with two buckets in flight both threads wait and nothing runs (torch
    hangs). The same operations in the same order, so the same numbers."""
    def waited(state, bucket):
        done = torch.futures.Future()
        done.set_result(hook(state, bucket).wait())
        return done
    return waited


def run_case(case, rank, model_dir):
    model = torch.jit.load(os.path.join(model_dir, MODELS[case.get("model", "net")]))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    hook = getattr(power_sgd, "powerSGD_hook" if case["hook"] == "power_sgd" else "batched_powerSGD_hook")
    if case.get("wrapper") == "fp16":
        hook = default_hooks.fp16_compress_wrapper(hook)
    hook = one_bucket_at_a_time(hook)
    ddp.register_comm_hook(power_sgd.PowerSGDState(None, **case["state"]), hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = []
    for step in range(STEPS):
        x, y = batch(step, rank, ROWS)
        try:
            F.cross_entropy(ddp(x), y).backward()
        except RuntimeError as e:  # 1.13 has no CPU half-precision matmul for the fp16 wrapper's P and Q
            return {"steps": steps, "error": str(e).splitlines()[0]}
        steps.append({name: recorded(p.grad) for name, p in model.named_parameters()})
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {"steps": steps}


def run_cases(rank, model_dir):
    power_sgd._orthogonalize = orthogonalize_one_or_batch(power_sgd._orthogonalize)
    return {case["name"]: run_case(case, rank, model_dir) for case in CASES}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.script(Net()).save(str(out / MODELS["net"]))
    torch.jit.script(Wide()).save(str(out / MODELS["wide"]))
    document = {"models": MODELS, "steps": STEPS, "cases": CASES, "runs": {},
                "numpy_randint": {str(seed): [int(v) for v in
                                              (lambda r: [r.randint(1_000_000_000) for _ in range(5)])(
                                                  np.random.RandomState(seed))]
                                  for seed in RANDINT_SEEDS},
                "inputs": {}}
    for world in (2, 3):
        document["inputs"][str(world)] = recorded_inputs(world, STEPS, ROWS)
        document["runs"][str(world)] = run_on_processes(world, run_cases, str(out))
    (out / "power_sgd_cases.json").write_text(json.dumps(document))


if __name__ == "__main__":
    main()
