"""Learning rates of PyTorch's ChainedScheduler and MultiplicativeLR, for
tests/capi/test_schedule_chains.cpp to reproduce bit for bit through acc_scheduler_chain and
acc_scheduler_create_multiplicative; and ("per_group_cases") of OneCycleLR, CyclicLR and
ReduceLROnPlateau given a list (one value per parameter group) for max_lr, base_lr, the momenta or
min_lr, with the momentum (SGD's, or Adam's beta1) they move, for tests/cpp/test_cycling_schedulers.cpp. Each case is a chain of schedules made in order on one SGD
(named as acc_scheduler_create names them, with their ACC_OPTIONS_SCHEDULER settings as text), or a
MultiplicativeLR whose factor at step s is factors[s % len(factors)], possibly leading a chain; two
parameter groups with their own rates, and each group's rate after every step is recorded, as
float.hex() strings (exact). A case may continue as a SequentialLR ("then": a milestone and the
schedule after it) and may set rates by hand between steps ("set_lr": [after, group, lr] sets
group's rate after `after` steps, before the next): chainable schedules go on from such a rate,
closed forms replace it. "user_schedule_cases": LambdaLR and MultiplicativeLR given one
function per group (group g's factor at step s is group_factors[g][s % len]), alone, leading a chain
or a sequence, and CyclicLR with a scale_fn (scale(x) = scale[x % len], x the cycle or the step), for
tests/capi/test_user_schedules.cpp (acc_scheduler_create_group_lambda / _group_multiplicative /
acc_scheduler_create_cyclic); "cycling_cases": sequences and chains with OneCycleLR or CyclicLR,
with the momentum they move, for tests/capi/test_schedule_chains.cpp.

Run with Debian's python3-torch: python3 export_schedule_cases.py OUTPUT_DIR.
"""
import json
import math
import sys
import warnings
from pathlib import Path

import torch
from torch.optim import lr_scheduler as S

warnings.filterwarnings("ignore")


def transformers_linear(o):
    """transformers' get_linear_schedule_with_warmup factor, as a LambdaLR."""
    w, total = int(o.get("num_warmup_steps", 0)), int(o["num_training_steps"])
    return lambda s: s / max(1, w) if s < w else max(0.0, float(total - s) / float(max(1, total - w)))


def transformers_cosine(o):
    w, total = int(o.get("num_warmup_steps", 0)), int(o["num_training_steps"])

    def factor(s):
        if s < w:
            return float(s) / float(max(1, w))
        progress = float(s - w) / float(max(1, total - w))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
    return factor


MAKERS = {
    "step": lambda opt, o: S.StepLR(opt, step_size=int(o["step_size"]), gamma=float(o.get("gamma", 0.1))),
    "multistep": lambda opt, o: S.MultiStepLR(opt, milestones=[int(m) for m in o["milestones"].split(",")],
                                              gamma=float(o.get("gamma", 0.1))),
    "exponential": lambda opt, o: S.ExponentialLR(opt, gamma=float(o["gamma"])),
    "cosine_annealing": lambda opt, o: S.CosineAnnealingLR(opt, T_max=int(o["T_max"]),
                                                           eta_min=float(o.get("eta_min", 0))),
    "constant_lr": lambda opt, o: S.ConstantLR(opt, factor=float(o.get("factor", 1 / 3)),
                                               total_iters=int(o.get("total_iters", 5))),
    "linear_lr": lambda opt, o: S.LinearLR(opt, start_factor=float(o.get("start_factor", 1 / 3)),
                                           end_factor=float(o.get("end_factor", 1.0)),
                                           total_iters=int(o.get("total_iters", 5))),
    "polynomial_lr": lambda opt, o: S.PolynomialLR(opt, total_iters=int(o.get("total_iters", 5)),
                                                   power=float(o.get("power", 1.0))),
    "cosine_annealing_warm_restarts": lambda opt, o: S.CosineAnnealingWarmRestarts(
        opt, T_0=int(o["T_0"]), T_mult=int(o.get("T_mult", 1)), eta_min=float(o.get("eta_min", 0))),
    "linear": lambda opt, o: S.LambdaLR(opt, transformers_linear(o)),
    "cosine": lambda opt, o: S.LambdaLR(opt, transformers_cosine(o)),
}
# Only as an "earlier" scheduler (below): made first, on the same optimizer, and stepped.
EARLIER_MAKERS = dict(MAKERS)
EARLIER_MAKERS["one_cycle"] = lambda opt, o: S.OneCycleLR(opt, max_lr=float(o["max_lr"]),
                                                          total_steps=int(o["total_steps"]), cycle_momentum=False)
EARLIER_MAKERS["cyclic"] = lambda opt, o: S.CyclicLR(opt, base_lr=float(o["base_lr"]), max_lr=float(o["max_lr"]),
                                                     step_size_up=int(o["step_size_up"]), cycle_momentum=False)
if hasattr(torch.optim, "swa_utils"):
    MAKERS["swa_lr"] = lambda opt, o: torch.optim.swa_utils.SWALR(
        opt, swa_lr=numbers(o["swa_lr"]), anneal_epochs=int(o.get("anneal_epochs", 10)),
        anneal_strategy=o.get("anneal_strategy", "cos"))

CASES = [
    {"lrs": [0.1, 0.03], "steps": 6, "chain": [
        {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "3"}},
        {"name": "exponential", "options": {"gamma": "0.9"}}]},
    {"lrs": [0.1, 0.2], "steps": 10, "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.25", "total_iters": "4"}},
        {"name": "cosine_annealing", "options": {"T_max": "6", "eta_min": "0.01"}}]},
    {"lrs": [0.1, 0.05], "steps": 8, "chain": [
        {"name": "linear", "options": {"num_warmup_steps": "2", "num_training_steps": "8"}},
        {"name": "step", "options": {"step_size": "3", "gamma": "0.5"}}]},
    {"lrs": [0.2, 0.7], "steps": 7, "chain": [
        {"name": "multistep", "options": {"milestones": "2,4", "gamma": "0.5"}},
        {"name": "polynomial_lr", "options": {"total_iters": "5", "power": "2"}}]},
    # A milestone at step 0 applies at creation: alone, and after another schedule in a chain.
    {"lrs": [0.2, 0.7], "steps": 5, "chain": [
        {"name": "multistep", "options": {"milestones": "3,0,3", "gamma": "0.5"}}]},
    {"lrs": [0.2, 0.7], "steps": 5, "chain": [
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "multistep", "options": {"milestones": "0,0,2", "gamma": "0.5"}}]},
    {"lrs": [0.1, 0.3], "steps": 7, "chain": [
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}},
        {"name": "cosine_annealing_warm_restarts", "options": {"T_0": "3"}}]},
    {"lrs": [0.3, 0.1], "steps": 9, "chain": [
        {"name": "cosine", "options": {"num_warmup_steps": "3", "num_training_steps": "9"}},
        {"name": "swa_lr", "options": {"swa_lr": "0.05", "anneal_epochs": "4"}},
        {"name": "constant_lr", "options": {"factor": "0.25", "total_iters": "2"}}]},
    {"lrs": [0.1, 0.04], "steps": 6, "factors": [0.95, 0.9, 0.8], "chain": []},
    {"lrs": [0.1, 0.04], "steps": 5, "factors": [0.9, 0.95], "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "2"}}]},
    # Rates set by hand between steps: each chainable schedule, closed forms, chains and sequences.
    {"lrs": [0.1, 0.04], "steps": 6, "set_lr": [[1, 0, 0.07], [3, 1, 0.02]], "chain": [
        {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}}]},
    {"lrs": [0.1, 0.04], "steps": 5, "set_lr": [[2, 0, 0.3], [2, 1, 0.0]], "chain": [
        {"name": "exponential", "options": {"gamma": "0.9"}}]},
    {"lrs": [0.1, 0.2], "steps": 10, "set_lr": [[2, 0, 0.05], [6, 1, 0.5], [7, 0, 0.011]], "chain": [
        {"name": "cosine_annealing", "options": {"T_max": "4", "eta_min": "0.01"}}]},
    {"lrs": [0.2, 0.7], "steps": 6, "set_lr": [[1, 0, 0.33], [2, 1, 0.1]], "chain": [
        {"name": "multistep", "options": {"milestones": "2,4", "gamma": "0.5"}}]},
    {"lrs": [0.1, 0.05], "steps": 7, "set_lr": [[1, 0, 0.08], [2, 1, 0.2]], "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.25", "total_iters": "4"}}]},
    {"lrs": [0.1, 0.05], "steps": 5, "set_lr": [[0, 0, 0.4], [2, 1, 0.01]], "chain": [
        {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "3"}}]},
    {"lrs": [0.2, 0.7], "steps": 6, "set_lr": [[2, 0, 0.9], [4, 1, 0.3]], "chain": [
        {"name": "polynomial_lr", "options": {"total_iters": "5", "power": "2"}}]},
    {"lrs": [0.3, 0.1], "steps": 8, "set_lr": [[1, 0, 0.2], [3, 1, 0.07], [6, 0, 0.5]], "chain": [
        {"name": "swa_lr", "options": {"swa_lr": "0.05", "anneal_epochs": "4", "anneal_strategy": "linear"}}]},
    {"lrs": [0.1, 0.04], "steps": 6, "factors": [0.9, 0.8], "set_lr": [[2, 0, 0.5], [3, 1, 0.01]], "chain": []},
    # SWALR with one swa_lr per group, alone and chained after another schedule.
    {"lrs": [0.3, 0.1], "steps": 6, "chain": [
        {"name": "swa_lr", "options": {"swa_lr": "0.05,0.2", "anneal_epochs": "3"}}]},
    {"lrs": [0.3, 0.1], "steps": 6, "chain": [
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "swa_lr", "options": {"swa_lr": "0.05, 0.02", "anneal_epochs": "2", "anneal_strategy": "linear"}}]},
    {"lrs": [0.1, 0.05], "steps": 6, "set_lr": [[2, 0, 0.7], [3, 1, 0.01]], "chain": [
        {"name": "linear", "options": {"num_warmup_steps": "2", "num_training_steps": "6"}}]},
    # Made after an "earlier" scheduler on the same optimizer stepped: the base rates are the groups'
    # initial_lr, which the first scheduler set (OneCycleLR over it: max_lr / div_factor; CyclicLR:
    # base_lr), while a chainable schedule's step 0 is the rate the earlier one left; a SequentialLR
    # first sets the rates back to initial_lr.
    {"lrs": [0.1, 0.05], "steps": 12, "earlier": {"name": "exponential", "options": {"gamma": "0.9"}, "steps": 3},
     "chain": [{"name": "cosine_annealing", "options": {"T_max": "5", "eta_min": "0.001"}}]},
    {"lrs": [0.1, 0.05], "steps": 8, "earlier": {"name": "exponential", "options": {"gamma": "0.9"}, "steps": 3},
     "chain": [{"name": "linear", "options": {"num_training_steps": "6"}}]},
    {"lrs": [0.1, 0.05], "steps": 8, "earlier": {"name": "exponential", "options": {"gamma": "0.9"}, "steps": 3},
     "chain": [{"name": "cosine_annealing_warm_restarts", "options": {"T_0": "3", "eta_min": "0.001"}}]},
    {"lrs": [0.1, 0.05], "steps": 8, "earlier": {"name": "exponential", "options": {"gamma": "0.9"}, "steps": 3},
     "chain": [{"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "4"}}],
     "then": {"milestone": 3, "name": "exponential", "options": {"gamma": "0.1"}}},
    {"lrs": [0.1, 0.05], "steps": 8, "earlier": {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}, "steps": 3},
     "chain": [{"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "2"}},
               {"name": "cosine_annealing", "options": {"T_max": "4"}}]},
    {"lrs": [0.1, 0.05], "steps": 6,
     "earlier": {"name": "one_cycle", "options": {"max_lr": "1.0", "total_steps": "10", "cycle_momentum": "false"},
                 "steps": 3},
     "chain": [{"name": "linear", "options": {"num_training_steps": "6"}}]},
    {"lrs": [0.1, 0.05], "steps": 6,
     "earlier": {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2",
                                               "cycle_momentum": "false"}, "steps": 3},
     "chain": [{"name": "cosine", "options": {"num_training_steps": "6"}}]},
    {"lrs": [0.1, 0.03], "steps": 6, "set_lr": [[1, 0, 0.5], [3, 1, 0.2]], "chain": [
        {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "3"}},
        {"name": "exponential", "options": {"gamma": "0.9"}}]},
    {"lrs": [0.1, 0.05], "steps": 6, "set_lr": [[2, 0, 0.7], [3, 1, 0.01]], "chain": [
        {"name": "linear", "options": {"num_warmup_steps": "2", "num_training_steps": "8"}},
        {"name": "step", "options": {"step_size": "3", "gamma": "0.5"}}]},
    {"lrs": [0.1, 0.05], "steps": 9, "set_lr": [[1, 0, 0.2], [2, 1, 0.3], [4, 0, 0.6]], "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}}],
     "then": {"milestone": 3, "name": "exponential", "options": {"gamma": "0.5"}}},
    {"lrs": [0.1, 0.05], "steps": 8, "set_lr": [[2, 0, 0.2], [5, 1, 0.3]], "chain": [
        {"name": "exponential", "options": {"gamma": "0.9"}}],
     "then": {"milestone": 4, "name": "cosine_annealing", "options": {"T_max": "3", "eta_min": "0.01"}}},
    # A chain leading a sequence (PyTorch 2: 1.x's SequentialLR cannot start a ChainedScheduler): its
    # parts start again together from initial_lr, and it steps whole until the milestone.
    {"lrs": [0.1, 0.05], "steps": 9, "set_lr": [[1, 0, 0.2]], "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}},
        {"name": "exponential", "options": {"gamma": "0.9"}}],
     "then": {"milestone": 4, "name": "cosine_annealing", "options": {"T_max": "3", "eta_min": "0.01"}}},
    {"lrs": [0.1, 0.05], "steps": 8, "earlier": {"name": "exponential", "options": {"gamma": "0.9"}, "steps": 2},
     "chain": [{"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "2"}},
               {"name": "linear", "options": {"num_training_steps": "8"}}],
     "then": {"milestone": 3, "name": "step", "options": {"step_size": "2", "gamma": "0.5"}}},
    # Annealing to 0, PyTorch's chainable arithmetic ends a few ulp below it (-7.25e-18 at step 15), and
    # its optimizer steps with that rate; so does a cosine annealing from a group rate of 0 to eta_min.
    {"lrs": [0.875, 0.3], "steps": 17, "chain": [
        {"name": "linear_lr", "options": {"start_factor": "0.14", "end_factor": "0", "total_iters": "15"}}]},
    {"lrs": [0.0, 0.1], "steps": 12, "chain": [
        {"name": "cosine_annealing", "options": {"T_max": "5", "eta_min": "0.01"}}]},
]


PER_GROUP_CASES = [
    {"optimizer": "sgd", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10,
     "scheduler": {"name": "one_cycle", "options": {"max_lr": "0.5,0.05", "total_steps": "10",
                                                    "base_momentum": "0.8,0.85", "max_momentum": "0.9,0.95"}}},
    {"optimizer": "adamw", "lrs": [0.1, 0.05], "steps": 11,
     "scheduler": {"name": "one_cycle", "options": {"max_lr": "0.01, 0.002", "total_steps": "12", "pct_start": "0.25",
                                                    "anneal_strategy": "linear", "three_phase": "true",
                                                    "max_momentum": "0.9"}}},
    # pct_start 1: the last phase is empty; PyTorch runs until its division by zero at step 10.
    {"optimizer": "sgd", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 9,
     "scheduler": {"name": "one_cycle", "options": {"max_lr": "0.5,0.05", "total_steps": "10", "pct_start": "1.0"}}},
    {"optimizer": "sgd", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 13,
     "scheduler": {"name": "cyclic", "options": {"base_lr": "0.01,0.001", "max_lr": "0.1,0.02", "step_size_up": "3",
                                                 "mode": "triangular2", "base_momentum": "0.8,0.7"}}},
    {"optimizer": "sgd", "lrs": [0.1, 0.05], "steps": 8, "metrics": [1.0] * 8,
     "scheduler": {"name": "reduce_lr_on_plateau", "options": {"min_lr": "0.02,0.001", "factor": "0.5",
                                                               "patience": "1"}}},
]

USER_SCHEDULE_CASES = [
    {"kind": "lambda", "lrs": [0.1, 0.04], "steps": 6, "group_factors": [[1.0, 0.5, 0.25], [0.9, 0.8]]},
    {"kind": "multiplicative", "lrs": [0.1, 0.04], "steps": 6, "group_factors": [[0.95, 0.9, 0.8], [0.5, 1.0]]},
    {"kind": "multiplicative", "lrs": [0.3, 0.2], "steps": 6, "group_factors": [[0.9], [0.7, 1.1]],
     "chain": {"name": "exponential", "options": {"gamma": "0.9"}}},
    {"kind": "lambda", "lrs": [0.3, 0.2], "steps": 7, "group_factors": [[0.1, 0.2, 0.4], [1.0, 0.5]],
     "then": {"milestone": 3, "name": "exponential", "options": {"gamma": "0.5"}}},
    {"kind": "cyclic", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 13, "scale": [0.3, 1.0, 0.6],
     "options": {"base_lr": "0.01,0.001", "max_lr": "0.1,0.02", "step_size_up": "3", "step_size_down": "2",
                 "base_momentum": "0.8,0.7"}},
    {"kind": "cyclic", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 9, "scale": [1.0, 0.9, 0.7, 0.5, 0.8],
     "options": {"base_lr": "0.01", "max_lr": "0.1,0.05", "step_size_up": "2", "scale_mode": "iterations"}},
    {"kind": "cyclic", "lrs": [0.1, 0.05], "steps": 7, "scale": [0.5, 2.0],
     "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2", "cycle_momentum": "false"}},
    # No way down: a sawtooth (PyTorch takes step_size_down 0; found by a hunt, it was refused).
    {"kind": "cyclic", "lrs": [0.1, 0.05], "steps": 8, "scale": [1.0],
     "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "3", "step_size_down": "0",
                 "cycle_momentum": "false"}},
]


def run_user_schedule(case):
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [a], "lr": case["lrs"][0]}, {"params": [b], "lr": case["lrs"][1]}],
                          lr=case["lrs"][0], momentum=case.get("momentum", 0))
    if case["kind"] == "cyclic":
        o, scale = case["options"], case["scale"]
        extra = {k: numbers(o[k]) for k in ("base_momentum", "max_momentum") if k in o}
        sched = S.CyclicLR(opt, base_lr=numbers(o["base_lr"]), max_lr=numbers(o["max_lr"]),
                           step_size_up=int(o["step_size_up"]), step_size_down=int(o["step_size_down"]) if "step_size_down" in o else None,
                           scale_fn=lambda x: scale[int(x) % len(scale)], scale_mode=o.get("scale_mode", "cycle"),
                           cycle_momentum=o.get("cycle_momentum", "true") == "true", **extra)
    else:
        fns = [(lambda f: lambda s: f[s % len(f)])(f) for f in case["group_factors"]]
        sched = (S.LambdaLR if case["kind"] == "lambda" else S.MultiplicativeLR)(opt, fns)
        if "chain" in case:
            sched = S.ChainedScheduler([sched, MAKERS[case["chain"]["name"]](opt, case["chain"]["options"])])
        if "then" in case:
            later = MAKERS[case["then"]["name"]](opt, case["then"]["options"])
            sched = S.SequentialLR(opt, [sched, later], milestones=[case["then"]["milestone"]])
    return stepped_points(opt, sched, case["steps"])


def lr_and_momentum(opt):
    """Each group's rate and momentum (Adam's beta1) as float.hex() strings; None without one."""
    out = []
    for g in opt.param_groups:
        momentum = g["betas"][0] if "betas" in g else g.get("momentum")
        out.append([float(g["lr"]).hex(), None if momentum is None else float(momentum).hex()])
    return out


def stepped_points(opt, sched, steps, metrics=None):
    """lr_and_momentum after the scheduler is made and after each of `steps` steps (with a metric each)."""
    points = [lr_and_momentum(opt)]
    for step in range(steps):
        opt.step()
        sched.step(metrics[step]) if metrics else sched.step()
        points.append(lr_and_momentum(opt))
    return points


def numbers(text):
    values = [float(v) for v in text.split(",")]
    return values[0] if len(values) == 1 else values


def run_per_group(case):
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    groups = [{"params": [a], "lr": case["lrs"][0]}, {"params": [b], "lr": case["lrs"][1]}]
    if case["optimizer"] == "sgd":
        opt = torch.optim.SGD(groups, lr=case["lrs"][0], momentum=case.get("momentum", 0))
    else:
        opt = torch.optim.AdamW(groups, lr=case["lrs"][0])
    o = case["scheduler"]["options"]
    name = case["scheduler"]["name"]
    if name == "one_cycle":
        extra = {k: numbers(o[k]) for k in ("base_momentum", "max_momentum") if k in o}
        sched = S.OneCycleLR(opt, max_lr=numbers(o["max_lr"]), total_steps=int(o["total_steps"]),
                             pct_start=float(o.get("pct_start", 0.3)), anneal_strategy=o.get("anneal_strategy", "cos"),
                             three_phase=o.get("three_phase") == "true", **extra)
    elif name == "cyclic":
        extra = {k: numbers(o[k]) for k in ("base_momentum", "max_momentum") if k in o}
        sched = S.CyclicLR(opt, base_lr=numbers(o["base_lr"]), max_lr=numbers(o["max_lr"]),
                           step_size_up=int(o["step_size_up"]), mode=o["mode"], **extra)
    else:
        sched = S.ReduceLROnPlateau(opt, min_lr=numbers(o["min_lr"]), factor=float(o["factor"]),
                                    patience=int(o["patience"]))
    return stepped_points(opt, sched, case["steps"], case.get("metrics"))


def run(case):
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [a], "lr": case["lrs"][0]}, {"params": [b], "lr": case["lrs"][1]}])
    if "earlier" in case:
        earlier = EARLIER_MAKERS[case["earlier"]["name"]](opt, case["earlier"]["options"])
        for _ in range(case["earlier"]["steps"]):
            opt.step()
            earlier.step()
    schedulers = []
    if "factors" in case:
        f = case["factors"]
        schedulers.append(S.MultiplicativeLR(opt, lambda s: f[s % len(f)]))
    schedulers += [MAKERS[part["name"]](opt, part["options"]) for part in case["chain"]]
    sched = schedulers[0] if len(schedulers) == 1 else S.ChainedScheduler(schedulers)
    if "then" in case:
        later = MAKERS[case["then"]["name"]](opt, case["then"]["options"])
        sched = S.SequentialLR(opt, [sched, later], milestones=[case["then"]["milestone"]])
    rates = [[float(g["lr"]).hex() for g in opt.param_groups]]
    for step in range(case["steps"]):
        for after, group, lr in case.get("set_lr", []):
            if after == step:
                opt.param_groups[group]["lr"] = lr
        opt.step()
        sched.step()
        rates.append([float(g["lr"]).hex() for g in opt.param_groups])
    return rates


def own_scheduler(opt, name, o):
    """OneCycleLR or CyclicLR with every setting a case gives."""
    flag = lambda key, default: o.get(key, default) == "true"
    extra = {k: numbers(o[k]) for k in ("base_momentum", "max_momentum") if k in o}
    if name == "one_cycle":
        extra.update({k: float(o[k]) for k in ("div_factor", "final_div_factor") if k in o})
        return S.OneCycleLR(opt, max_lr=numbers(o["max_lr"]), total_steps=int(o["total_steps"]),
                            pct_start=float(o.get("pct_start", 0.3)), anneal_strategy=o.get("anneal_strategy", "cos"),
                            three_phase=flag("three_phase", "false"), cycle_momentum=flag("cycle_momentum", "true"),
                            **extra)
    return S.CyclicLR(opt, base_lr=numbers(o["base_lr"]), max_lr=numbers(o["max_lr"]),
                      step_size_up=int(o["step_size_up"]),
                      step_size_down=int(o["step_size_down"]) if "step_size_down" in o else None,
                      mode=o.get("mode", "triangular"), gamma=float(o.get("gamma", 1.0)),
                      cycle_momentum=flag("cycle_momentum", "true"), **extra)


# Sequences and chains with OneCycleLR or CyclicLR ("parts", made in order on one optimizer; a
# sequence's "milestones"; "chain_then": the first two chained, leading a sequence; "then_chain":
# the first two a sequence, leading a chain), for
# tests/capi/test_schedule_chains.cpp: each group's rate and momentum (SGD's, or AdamW's beta1) after
# every step. "earlier": a scheduler made and stepped first.
CYCLING_CASES = [
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [6], "parts": [
        {"name": "one_cycle", "options": {"max_lr": "0.5", "total_steps": "6"}},
        {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "2"}}]},
    # Made after linear_lr, the one_cycle writes initial_lr (max_lr / 25), where the warm-up starts from.
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [3], "parts": [
        {"name": "linear_lr", "options": {"start_factor": "0.25", "total_iters": "3"}},
        {"name": "one_cycle", "options": {"max_lr": "0.5,0.05", "total_steps": "8", "base_momentum": "0.8,0.85"}}]},
    # A closed form first keeps its own base rates.
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [4], "parts": [
        {"name": "linear", "options": {"num_warmup_steps": "2", "num_training_steps": "10"}},
        {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2"}}]},
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 12, "milestones": [5, 8], "parts": [
        {"name": "cyclic", "options": {"base_lr": "0.01,0.005", "max_lr": "0.1", "step_size_up": "2",
                                       "mode": "triangular2"}},
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "cosine_annealing", "options": {"T_max": "4", "eta_min": "0.001"}}]},
    # Parts made after the one_cycle take its initial_lr as their base.
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 11, "milestones": [2, 7], "parts": [
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "one_cycle", "options": {"max_lr": "1.0", "total_steps": "5", "three_phase": "true",
                                          "anneal_strategy": "linear"}},
        {"name": "cosine_annealing", "options": {"T_max": "3"}}]},
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 9, "milestones": [4], "parts": [
        {"name": "one_cycle", "options": {"max_lr": "0.4", "total_steps": "4", "div_factor": "10",
                                          "cycle_momentum": "false"}},
        {"name": "linear", "options": {"num_training_steps": "6"}}]},
    {"kind": "sequence", "lrs": [0.1, 0.05], "steps": 9, "milestones": [5], "optimizer": "adamw", "parts": [
        {"name": "one_cycle", "options": {"max_lr": "0.01", "total_steps": "5", "pct_start": "0.4"}},
        {"name": "linear_lr", "options": {"start_factor": "1.0", "end_factor": "0.1", "total_iters": "4"}}]},
    # A cyclic before the one_cycle: the one_cycle's momenta are its own.
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [4], "parts": [
        {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2"}},
        {"name": "one_cycle", "options": {"max_lr": "0.3", "total_steps": "6"}}]},
    # A sequence of rules, then a one_cycle.
    {"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [2, 5], "parts": [
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "2"}},
        {"name": "cosine_annealing", "options": {"T_max": "3", "eta_min": "0.01"}},
        {"name": "one_cycle", "options": {"max_lr": "0.2", "total_steps": "5"}}]},
    {"kind": "chain", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 8, "parts": [
        {"name": "one_cycle", "options": {"max_lr": "0.5", "total_steps": "8"}},
        {"name": "exponential", "options": {"gamma": "0.9"}}]},
    # Made after exponential, CyclicLR's own step 0 starts from the initial_lr exponential set.
    {"kind": "chain", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 8, "parts": [
        {"name": "exponential", "options": {"gamma": "0.9"}},
        {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "3"}}]},
    {"kind": "chain", "lrs": [0.1, 0.05], "steps": 8, "optimizer": "adamw", "parts": [
        {"name": "cyclic", "options": {"base_lr": "0.001", "max_lr": "0.01", "step_size_up": "2",
                                       "mode": "exp_range", "gamma": "0.9", "cycle_momentum": "false"}},
        {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}},
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}}]},
    # A chain of rules leading a sequence into a one_cycle (PyTorch 2 only).
    {"kind": "chain_then", "torch2": True, "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 10, "milestones": [4],
     "parts": [{"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}},
               {"name": "exponential", "options": {"gamma": "0.9"}},
               {"name": "one_cycle", "options": {"max_lr": "0.3", "total_steps": "6"}}]},
    # A sequence of rules leading a chain (a ChainedScheduler steps a SequentialLR as any part): the
    # parts chained after it are made after the sequence set the rates back.
    {"kind": "then_chain", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 9, "milestones": [3], "parts": [
        {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}},
        {"name": "cosine_annealing", "options": {"T_max": "4", "eta_min": "0.01"}},
        {"name": "exponential", "options": {"gamma": "0.9"}}]},
    {"kind": "then_chain", "lrs": [0.1, 0.05], "momentum": 0.9, "steps": 9, "milestones": [4], "parts": [
        {"name": "exponential", "options": {"gamma": "0.8"}},
        {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}},
        {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2"}}]},
    # Alone, made after an earlier scheduler: PyTorch's CyclicLR takes that one's initial_lr at its step 0.
    {"kind": "sequence", "lrs": [0.5, 0.05], "momentum": 0.9, "steps": 5, "milestones": [],
     "earlier": {"name": "step", "options": {"step_size": "2", "gamma": "0.5"}, "steps": 3}, "parts": [
        {"name": "cyclic", "options": {"base_lr": "0.01", "max_lr": "0.1", "step_size_up": "2"}}]},
]


def run_cycling(case):
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    groups = [{"params": [a], "lr": case["lrs"][0]}, {"params": [b], "lr": case["lrs"][1]}]
    if case.get("optimizer") == "adamw":
        opt = torch.optim.AdamW(groups, lr=case["lrs"][0])
    else:
        opt = torch.optim.SGD(groups, lr=case["lrs"][0], momentum=case.get("momentum", 0))
    if "earlier" in case:
        earlier = MAKERS[case["earlier"]["name"]](opt, case["earlier"]["options"])
        for _ in range(case["earlier"]["steps"]):
            opt.step()
            earlier.step()
    def make(part):
        if part["name"] in ("one_cycle", "cyclic"):
            return own_scheduler(opt, part["name"], part["options"])
        return MAKERS[part["name"]](opt, part["options"])
    if case["kind"] == "then_chain":  # the first two a sequence, made before the parts chained to it
        sequence = S.SequentialLR(opt, [make(p) for p in case["parts"][:2]], milestones=case["milestones"])
        return stepped_points(opt, S.ChainedScheduler([sequence, *[make(p) for p in case["parts"][2:]]]),
                              case["steps"])
    parts = [make(p) for p in case["parts"]]
    if len(parts) == 1:
        sched = parts[0]
    elif case["kind"] == "chain":
        sched = S.ChainedScheduler(parts)
    elif case["kind"] == "chain_then":  # the first two chained, leading the sequence
        sched = S.SequentialLR(opt, [S.ChainedScheduler(parts[:2]), *parts[2:]], milestones=case["milestones"])
    else:
        sched = S.SequentialLR(opt, parts, milestones=case["milestones"])
    return stepped_points(opt, sched, case["steps"])


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch2 = int(torch.__version__.split(".")[0]) >= 2
    cases = [dict(case, rates=run(case)) for case in CASES
             if all(p["name"] in MAKERS for p in case["chain"] + [case.get("then", {"name": "step"})])
             and (torch2 or "then" not in case or len(case["chain"]) + ("factors" in case) < 2)]
    per_group = [dict(case, points=run_per_group(case)) for case in PER_GROUP_CASES]
    user = [dict(case, points=run_user_schedule(case)) for case in USER_SCHEDULE_CASES]
    cycling = [dict(case, points=run_cycling(case)) for case in CYCLING_CASES if torch2 or not case.get("torch2")]
    (out / "schedule_cases.json").write_text(
        json.dumps({"torch": torch.__version__, "cases": cases, "per_group_cases": per_group,
                    "user_schedule_cases": user, "cycling_cases": cycling}, indent=1))


if __name__ == "__main__":
    main()
