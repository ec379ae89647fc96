"""PEFT's HiRA restated (peft/tuners/hira/layer.py and model.py; PEFT is not packaged for Debian), for
tests/capi/test_hira.cpp. Each targeted layer (nn.Linear; transformers' Conv1D, its weight in x out),
in named_modules() order, takes its rank r (rank_pattern's keys matched as PEFT's get_pattern_key)
and draws hira_A = torch.randn(r, in) then hira_B = torch.randn(out, r) from the global generator;
init_weights True then draws A again with kaiming_uniform_(a=sqrt(5)) and zeroes B, "gaussian" draws
A with normal_(std=1/r) and zeroes B, False keeps both. Its forward adds F.linear(dropout(x), W *
(A.T @ B.T).T) (W as nn.Linear lays it out, x in A's dtype) to the output, in the output's dtype;
disabled, the base output as it is. Merging writes W + W * (B @ A) (transposed for Conv1D).
Written: hira_model.pt, hira_conv1d_model.pt and three cases ("kaiming": r 2 with fc2's 3, dropout, a
3-D input; "randn": r 2 as drawn; "gaussian": r 4 on a Conv1D, dropout).
"""
import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from lora_miss_case import ThreeLinears
from peft_restated import (LinearConv1dNet, adamw_mse_losses, eval_and_autocast_outputs, hooked_forward, in_out,
                           saved_frozen, seeded_backward, tensor)


def pattern_value(pattern, name, fallback):
    """PEFT's get_pattern_key: the first key whose ".*\\.key$" matches the name from its start, else the name."""
    key = next(filter(lambda k: re.match(rf".*\.{k}$", name), pattern), name)
    return pattern.get(key, fallback)


def make_layers(model, targets, config):
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        fin, fout = in_out(module)
        r = pattern_value(config["rank_pattern"], name, config["r"])
        a, b = torch.randn(r, fin), torch.randn(fout, r)
        if config["init_weights"] is True:
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))
            nn.init.zeros_(b)
        elif config["init_weights"] == "gaussian":
            nn.init.normal_(a, std=1 / r)
            nn.init.zeros_(b)
        layers[name] = {"A": a, "B": b, "conv1d": not isinstance(module, nn.Linear)}
    return layers


def linear_weight(module, layer):
    return module.weight.T if layer["conv1d"] else module.weight


def forward(model, layers, x, training, config):
    p = config["hira_dropout"]

    def hook(layer):
        def add(module, inputs, result):
            torch_result_dtype = result.dtype
            prod = torch.mm(layer["A"].T, layer["B"].T)
            x = inputs[0]
            x = x.to(layer["A"].dtype) if x.dtype != layer["A"].dtype else x
            dropped = F.dropout(x, p, training) if p > 0 else x
            hira = F.linear(dropped, linear_weight(module, layer) * prod.T)
            return (result + hira).to(torch_result_dtype)
        return add
    return hooked_forward(model, {n: hook(layer) for n, layer in layers.items()}, x, training)


TRAINED = ("A", "B")


def named(layers):
    return {f"{n}.hira_{k}": tensor(layer[k]) for n, layer in layers.items() for k in TRAINED}


def one_case(model, targets, config, g):
    modules = dict(model.named_modules())
    torch.manual_seed(config["seed"])
    chosen = make_layers(model, targets, config)
    next_draw = torch.rand(3)

    def copies():
        return {n: dict(layer, **{k: layer[k].detach().clone().requires_grad_() for k in TRAINED})
                for n, layer in chosen.items()}

    def grads_of(layers):
        return {f"{n}.hira_{k}": tensor(layer[k].grad) for n, layer in layers.items() for k in TRAINED}

    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], config["outputs"], generator=g)
    eval_output, autocast_enabled, autocast_disabled = eval_and_autocast_outputs(
        model, lambda: forward(model, chosen, x, False, config), x)
    low = copies()
    autocast_train_output = seeded_backward(lambda: forward(model, low, x, True, config), config["train_seed"], True)
    autocast_grads = grads_of(low)
    trained_now = copies()
    train_output = seeded_backward(lambda: forward(model, trained_now, x, True, config), config["train_seed"])
    grads = grads_of(trained_now)
    merged = {}
    with torch.no_grad():
        for n, layer in chosen.items():
            w = modules[n].weight
            delta = layer["B"] @ layer["A"]
            delta = delta.T if layer["conv1d"] else delta
            new_delta = torch.zeros_like(w)
            new_delta += delta.to(w.dtype)
            merged[n + ".weight"] = tensor(w + w * new_delta)
    trained = copies()
    losses = adamw_mse_losses(lambda: forward(model, trained, x, True, config),
                              [layer[k] for layer in trained.values() for k in TRAINED], target, config["train_seed"])
    return dict(config, targets=",".join(targets), next_draw=tensor(next_draw), chosen=named(chosen),
                input=tensor(x), target=tensor(target), eval_output=tensor(eval_output),
                autocast_output=tensor(autocast_enabled.float()),
                autocast_disabled_output=tensor(autocast_disabled.float()),
                autocast_dtypes=[str(autocast_enabled.dtype), str(autocast_disabled.dtype)],
                train_output=tensor(train_output), grads=grads,
                autocast_train_output=tensor(autocast_train_output.float()), autocast_grads=autocast_grads,
                merged=merged, losses=losses, trained=named(trained))


def hira_case(out, conv1d_class):
    model = saved_frozen(ThreeLinears, 509, out / "hira_model.pt")
    conv1d_model = saved_frozen(lambda: LinearConv1dNet(conv1d_class(5, 8)), 521, out / "hira_conv1d_model.pt")
    g = torch.Generator().manual_seed(523)
    kaiming = {"r": 2, "rank_pattern": {"fc2": 3}, "init_weights": True, "hira_dropout": 0.25, "seed": 541,
               "train_seed": 547, "input_shape": [5, 3, 6], "outputs": 4, "model": "hira_model.pt"}
    randn = {"r": 2, "rank_pattern": {}, "init_weights": False, "hira_dropout": 0.0, "seed": 557, "train_seed": 563,
             "input_shape": [5, 6], "outputs": 4, "model": "hira_model.pt"}
    gaussian = {"r": 4, "rank_pattern": {}, "init_weights": "gaussian", "hira_dropout": 0.25, "seed": 569,
                "train_seed": 571, "input_shape": [4, 6], "outputs": 3, "model": "hira_conv1d_model.pt"}
    return {"kaiming": one_case(model, ["fc1", "fc2", "head"], kaiming, g),
            "randn": one_case(model, ["fc1", "head"], randn, g),
            "gaussian": one_case(conv1d_model, ["proj"], gaussian, g)}
