"""Weights after each step of PyTorch's own SGD, Adam, AdamW, RMSprop, Adagrad, RAdam, NAdam, Adamax,
Adadelta, Rprop and ASGD (the Python rules of the torch this runs with), and of bitsandbytes'
Adam8bit, AdamW8bit, AdEMAMix8bit, Lion8bit, SGD8bit, RMSprop8bit and Adagrad8bit (its CPU rules
restated in bnb_restated.py), for tests/capi/test_optimizers.cpp to reproduce bit for bit: a small MLP (Linear 3->4, Tanh, Linear 4->2, MSE loss) trained on a fixed
batch, with default and non-default hyper-parameters and with a second parameter group for the
biases. Options are named as ours (beta1 and beta2 for Adam's betas, etaminus and etaplus for
Rprop's etas, step_size_min and step_size_max for its step_sizes). Values are written as
float.hex() strings (exact).

Run with Debian's python3-torch: python3 export_optimizer_cases.py OUTPUT_DIR [DEVICE]. On a CUDA
DEVICE PyTorch steps Adam, AdamW, SGD and RMSprop with its foreach ops (its default there), which
the GPU suite holds ours to (tests/gpu/gpu_tests.cmake), and so it does for RAdam, NAdam, Adamax,
Adadelta, Rprop and ASGD. Cases with foreach set say so in their options (ours takes the same key).
"""
import inspect
import json
import sys
from pathlib import Path

import torch

from bnb_restated import Adagrad8bit, AdEMAMix8bit, Adam8bit, Lion8bit, RMSprop8bit, SGD8bit


def AdamW8bit(params, **options):
    """bnb.optim.AdamW8bit: Adam8bit's rule with a weight decay of 1e-2 unless given."""
    return Adam8bit(params, **dict({"weight_decay": 1e-2}, **options))


NAMES = ["0.weight", "0.bias", "2.weight", "2.bias"]
STEPS = 8  # RAdam rectifies from its 6th step with the default betas

# (algorithm, options of the optimizer, options of a second group holding the biases or None)
CASES = [
    ("sgd", {"lr": 0.1}, None),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}, None),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True}, {"lr": 0.02, "momentum": 0.5, "weight_decay": 0.1}),
    ("adam", {"lr": 0.01}, None),
    ("adam", {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1, "amsgrad": True},
     {"lr": 0.005, "amsgrad": False}),
    ("adamw", {"lr": 0.01}, None),
    ("adamw", {"lr": 0.02, "beta1": 0.85, "weight_decay": 0.05, "amsgrad": True}, {"lr": 0.01, "weight_decay": 0.0}),
    ("rmsprop", {}, None),
    ("rmsprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1, "momentum": 0.9, "centered": True}, None),
    ("rmsprop", {"lr": 0.02, "momentum": 0.5},
     {"lr": 0.005, "momentum": 0.0, "centered": True, "weight_decay": 0.2}),
    ("adagrad", {}, None),
    ("adagrad", {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.5, "eps": 1e-8},
     None),
    ("adagrad", {"lr": 0.05}, {"lr": 0.02, "initial_accumulator_value": 0.3, "lr_decay": 0.01}),
    ("radam", {"lr": 0.01}, None),
    ("radam", {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1},
     {"lr": 0.005, "weight_decay": 0.0}),
    ("nadam", {}, None),
    ("nadam", {"lr": 0.01, "beta1": 0.85, "weight_decay": 0.05, "momentum_decay": 0.01}, {"lr": 0.02}),
    ("adamax", {}, None),
    ("adamax", {"lr": 0.01, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1}, {"lr": 0.005}),
    ("adadelta", {}, None),
    ("adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.05}, {"rho": 0.95, "weight_decay": 0.0}),
    ("rprop", {}, None),
    ("rprop", {"lr": 0.02, "etaminus": 0.3, "etaplus": 1.5, "step_size_min": 1e-3, "step_size_max": 0.05},
     {"lr": 0.001, "etaplus": 2.0}),
    ("asgd", {}, None),
    # t0 2 averages from the third step on; lambd large enough that eta decays visibly.
    ("asgd", {"lr": 0.05, "lambd": 0.5, "alpha": 0.5, "t0": 2, "weight_decay": 0.1}, {"lr": 0.02, "t0": 0}),
    # maximize: the loss ascends (with weight decay, which PyTorch adds after negating the gradient).
    ("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01, "maximize": True}, None),
    ("adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "maximize": True}, {"lr": 0.005}),
    ("adamw", {"lr": 0.01, "maximize": True}, None),
    ("rmsprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "maximize": True}, None),
    ("adagrad", {"lr": 0.05, "weight_decay": 0.05, "maximize": True}, None),
    ("adamax", {"weight_decay": 0.1, "maximize": True}, None),
    ("adadelta", {"weight_decay": 0.05, "maximize": True}, None),
    ("rprop", {"maximize": True}, None),
    ("asgd", {"t0": 2, "weight_decay": 0.1, "maximize": True}, None),
    # bitsandbytes' 8-bit Adam (restated, bnb_restated.py): every parameter under the default
    # min_8bit_size keeps 32-bit moments; min_8bit_size 1 makes them all 8-bit (one short block
    # each); a second group mixes the two.
    ("adamw_8bit", {"lr": 0.01}, None),
    ("adamw_8bit", {"lr": 0.01, "min_8bit_size": 1}, None),
    ("adam_8bit", {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1, "min_8bit_size": 8},
     {"lr": 0.005, "min_8bit_size": 1}),
    ("adam_8bit", {"lr": 0.01, "min_8bit_size": 1}, {"lr": 0.02, "min_8bit_size": 4096}),
    ("lion_8bit", {"lr": 0.01, "weight_decay": 0.1}, None),
    # (both betas given: a missing one would take Adam's default in torch_names)
    ("lion_8bit", {"lr": 0.01, "beta1": 0.8, "beta2": 0.95, "min_8bit_size": 1}, {"lr": 0.02, "min_8bit_size": 4096}),
    # bitsandbytes' other 8-bit optimizers: all 8-bit; then weights 8-bit and biases 32-bit (both
    # rules in one step) with weight decay, which the one-state rules add to the gradient.
    ("sgd_8bit", {"lr": 0.05, "momentum": 0.9, "min_8bit_size": 1}, None),
    ("sgd_8bit", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1, "min_8bit_size": 8},
     {"lr": 0.02, "momentum": 0.5, "min_8bit_size": 1}),
    ("rmsprop_8bit", {"min_8bit_size": 1}, None),
    ("rmsprop_8bit", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1, "min_8bit_size": 8},
     {"lr": 0.005, "min_8bit_size": 1}),
    ("adagrad_8bit", {"lr": 0.05, "min_8bit_size": 1}, None),
    ("adagrad_8bit", {"lr": 0.05, "weight_decay": 0.05, "eps": 1e-8, "min_8bit_size": 8},
     {"lr": 0.02, "min_8bit_size": 1}),
    ("ademamix_8bit", {"lr": 0.01}, None),
    ("ademamix_8bit", {"lr": 0.01, "min_8bit_size": 1}, None),
    # warm-ups of alpha and beta3 (the biases' group without: t_alpha 0 is bitsandbytes' None)
    ("ademamix_8bit", {"lr": 0.01, "beta1": 0.8, "beta2": 0.99, "beta3": 0.999, "alpha": 2.0, "t_alpha": 4,
                       "t_beta3": 6, "weight_decay": 0.1, "min_8bit_size": 8},
     {"lr": 0.02, "t_alpha": 0, "t_beta3": 0, "min_8bit_size": 1}),
]
# PyTorch's fused=True kernels, on the CPU from 2.4 (on a CUDA DEVICE too).
TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
if TORCH_VERSION >= (2, 4):
    CASES += [
        ("sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01, "fused": True}, None),
        ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "fused": True},
         {"lr": 0.02, "momentum": 0.0, "nesterov": False}),
        ("adam", {"lr": 0.01, "fused": True}, None),
        ("adam", {"lr": 0.02, "beta1": 0.8, "eps": 1e-6, "weight_decay": 0.1, "amsgrad": True, "fused": True},
         {"lr": 0.005, "amsgrad": False}),
        ("adamw", {"lr": 0.02, "beta1": 0.85, "weight_decay": 0.05, "amsgrad": True, "fused": True},
         {"lr": 0.01, "weight_decay": 0.0}),
        # PyTorch's fused Adagrad is the CPU's only: main() leaves it out on CUDA.
        ("adagrad", {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.5,
                     "fused": True}, {"lr": 0.02, "lr_decay": 0.01}),
        ("adamw", {"lr": 0.01, "amsgrad": True, "fused": True, "maximize": True}, None),
        ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "fused": True, "maximize": True}, None),
        # The CUDA SGD kernel applies maximize at the update, after the decay (its sign then differs
        # from the unfused rule's); the CPU kernel negates the gradient first.
        ("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1, "fused": True, "maximize": True}, None),
        ("adam", {"lr": 0.01, "weight_decay": 0.1, "fused": True, "maximize": True}, None),
    ]
# PyTorch 2.x's AdamW-style decay for RAdam and NAdam (1.x has no such option).
if "decoupled_weight_decay" in inspect.signature(torch.optim.RAdam).parameters:
    CASES += [
        ("radam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None),
        ("nadam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, {"lr": 0.005}),
        ("radam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}, None),  # 1.x's have no maximize
        ("nadam", {"lr": 0.01, "maximize": True}, None),
        # PyTorch 2.x's foreach rules (its default on CUDA), which round otherwise than the one-tensor
        # rules for Adam, AdamW, Adagrad, RAdam (rectified from step 6), NAdam and ASGD; the others'
        # round alike.
        ("adam", {"lr": 0.01, "weight_decay": 0.1, "foreach": True}, None),
        ("adamw", {"lr": 0.02, "amsgrad": True, "foreach": True}, {"lr": 0.01, "weight_decay": 0.0}),
        ("adagrad", {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.05, "foreach": True}, None),
        ("radam", {"lr": 0.01, "weight_decay": 0.1, "foreach": True}, {"lr": 0.005, "weight_decay": 0.0}),
        ("radam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "foreach": True}, None),
        ("nadam", {"lr": 0.01, "beta1": 0.85, "weight_decay": 0.05, "momentum_decay": 0.01, "foreach": True},
         {"lr": 0.02}),
        ("asgd", {"lr": 0.05, "lambd": 0.5, "alpha": 0.5, "t0": 2, "weight_decay": 0.1, "foreach": True},
         {"lr": 0.02, "t0": 0}),
        ("asgd", {"foreach": True, "maximize": True}, None),
        ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "foreach": True}, None),
        ("rmsprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "foreach": True}, None),
        ("adamax", {"weight_decay": 0.1, "foreach": True}, None),
        ("adadelta", {"weight_decay": 0.05, "foreach": True}, None),
        ("rprop", {"lr": 0.02, "etaplus": 1.5, "foreach": True}, None),
    ]


# Our names of the members of torch.optim's pairs, with its defaults.
PAIRS = {"betas": (("beta1", 0.9), ("beta2", 0.999)),
         "etas": (("etaminus", 0.5), ("etaplus", 1.2)),
         "step_sizes": (("step_size_min", 1e-6), ("step_size_max", 50))}


def torch_names(options):
    """Our option names as torch.optim's: beta1 and beta2 are its betas, and so on; beta3 makes
    them AdEMAMix's three."""
    renamed = dict(options)
    for pair, members in PAIRS.items():
        if any(name in options for name, _ in members):
            renamed[pair] = tuple(renamed.pop(name, default) for name, default in members)
    if "beta3" in renamed:
        renamed["betas"] = (*renamed.get("betas", (0.9, 0.999)), renamed.pop("beta3"))
    return renamed


def bnb_group_names(algorithm, group):
    """A group's momentum (SGD8bit) or alpha (RMSprop8bit) as bitsandbytes' rules read it: the
    first of the group's betas (the classes take them as arguments and pack them so)."""
    key = {"sgd_8bit": "momentum", "rmsprop_8bit": "alpha"}.get(algorithm)
    if key in group:
        group = dict(group, betas=(group.pop(key), 0))
    return group


def hexes(tensor):
    return [float(v).hex() for v in tensor.detach().flatten().tolist()]


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


def main(out_dir, device):
    torch.set_num_threads(1)
    net = model().to(device)
    initial = {name: p.detach().clone() for name, p in net.named_parameters()}
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, generator=g).to(device)
    y = torch.randn(5, 2, generator=g).to(device)
    cases = []
    for algorithm, options, group in CASES:
        if algorithm == "adagrad" and options.get("fused") and device != "cpu":
            continue
        net = model().to(device)
        params = dict(net.named_parameters())
        if group is None:
            groups = [{"params": [params[n] for n in NAMES]}]
        else:
            groups = [{"params": [params["0.weight"], params["2.weight"]]},
                      dict(group, params=[params["0.bias"], params["2.bias"]])]
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
               "rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad, "radam": torch.optim.RAdam,
               "nadam": torch.optim.NAdam, "adamax": torch.optim.Adamax, "adadelta": torch.optim.Adadelta,
               "rprop": torch.optim.Rprop, "asgd": torch.optim.ASGD,
               "adam_8bit": Adam8bit, "adamw_8bit": AdamW8bit, "lion_8bit": Lion8bit,
               "ademamix_8bit": AdEMAMix8bit, "sgd_8bit": SGD8bit, "rmsprop_8bit": RMSprop8bit,
               "adagrad_8bit": Adagrad8bit}[algorithm]
        if group is not None:
            groups[1] = bnb_group_names(algorithm, torch_names(groups[1]))
        # (PyTorch's Adagrad fills every accumulator with the constructor's initial_accumulator_value,
        # whatever a group says: so does ours)
        opt = cls(groups, **torch_names(options))
        steps = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(net(x), y).backward()
            grads = {n: hexes(params[n].grad) for n in NAMES}
            opt.step()
            steps.append({**{n: hexes(params[n]) for n in NAMES}, "grads": grads})
        cases.append({"algorithm": algorithm, "options": options, "group": group, "steps": steps})
    data = {
        "torch": torch.__version__,
        "device": device,
        "initial": {n: {"shape": list(t.shape), "values": hexes(t)} for n, t in initial.items()},
        "x": hexes(x), "y": hexes(y),
        "cases": cases,
    }
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "optimizer_cases.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "cpu")
