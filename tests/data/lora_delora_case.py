"""PEFT's DeLoRA restated (peft/tuners/delora/layer.py and model.py; PEFT is not packaged for Debian),
for tests/capi/test_delora.cpp. Each targeted nn.Linear, in named_modules() order, takes its rank r
and its delora_lambda (rank_pattern's and lambda_pattern's keys, matched as PEFT's get_pattern_key)
and holds delora_A (r x in: kaiming_uniform_(a=sqrt(5)) from the global generator), delora_B (out x r:
zeros, or with init_weights False kaiming_uniform_ too), delora_lambda (1, filled with the layer's
delora_lambda) and the frozen buffer delora_w_norm = torch.norm(W, dim=0) (in). Its forward adds
F.linear(F.linear(dropout(x) * w_norm, A) * (lambda / r) / (An * Bn), B) to the layer's output (An,
Bn the norms of A's rows and B's columns, clamped at 1e-4; the sum taken into zeros of the output's
dtype), cast back to the input's dtype. Merging adds (B @ diag(lambda / r / (An * Bn)) @ A) * w_norm.
Written: delora_model.pt and two cases ("patterns": r 2 and fc2's 3, head's lambda 4, dropout, a 3-D
input, B drawn; "zeros": B zeros, delora_only biases).
"""
import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from lora_miss_case import ThreeLinears
from peft_restated import autocast_outputs, hooked_forward, saved_frozen, tensor


def pattern_value(pattern, name, fallback):
    """PEFT's get_pattern_key: the first key whose ".*\\.key$" matches the name from its start, else the name."""
    key = next(filter(lambda k: re.match(rf".*\.{k}$", name), pattern), name)
    return pattern.get(key, fallback)


def make_layers(model, targets, config):
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        r = pattern_value(config["rank_pattern"], name, config["r"])
        lam = pattern_value(config["lambda_pattern"], name, config["delora_lambda"])
        a = torch.empty(r, module.in_features)
        b = torch.empty(module.out_features, r)
        nn.init.kaiming_uniform_(a, a=math.sqrt(5))
        if config["init_weights"]:
            nn.init.zeros_(b)
        else:
            nn.init.kaiming_uniform_(b, a=math.sqrt(5))
        lam_t = torch.empty(1).fill_(float(lam))
        with torch.no_grad():
            w_norm = torch.norm(module.weight.data, dim=0).detach()
        layers[name] = {"r": r, "A": a, "B": b, "lambda": lam_t, "w_norm": w_norm}
    return layers


def forward(model, layers, x, training, config):
    def hook(layer):
        def add(module, inputs, output):
            previous = inputs[0].dtype
            x = inputs[0]
            x_d = F.dropout(x, config["module_dropout"], training) if config["module_dropout"] > 0 else x
            h = F.linear(x_d * layer["w_norm"], layer["A"])
            an = torch.clamp(layer["A"].norm(dim=1), min=1e-4)
            bn = torch.clamp(layer["B"].norm(dim=0), min=1e-4)
            scaling = (layer["lambda"] / layer["r"]) / (an * bn)
            h = F.linear(h * scaling, layer["B"])
            add_out = torch.zeros_like(output)
            add_out += h
            return (output + add_out.to(output.dtype)).to(previous)
        return add
    return hooked_forward(model, {n: hook(layer) for n, layer in layers.items()}, x, training)


def delta(layer):
    an = torch.clamp(layer["A"].norm(dim=1), min=1e-4)
    bn = torch.clamp(layer["B"].norm(dim=0), min=1e-4)
    diag = torch.diag_embed(layer["lambda"] / layer["r"] / (an * bn))
    return (layer["B"] @ diag @ layer["A"]) * layer["w_norm"].unsqueeze(0)


TRAINED = ("A", "B", "lambda")
NAMES = {"A": "delora_A", "B": "delora_B", "lambda": "delora_lambda"}


def named(layers, keys=TRAINED):
    return {f"{n}.{NAMES.get(k, 'delora_' + k)}": tensor(layer[k]) for n, layer in layers.items() for k in keys}


def one_case(model, targets, config, g):
    modules = dict(model.named_modules())
    torch.manual_seed(config["seed"])
    chosen = make_layers(model, targets, config)
    next_draw = torch.rand(3)

    def copies():
        return {n: dict(layer, **{k: layer[k].detach().clone().requires_grad_() for k in TRAINED})
                for n, layer in chosen.items()}

    def grads_of(layers):
        return {f"{n}.{NAMES[k]}": tensor(layer[k].grad) for n, layer in layers.items() for k in TRAINED}

    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], 4, generator=g)
    biases = {n + ".bias": modules[n].bias for n in targets} if config["bias"] == "delora_only" else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False, config)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False, config))
    low = copies()
    torch.manual_seed(config["train_seed"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, low, x, True, config)
    autocast_train_output.float().sum().backward()
    autocast_grads = grads_of(low)
    for b in biases.values():
        b.grad = None
    trained_now = copies()
    torch.manual_seed(config["train_seed"])
    train_output = forward(model, trained_now, x, True, config)
    train_output.sum().backward()
    grads = grads_of(trained_now)
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + delta(layer).to(modules[n].weight.dtype))
                  for n, layer in chosen.items()}
    trained = copies()
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    optimizer = torch.optim.AdamW([layer[k] for layer in trained.values() for k in TRAINED] + list(biases.values()),
                                  lr=1e-2)
    losses = []
    torch.manual_seed(config["train_seed"])
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True, config), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    trained_json = named(trained)
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw), chosen=named(chosen),
                w_norm=named(chosen, ("w_norm",)), input=tensor(x), target=tensor(target),
                eval_output=tensor(eval_output), train_output=tensor(train_output), grads=grads,
                autocast_train_output=tensor(autocast_train_output.float()), autocast_grads=autocast_grads,
                merged=merged, losses=losses, trained=trained_json)


def delora_case(out):
    model = saved_frozen(ThreeLinears, 373, out / "delora_model.pt")
    g = torch.Generator().manual_seed(379)
    patterns = {"r": 2, "delora_lambda": 15, "rank_pattern": {"fc2": 3}, "lambda_pattern": {"head": 4.0},
                "module_dropout": 0.25, "init_weights": False, "bias": "none", "seed": 383, "train_seed": 389,
                "input_shape": [5, 3, 6]}
    zeros = {"r": 2, "delora_lambda": 15, "rank_pattern": {}, "lambda_pattern": {}, "module_dropout": 0.0,
             "init_weights": True, "bias": "delora_only", "seed": 397, "train_seed": 401, "input_shape": [5, 6]}
    return {"patterns": one_case(model, ["fc1", "fc2", "head"], patterns, g),
            "zeros": one_case(model, ["fc1", "fc2", "head"], zeros, g)}
