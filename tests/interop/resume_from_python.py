"""A PyTorch run saved as Python Accelerate's save_state saves it (model.safetensors, or
pytorch_model.bin without safe_serialization; optimizer.bin, scheduler.bin and random_states_0.pkl
through torch.save, with Python's random and NumPy states in it), resumed through the C API's
acc_load_state, goes on exactly as the Python run itself: the same rates, losses and weights, bit
for bit, over steps whose dropout draws from the restored generator.
The reverse of resume_in_python.py, over the same optimizers and schedules.

    resume_from_python.py BUILD_DIR WORK_DIR
"""
import ctypes
import json
import os
import random
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resume_in_python import (OPTIMIZERS, api, SAVED_AFTER, SCHEDULES, STEPS, c_step, c_weights,  # noqa: E402
                              compare_runs, prepare_c, python_step, python_weights)


def write_safetensors(path, tensors):
    """As safetensors' save_file with Accelerate's metadata: a length, a JSON header, the data."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, tensor in tensors.items():
        data = tensor.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def save_like_accelerate(folder, model, opt, sched, safe_serialization):
    """What Python Accelerate's save_state writes for one model, optimizer and scheduler on one
    process (its save_accelerator_state)."""
    os.makedirs(folder, exist_ok=True)
    if safe_serialization:
        write_safetensors(os.path.join(folder, "model.safetensors"), model.state_dict())
    else:
        torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
    torch.save(opt.state_dict(), os.path.join(folder, "optimizer.bin"))
    torch.save(sched.state_dict(), os.path.join(folder, "scheduler.bin"))
    states = {"step": 0, "random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
              "torch_manual_seed": torch.get_rng_state(), "torch_cuda_manual_seed": torch.cuda.get_rng_state_all()}
    torch.save(states, os.path.join(folder, "random_states_0.pkl"))


def load_any(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def plain_data(value):
    """Whether torch.load(weights_only=True), as Accelerate loads, takes `value`: no functions,
    methods or weak references (torch 1.13's OneCycleLR keeps a bound method in its state, its
    CyclicLR a weak reference; torch 2 keeps names of them)."""
    if isinstance(value, dict):
        return all(plain_data(k) and plain_data(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(plain_data(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, torch.Tensor))


def run_python(model_path, checkpoint, optimizer, schedule, seed, safe_serialization, frozen=None):
    """STEPS steps of PyTorch after Accelerate's set_seed, saving after SAVED_AFTER; the parameter
    named `frozen` frozen, and listed in the optimizer all the same (model.parameters())."""
    _, optimizer_class, arguments = OPTIMIZERS[optimizer]
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = torch.jit.load(model_path)
    model.train()
    for name, parameter in model.named_parameters():
        if name == frozen:
            parameter.requires_grad_(False)
    opt = optimizer_class(model.parameters(), **arguments)
    sched = SCHEDULES[schedule][2](opt)
    record = []
    for step in range(STEPS):
        if step == SAVED_AFTER:
            save_like_accelerate(checkpoint, model, opt, sched, safe_serialization)
        record.append(python_step(model, opt, sched, step))
    return record[SAVED_AFTER:], python_weights(model)


def resume_in_c(lib, model_path, checkpoint, optimizer, schedule, frozen=None):
    """A C program that prepares the same objects, loads the folder and trains on."""
    acc, model, opt, sched = prepare_c(lib, model_path, optimizer, schedule, {}, frozen)
    lib.acc_set_seed(ctypes.c_uint64(7))  # what the program's own seed left: load_state replaces it
    lib.acc_load_state(acc, checkpoint.encode(), None)
    record = [c_step(lib, acc, model, opt, sched, step) for step in range(SAVED_AFTER, STEPS)]
    return record, c_weights(lib, model)


def refuses_other_schedules(lib, model_path, work):
    """A program whose schedule stands elsewhere than the saved one (a CosineAnnealingWarmRestarts of
    another T_0, a sequence with another milestone) is refused naming the field, and the run stays
    where it was: 0 when so."""
    cases = [  # the folder (saved after 3 steps), the program's schedule, what the refusal names
        ("python_adamw_warm_restarts", ("cosine_annealing_warm_restarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001}),
         "'T_0' is 2"),
        ("python_adamw_warmup_then_cosine",
         ("linear_lr", {"start_factor": 0.25, "total_iters": 2}, None,
          [("then", 3, "cosine_annealing", {"T_max": 4, "eta_min": 0.001})]),
         "_milestones' is [2]"),
        # Settings PyTorch's load_state_dict would take from the file (a schedule here is the program's).
        ("python_sgd_step", ("step", {"step_size": 2, "gamma": 0.25}), "'gamma' is 0.5"),
        ("python_sgd_multistep", ("multistep", {"milestones": "2,6", "gamma": 0.5}), "'milestones' is [2, 5]"),
        ("python_adamw_warmup_then_cosine",
         ("linear_lr", {"start_factor": 0.25, "total_iters": 2}, None,
          [("then", 2, "cosine_annealing", {"T_max": 5, "eta_min": 0.001})]),
         "_schedulers[1].T_max' is 4"),
        ("python_adamw_warmup_then_warm_restarts",
         ("linear_lr", {"start_factor": 0.25, "total_iters": 2}, None,
          [("then", 2, "cosine_annealing_warm_restarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001})]),
         "_schedulers[1].T_0' is 2")]
    failures = 0
    for folder, schedule, needle in cases:
        SCHEDULES["other"] = schedule if len(schedule) > 2 else schedule + (None,)
        optimizer = folder.split("_")[1]  # (python_<optimizer>_<schedule>)
        acc, model, opt, sched = prepare_c(lib, model_path, optimizer, "other", {})
        before = c_weights(lib, model)
        try:
            lib.acc_load_state(acc, os.path.join(work, folder).encode(), None)
            message = None
        except api.Error as error:
            message = str(error)
        kept = all(torch.equal(before[n], t) for n, t in c_weights(lib, model).items())
        if message and needle in message and "scheduler.bin" in message and kept:
            print(f"{folder} into a schedule standing elsewhere: refused, naming it")
            continue
        print(f"{folder} into a schedule standing elsewhere: {message or 'not refused'}, weights kept: {kept}")
        failures += 1
    return 1 if failures else 0


def takes_over_with_a_frozen_parameter(lib, model_path, work):
    """A Python optimizer made over model.parameters() lists a frozen parameter too (PEFT's examples
    do so): its numbering is taken with the model's frozen parameters in their places, and the run
    goes on bit for bit. 0 when so."""
    frozen, checkpoint = "net.0.bias", os.path.join(work, "python_adamw_linear_frozen")
    shutil.rmtree(checkpoint, ignore_errors=True)
    theirs = run_python(model_path, checkpoint, "adamw", "linear", 5, True, frozen)
    ours = resume_in_c(lib, model_path, checkpoint, "adamw", "linear", frozen)
    same = ours[0] == theirs[0] and all(torch.equal(ours[1][n], theirs[1][n]) for n in theirs[1])
    print(f"adamw over model.parameters() with {frozen} frozen: {'bit-identical' if same else 'DIFFERS'}")
    return 0 if same else 1


def main(build, work):
    def run_pair(lib, model_path, run, optimizer, schedule):
        checkpoint = os.path.join(work, f"python_{optimizer}_{schedule}")
        shutil.rmtree(checkpoint, ignore_errors=True)  # Accelerate's save_state keeps what a folder held
        # Every other run's weights as save_state(safe_serialization=False) writes them.
        try:
            theirs = run_python(model_path, checkpoint, optimizer, schedule, 42 + run, run % 2 == 0)
        except TypeError as error:  # torch 1.x's CyclicLR keeps a weak reference, which pickle refuses
            return f"not run: torch {torch.__version__} cannot save this scheduler ({error})"
        try:
            return resume_in_c(lib, model_path, checkpoint, optimizer, schedule), theirs
        except api.Error as error:
            # A state that holds Python objects (torch 1.x's OneCycleLR and CyclicLR, SWALR's function)
            # may be refused with the reason, as Accelerate's own weights_only load refuses it; a
            # state of plain data may not.
            if plain_data(load_any(os.path.join(checkpoint, "scheduler.bin"))) or "scheduler.bin" not in str(error):
                raise
            return f"refused, as Accelerate's weights_only load refuses it ({error})"
    status = compare_runs(build, work, run_pair)
    lib, model_path = api.load(build), os.path.join(work, "mlp.pt")
    return status | refuses_other_schedules(lib, model_path, work) | takes_over_with_a_frozen_parameter(
        lib, model_path, work)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
