"""What the DDP fixtures (export_power_sgd_cases.py, export_ddp_graph_cases.py) share: each process's
batches, exact float text, and running one function per process on 2 and 3 Gloo processes."""
import json
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def hex_values(t):
    return [float(v).hex() for v in t.detach().flatten().tolist()]


def batch(step, rank, rows):
    """Process `rank`'s inputs (rows x 6) and class targets (3 classes) at `step`."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(rows, 6, generator=g), torch.randint(0, 3, (rows,), generator=g)


def recorded_inputs(world, steps, rows):
    return [[{"x": hex_values(batch(step, rank, rows)[0]), "y": batch(step, rank, rows)[1].tolist()}
             for rank in range(world)] for step in range(steps)]


def _worker(rank, world, store_path, run, args, out_path):
    # Without the JIT's graph optimisation every forward computes alike.
    torch._C._set_graph_executor_optimize(False)
    torch.set_num_threads(1)  # (and OMP_NUM_THREADS for every other thread: run_on_processes)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    Path(f"{out_path}.{rank}").write_text(json.dumps(run(rank, *args)))
    dist.destroy_process_group()


def run_on_processes(world, run, *args):
    """run(rank, *args) on `world` processes of one Gloo group; the JSON results, in rank order."""
    # One thread in every thread of the workers (OpenMP reads it when it starts, so it is set before
    # they do), as the C++ side's ranks run under CTest (OMP_NUM_THREADS=1): on some CPUs (an AMD
    # EPYC with AVX-512 here) products of PowerSGD's shapes round otherwise with another count.
    os.environ["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        store, results = os.path.join(tmp, "store"), os.path.join(tmp, "results")
        mp.spawn(_worker, args=(world, store, run, args, results), nprocs=world)
        return [json.loads(Path(f"{results}.{rank}").read_text()) for rank in range(world)]
