"""A run saved through the C API with python_state_files, resumed by PyTorch as Python Accelerate's
load_state resumes one (each file read by torch.load with weights_only=True, handed to
load_state_dict, the random states set), goes on exactly as the C run itself: the same rates,
losses and weights, bit for bit, over steps whose dropout draws from the restored generator.

    [LION_PYTORCH_SRC=<lion-pytorch checkout>] [TRANSFORMERS_SRC=<transformers checkout>] \
    resume_in_python.py BUILD_DIR WORK_DIR
"""
import ast
import ctypes
import json
import math
import os
import random
import sys

import numpy as np
import torch
from torch.optim import lr_scheduler as LR

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sidebyside"))
import acc_ctypes as api  # noqa: E402

SAVED_AFTER, STEPS = 3, 6
OPTIMIZERS = {  # the C API's options, then torch.optim's class and arguments
    "adamw": ({"lr": 0.01, "weight_decay": 0.05}, torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.05}),
    "sgd": ({"lr": 0.05, "momentum": 0.9, "nesterov": True}, torch.optim.SGD,
            {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
}
# Every other torch.optim algorithm, with its defaults (the C API's are PyTorch's).
for name, optimizer_class in (("adam", torch.optim.Adam), ("rmsprop", torch.optim.RMSprop),
                              ("adagrad", torch.optim.Adagrad), ("radam", torch.optim.RAdam),
                              ("nadam", torch.optim.NAdam), ("adamax", torch.optim.Adamax),
                              ("adadelta", torch.optim.Adadelta), ("rprop", torch.optim.Rprop),
                              ("asgd", torch.optim.ASGD)):
    OPTIMIZERS[name] = ({"lr": 0.01}, optimizer_class, {"lr": 0.01})
TORCH_OPTIMIZERS = list(OPTIMIZERS)
TORCH_2 = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 0)
# torch.optim's multi-tensor rules (keyed "<algorithm>_foreach"), whose arithmetic differs from the
# one-tensor rules' (NAdam's step sizes from mu_product as tensors), with weight decay; the library
# steps them where it is built against PyTorch 2.x, as the Python side here is then.
FOREACH_RUNS = []
if TORCH_2:
    for name, optimizer_class, schedule in (("nadam", torch.optim.NAdam, "linear"), ("radam", torch.optim.RAdam, "step"),
                                            ("adamax", torch.optim.Adamax, "linear"), ("asgd", torch.optim.ASGD, "step")):
        settings = {"lr": 0.01, "weight_decay": 0.01, "foreach": True}
        OPTIMIZERS[name + "_foreach"] = (settings, optimizer_class, settings)
        FOREACH_RUNS.append((name + "_foreach", schedule))


def package_class(variable, load):
    """A class of a package that is not in Debian, from the checkout the environment variable
    names (load(path) -> class), or None."""
    path = os.environ.get(variable)
    return load(path) if path else None


def lion_pytorch(path):
    sys.path.insert(0, path)
    from lion_pytorch import Lion
    return Lion


def transformers_adafactor(path):
    """transformers' Adafactor class alone, from its optimization.py, without importing transformers."""
    source_file = os.path.join(path, "src", "transformers", "optimization.py")
    with open(source_file) as f:
        source = f.read()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Adafactor")
    namespace = {"math": math, "torch": torch, "Optimizer": torch.optim.Optimizer}
    exec(compile(ast.Module(body=[node], type_ignores=[]), source_file, "exec"), namespace)
    return namespace["Adafactor"]


# Lion and Adafactor are written in lion-pytorch's and transformers' layouts: held to those
# packages' own classes where their checkouts are given (LION_PYTORCH_SRC, TRANSFORMERS_SRC).
PACKAGE_RUNS = []
LION = package_class("LION_PYTORCH_SRC", lion_pytorch)
if LION:
    OPTIMIZERS["lion"] = ({"lr": 1e-3, "weight_decay": 0.1, "beta1": 0.95, "beta2": 0.98}, LION,
                          {"lr": 1e-3, "weight_decay": 0.1, "betas": (0.95, 0.98)})
    PACKAGE_RUNS += [("lion", "linear"), ("lion", "one_cycle")]  # one_cycle moves lion's beta1
ADAFACTOR = package_class("TRANSFORMERS_SRC", transformers_adafactor)
if ADAFACTOR:
    settings = {"lr": 0.01, "beta1": 0.9, "weight_decay": 0.01, "relative_step": False}  # scaled by the RMS
    OPTIMIZERS["adafactor"] = (settings, ADAFACTOR, settings)
    PACKAGE_RUNS += [("adafactor", "linear")]

SCHEDULES = {  # the C API's schedule and options, then the torch scheduler over an optimizer
    "linear": ("linear", {"num_warmup_steps": 2, "num_training_steps": 10},
               lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup(2, 10))),
    "step": ("step", {"step_size": 2, "gamma": 0.5},
             lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)),
    "constant": ("constant", {}, lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)),
    # MultiStepLR keeps its milestones in a collections.Counter, which the C API's files leave out
    # (Python's program keeps its own) and reads from Python's.
    "multistep": ("multistep", {"milestones": "2,5", "gamma": 0.5},
                  lambda opt: torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5], gamma=0.5)),
    # Schedules whose Python state holds more than a step count and rates: a cycle's position
    # (restarting after the save), OneCycleLR's phases and the keys it writes into the optimizer's
    # groups, CyclicLR's settings (with the momentum it cycles), SWALR's swa_lr in the groups.
    "warm_restarts": ("cosine_annealing_warm_restarts", {"T_0": 2, "T_mult": 2, "eta_min": 0.001},
                      lambda opt: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                                                        eta_min=0.001)),
    "one_cycle": ("one_cycle", {"max_lr": 0.05, "total_steps": 10},
                  lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)),
    "one_cycle_three_phase": ("one_cycle", {"max_lr": 0.1, "total_steps": 8, "three_phase": True,
                                            "anneal_strategy": "linear"},
                              lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=8,
                                                                              three_phase=True,
                                                                              anneal_strategy="linear")),
    "cyclic": ("cyclic", {"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 2, "mode": "triangular2"},
               lambda opt: torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.001, max_lr=0.01, step_size_up=2,
                                                             mode="triangular2")),
    "swa": ("swa_lr", {"swa_lr": 0.02, "anneal_epochs": 4},
            lambda opt: torch.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=4)),
    # Sequences and chains (each part's state in Python's _schedulers), the fourth item the C API's
    # acc_scheduler_then / acc_scheduler_chain calls: saved after the milestone, and before it.
    "warmup_then_cosine": ("linear_lr", {"start_factor": 0.25, "total_iters": 2},
                           lambda opt: sequence(opt, [LR.LinearLR(opt, start_factor=0.25, total_iters=2),
                                                      LR.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)], [2]),
                           [("then", 2, "cosine_annealing", {"T_max": 4, "eta_min": 0.001})]),
    "warmup_then_linear_then_step": ("constant_lr", {"factor": 0.5, "total_iters": 5},
                                     lambda opt: sequence(opt, [LR.ConstantLR(opt, factor=0.5, total_iters=5),
                                                                LR.LambdaLR(opt, linear_warmup(0, 4)),
                                                                LR.StepLR(opt, step_size=1, gamma=0.5)], [4, 5]),
                                     [("then", 4, "linear", {"num_warmup_steps": 0, "num_training_steps": 4}),
                                      ("then", 5, "step", {"step_size": 1, "gamma": 0.5})]),
    "constant_chained_exponential": ("constant_lr", {"factor": 0.5, "total_iters": 4},
                                     lambda opt: LR.ChainedScheduler([LR.ConstantLR(opt, factor=0.5, total_iters=4),
                                                                      LR.ExponentialLR(opt, gamma=0.9)]),
                                     [("chain", "exponential", {"gamma": 0.9})]),
    "sequence_chained_exponential": ("linear_lr", {"start_factor": 0.5, "total_iters": 2},
                                     lambda opt: LR.ChainedScheduler([
                                         sequence(opt, [LR.LinearLR(opt, start_factor=0.5, total_iters=2),
                                                        LR.StepLR(opt, step_size=2, gamma=0.5)], [2]),
                                         LR.ExponentialLR(opt, gamma=0.9)]),
                                     [("then", 2, "step", {"step_size": 2, "gamma": 0.5}),
                                      ("chain", "exponential", {"gamma": 0.9})]),
    # Parts with state of their own: a warm restart's cycle at the part's own step (restarting after
    # the save; a later part still before its milestone), a one-cycle's phases and base rates (it
    # rewrites initial_lr) and group keys, a cyclic schedule's settings, SWALR's group key.
    "warmup_then_warm_restarts": ("linear_lr", {"start_factor": 0.25, "total_iters": 2},
                                  lambda opt: sequence(opt, [LR.LinearLR(opt, start_factor=0.25, total_iters=2),
                                                             LR.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                                                            eta_min=0.001)], [2]),
                                  [("then", 2, "cosine_annealing_warm_restarts",
                                    {"T_0": 2, "T_mult": 2, "eta_min": 0.001})]),
    "warm_restarts_then_step": ("cosine_annealing_warm_restarts", {"T_0": 2},
                                lambda opt: sequence(opt, [LR.CosineAnnealingWarmRestarts(opt, T_0=2),
                                                           LR.StepLR(opt, step_size=1, gamma=0.5)], [4]),
                                [("then", 4, "step", {"step_size": 1, "gamma": 0.5})]),
    "warm_restarts_chained_exponential": ("cosine_annealing_warm_restarts", {"T_0": 3, "eta_min": 0.001},
                                          lambda opt: LR.ChainedScheduler([
                                              LR.CosineAnnealingWarmRestarts(opt, T_0=3, eta_min=0.001),
                                              LR.ExponentialLR(opt, gamma=0.9)]),
                                          [("chain", "exponential", {"gamma": 0.9})]),
    "warmup_then_one_cycle": ("linear_lr", {"start_factor": 0.5, "total_iters": 2},
                              lambda opt: sequence(opt, [LR.LinearLR(opt, start_factor=0.5, total_iters=2),
                                                         LR.OneCycleLR(opt, max_lr=0.05, total_steps=6)], [2]),
                              [("then", 2, "one_cycle", {"max_lr": 0.05, "total_steps": 6})]),
    "warmup_then_cyclic": ("linear_lr", {"start_factor": 0.5, "total_iters": 2},
                           lambda opt: sequence(opt, [LR.LinearLR(opt, start_factor=0.5, total_iters=2),
                                                      LR.CyclicLR(opt, base_lr=0.001, max_lr=0.01, step_size_up=2)],
                                                [2]),
                           [("then", 2, "cyclic", {"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 2})]),
    "swa_then_constant": ("swa_lr", {"swa_lr": 0.02, "anneal_epochs": 4},
                          lambda opt: sequence(opt, [torch.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=4),
                                                     LR.ConstantLR(opt, factor=0.5, total_iters=2)], [2]),
                          [("then", 2, "constant_lr", {"factor": 0.5, "total_iters": 2})]),
}


def sequence(opt, schedulers, milestones):
    return LR.SequentialLR(opt, schedulers, milestones)


if TORCH_2:
    # A chain leading a sequence: PyTorch 2's SequentialLR steps a ChainedScheduler (1.x cannot).
    SCHEDULES["chain_then_step"] = (
        "constant_lr", {"factor": 0.5, "total_iters": 2},
        lambda opt: sequence(opt, [LR.ChainedScheduler([LR.ConstantLR(opt, factor=0.5, total_iters=2),
                                                        LR.ExponentialLR(opt, gamma=0.8)]),
                                   LR.StepLR(opt, step_size=1, gamma=0.5)], [4]),
        [("chain", "exponential", {"gamma": 0.8}), ("then", 4, "step", {"step_size": 1, "gamma": 0.5})])


def linear_warmup(warmup, total):
    """transformers' get_linear_schedule_with_warmup factor."""
    def factor(step):
        if step < warmup:
            return float(step) / float(max(1, warmup))
        return max(0.0, float(total - step) / float(max(1, total - warmup)))
    return factor


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.25),
                                       torch.nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


def read_safetensors(path):
    """model.safetensors' float32 tensors (the format: a length, a JSON header, the data)."""
    with open(path, "rb") as f:
        data = f.read()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + length + begin:8 + length + end])
        out[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(entry["shape"]).clone()
    return out


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)


def prepare_c(lib, model_path, optimizer, schedule, accelerator_options, frozen=None):
    """The C API's accelerator, model (the parameters named `frozen` frozen), optimizer and scheduler
    for a run, prepared."""
    options, _, _ = OPTIMIZERS[optimizer]
    name, settings, _, *more = SCHEDULES[schedule]
    acc = lib.new("acc_accelerator_create", lib.options(api.ACC_OPTIONS_ACCELERATOR, accelerator_options))
    model = lib.new("acc_model_load_torchscript", model_path.encode())
    if frozen:
        lib.acc_model_set_requires_grad(model, frozen.encode(), 0, None)
    opt = lib.new("acc_optimizer_create", model, optimizer.replace("_foreach", "").encode(),
                  lib.options(api.ACC_OPTIONS_OPTIMIZER, options))
    sched = lib.new("acc_scheduler_create", opt, name.encode(), lib.options(api.ACC_OPTIONS_SCHEDULER, settings))
    for how, *part in (more[0] if more else []):
        if how == "then":
            milestone, part_name, part_settings = part
            lib.acc_scheduler_then(sched, ctypes.c_int64(milestone), part_name.encode(),
                                   lib.options(api.ACC_OPTIONS_SCHEDULER, part_settings))
        else:
            part_name, part_settings = part
            lib.acc_scheduler_chain(sched, part_name.encode(), lib.options(api.ACC_OPTIONS_SCHEDULER, part_settings))
    lib.acc_prepare(acc, ctypes.byref(model), ctypes.byref(opt), None, ctypes.byref(sched))
    return acc, model, opt, sched


def c_step(lib, acc, model, opt, sched, step):
    """One training step through the C API: its rate and loss."""
    x, y = batch(step)
    inputs, targets = lib.tensor(x), lib.tensor(y)
    outputs = lib.new("acc_model_forward", model, (ctypes.c_void_p * 1)(inputs), ctypes.c_size_t(1),
                      ctypes.c_uint32(0))
    logits = lib.list_get(outputs, 0)
    loss = lib.new("acc_loss_cross_entropy", logits, targets, api.REDUCTION_MEAN, ctypes.c_double(0.0))
    lib.acc_backward(acc, loss)
    lib.acc_optimizer_step(opt)
    lib.acc_scheduler_step(sched)
    lib.acc_optimizer_zero_grad(opt)
    lr = ctypes.c_double()
    lib.acc_scheduler_get_last_lr(sched, ctypes.c_size_t(0), ctypes.byref(lr))
    return lr.value, lib.item(loss)


def c_weights(lib, model):
    return {n: lib.to_torch(t) for n, t in lib.list_items(lib.new("acc_model_state_dict", model))}


def python_step(model, opt, sched, step):
    """The same step in PyTorch."""
    x, y = batch(step)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return sched.get_last_lr()[0], loss.item()


def python_weights(model):
    return {n: t.detach() for n, t in model.state_dict().items()}


def run_c(lib, model_path, checkpoint, optimizer, schedule, seed):
    """STEPS steps through the C API, saving after SAVED_AFTER: each step's rate and loss, and the
    weights at the end."""
    acc, model, opt, sched = prepare_c(lib, model_path, optimizer, schedule, {"python_state_files": True})
    lib.acc_set_seed(ctypes.c_uint64(seed))
    record = []
    for step in range(STEPS):
        if step == SAVED_AFTER:
            lib.acc_save_state(acc, checkpoint.encode(), None)
        record.append(c_step(lib, acc, model, opt, sched, step))
    return record[SAVED_AFTER:], c_weights(lib, model)


def load(path):
    """As Accelerate's load: weights_only from torch 2.4 on (torch 1.13's weights_only refuses
    floats, even in files Python itself saved)."""
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    if (major, minor) >= (2, 4):
        return torch.load(path, map_location="cpu", weights_only=True)
    return torch.load(path, map_location="cpu")


def resume_in_python(model_path, checkpoint, optimizer, schedule, seed):
    """What Python Accelerate's load_state does with the folder, then the remaining steps."""
    _, optimizer_class, arguments = OPTIMIZERS[optimizer]
    model = torch.jit.load(model_path)
    opt = optimizer_class(model.parameters(), **arguments)
    sched = SCHEDULES[schedule][2](opt)
    torch.manual_seed(7)  # what the new program's own set_seed left: load_state replaces it
    model.load_state_dict(read_safetensors(os.path.join(checkpoint, "model.safetensors")))
    opt.load_state_dict(load(os.path.join(checkpoint, "optimizer.bin")))
    sched.load_state_dict(load(os.path.join(checkpoint, "scheduler.bin")))
    states = load(os.path.join(checkpoint, "random_states_0.pkl"))
    random.setstate(states["random_state"])
    np.random.set_state(states["numpy_random_seed"])
    torch.set_rng_state(states["torch_manual_seed"])
    # A C program has no Python streams: they are written as set_seed(seed) leaves them (NumPy's
    # with the seed's low 32 bits: NumPy refuses larger ones).
    random.seed(seed)
    assert states["random_state"] == random.getstate(), f"random's state is not random.seed({seed})'s"
    np.random.seed(seed & 0xFFFFFFFF)
    assert list(states["numpy_random_seed"][1]) == list(np.random.get_state()[1]), f"NumPy's is not seed({seed})'s"
    assert states["step"] == 0, states["step"]
    model.train()
    record = [python_step(model, opt, sched, step) for step in range(SAVED_AFTER, STEPS)]
    return record, python_weights(model)


# Every algorithm once: AdamW and SGD with a schedule, the others with a constant rate; then the
# schedules with state of their own (momentum cycled in SGD's momentum and AdamW's beta1).
RUNS = [("adamw", "linear"), ("sgd", "step"), ("sgd", "multistep")] + [(name, "constant") for name in TORCH_OPTIMIZERS[2:]] + FOREACH_RUNS + [
    ("adamw", "warm_restarts"), ("adamw", "one_cycle"), ("sgd", "one_cycle_three_phase"), ("sgd", "cyclic"),
    ("sgd", "swa"), ("adamw", "warmup_then_cosine"), ("sgd", "warmup_then_linear_then_step"),
    ("sgd", "constant_chained_exponential"), ("adamw", "sequence_chained_exponential"),
    ("adamw", "warmup_then_warm_restarts"), ("sgd", "warm_restarts_then_step"),
    ("adamw", "warm_restarts_chained_exponential"), ("sgd", "warmup_then_one_cycle"), ("sgd", "warmup_then_cyclic"),
    ("sgd", "swa_then_constant")] + (
    [("sgd", "chain_then_step")] if "chain_then_step" in SCHEDULES else []) + PACKAGE_RUNS


# Each PyTorch scheduler's settings, which its state_dict() holds (its __dict__) and the C API's
# scheduler.bin must hold alike: the C API's schedule and options, torch's scheduler, the settings.
SETTINGS_CASES = [
    ("step", {"step_size": 3, "gamma": 0.25}, lambda opt: LR.StepLR(opt, step_size=3, gamma=0.25),
     ["step_size", "gamma"]),
    ("multistep", {"milestones": "4,2", "gamma": 0.3}, lambda opt: LR.MultiStepLR(opt, milestones=[4, 2], gamma=0.3),
     ["gamma"]),
    ("exponential", {"gamma": 0.9}, lambda opt: LR.ExponentialLR(opt, gamma=0.9), ["gamma"]),
    ("cosine_annealing", {"T_max": 7, "eta_min": 0.002}, lambda opt: LR.CosineAnnealingLR(opt, T_max=7, eta_min=0.002),
     ["T_max", "eta_min"]),
    ("constant_lr", {"factor": 0.4, "total_iters": 3}, lambda opt: LR.ConstantLR(opt, factor=0.4, total_iters=3),
     ["factor", "total_iters"]),
    ("linear_lr", {"start_factor": 0.2, "end_factor": 0.9, "total_iters": 6},
     lambda opt: LR.LinearLR(opt, start_factor=0.2, end_factor=0.9, total_iters=6),
     ["start_factor", "end_factor", "total_iters"]),
    ("reduce_lr_on_plateau", {"mode": "max", "factor": 0.3, "patience": 2, "threshold": 0.01,
                              "threshold_mode": "abs", "cooldown": 1, "min_lr": 0.001, "eps": 1e-6},
     lambda opt: LR.ReduceLROnPlateau(opt, mode="max", factor=0.3, patience=2, threshold=0.01, threshold_mode="abs",
                                      cooldown=1, min_lr=0.001, eps=1e-6),
     ["factor", "min_lrs", "patience", "cooldown", "mode", "threshold", "threshold_mode", "best", "num_bad_epochs",
      "cooldown_counter", "mode_worse", "eps", "last_epoch"]),
]
if hasattr(LR, "PolynomialLR"):
    SETTINGS_CASES.append(("polynomial_lr", {"total_iters": 4, "power": 2.0},
                           lambda opt: LR.PolynomialLR(opt, total_iters=4, power=2.0), ["total_iters", "power"]))


def writes_what_pytorch_keeps(lib, model_path, work):
    """scheduler.bin holds each scheduler's settings as PyTorch's state_dict() holds them (found by
    a hunt: StepLR's step_size and gamma, ReduceLROnPlateau's factor, ... were missing), after a
    step (ReduceLROnPlateau's with a metric). 0 when so."""
    failures = 0
    for name, settings, make, keys in SETTINGS_CASES:
        SCHEDULES["settings"] = (name, settings, make)
        acc, model, opt, sched = prepare_c(lib, model_path, "sgd", "settings", {"python_state_files": True})
        torch_opt = torch.optim.SGD(torch.jit.load(model_path).parameters(), lr=0.05, momentum=0.9, nesterov=True)
        torch_sched = make(torch_opt)
        if name == "reduce_lr_on_plateau":
            lib.acc_scheduler_step_metric(sched, ctypes.c_double(1.5))
            torch_sched.step(1.5)
        else:
            lib.acc_scheduler_step(sched)
            torch_opt.step()
            torch_sched.step()
        folder = os.path.join(work, f"settings_{name}")
        lib.acc_save_state(acc, folder.encode(), None)
        ours, theirs = load(os.path.join(folder, "scheduler.bin")), torch_sched.state_dict()
        differing = [key for key in keys if key not in ours or ours[key] != theirs[key]]
        if name == "multistep" and "milestones" in ours:
            differing.append("milestones (a Counter in PyTorch's)")
        print(f"{name}'s scheduler.bin: {'as PyTorch keeps it' if not differing else f'differs in {differing}'}")
        failures += bool(differing)
    return 1 if failures else 0


def compare_runs(build, work, run_pair):
    """run_pair(lib, model_path, run, optimizer, schedule) -> (C API's steps and weights, Python's),
    or the reason for another acceptable outcome, for each of RUNS over a TorchScript Mlp; prints
    each verdict and returns the exit status."""
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model_path = os.path.join(work, "mlp.pt")
    torch.jit.script(Mlp()).save(model_path)
    lib = api.load(build)
    failures = 0
    for run, (optimizer, schedule) in enumerate(RUNS):
        pair = run_pair(lib, model_path, run, optimizer, schedule)
        if isinstance(pair, str):  # the pair's reason for another outcome
            print(f"{optimizer} with {schedule}: {pair}")
            continue
        (ours, our_weights), (theirs, their_weights) = pair
        same = ours == theirs and our_weights.keys() == their_weights.keys() and all(
            torch.equal(our_weights[n], their_weights[n]) for n in our_weights)
        print(f"{optimizer} with {schedule}: {'bit-identical' if same else 'DIFFERS'}")
        if not same:
            print(f"  C API: {ours}\n  Python: {theirs}")
            failures += 1
    return 1 if failures else 0


def main(build, work):
    def run_pair(lib, model_path, run, optimizer, schedule):
        seed = 42 if run % 2 == 0 else 2**40 + 3 * run  # more than one 32-bit word for random.seed
        checkpoint = os.path.join(work, f"checkpoint_{optimizer}_{schedule}")
        ours = run_c(lib, model_path, checkpoint, optimizer, schedule, seed)
        return ours, resume_in_python(model_path, checkpoint, optimizer, schedule, seed)
    status = compare_runs(build, work, run_pair)
    return status | writes_what_pytorch_keeps(api.load(build), os.path.join(work, "mlp.pt"), work)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
