"""PEFT's PVeRA restated (peft/tuners/pvera/model.py and layer.py; PEFT is not packaged for Debian),
for tests/capi/test_pvera.cpp. The shared projections come first, as VeRA's, from a CPU generator of
their own seeded projection_prng_key: pvera_A (2 r x the largest input of the targeted layers), then
pvera_B (the largest output x r), each uniform in +- sqrt(3) * sqrt(2) / sqrt(its second dimension)
(kaiming_uniform_'s bound). Then each targeted layer (nn.Linear, transformers' Conv1D), in
named_modules() order: pvera_lambda_b = ones(out), pvera_lambda_d = torch.randn(2 r) from the global
generator, then with init_weights lambda_d filled with d_initial and lambda_b zeroed; with
generator_seed, a torch.Generator of the layer's own seeded with it. The forward: mu, logvar =
(lambda_d * F.linear(dropout(x), A[:, :in])).chunk(2, -1); z = mu + eps * exp(0.5 logvar) in
training or with sample_at_inference (eps = torch.randn_like, or torch.randn from the layer's
generator), else mu; the output plus lambda_b * F.linear(z, B[:out]), cast to the input's dtype
(disabled too). Merging adds transpose((lambda_b B) @ (lambda_d[:r] A[:r]), fan_in_fan_out).
Written: pvera_model.pt, pvera_linears_model.pt and two cases ("global": r 2, drawn vectors (and the
d_initial start from the same draws), dropout, on a Conv1D, the global generator; "seeded": r 3 on
three nn.Linear layers, a 3-D input, layers' own generators seeded 13 and sampling at inference, its
forwards in a fixed order).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from lora_miss_case import ThreeLinears
from peft_restated import (LinearConv1dNet, adamw_mse_losses, autocast_outputs, hooked_forward, in_out, saved_frozen,
                           seeded_backward, tensor)


def kaiming(shape, generator):
    bound = math.sqrt(3.0) * (math.sqrt(2.0) / math.sqrt(shape[1]))
    return torch.empty(shape).uniform_(-bound, bound, generator=generator)


def make_adapter(model, targets, config):
    modules = dict(model.named_modules())
    r = config["r"]
    largest_out = max(in_out(modules[n])[1] for n in targets)
    largest_in = max(in_out(modules[n])[0] for n in targets)
    generator = torch.Generator(device="cpu").manual_seed(config["projection_prng_key"])
    pvera_a = kaiming((2 * r, largest_in), generator)
    pvera_b = kaiming((largest_out, r), generator)
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        lambda_b, lambda_d = torch.ones(in_out(module)[1]), torch.randn(2 * r)
        if config["init_weights"]:
            lambda_d.fill_(config["d_initial"])
            lambda_b.zero_()
        seed = config["generator_seed"]
        layers[name] = {"b": lambda_b, "d": lambda_d, "conv1d": not isinstance(module, nn.Linear),
                        "generator": torch.Generator().manual_seed(seed) if seed is not None else None}
    return (pvera_a, pvera_b), layers


def forward(model, projections, layers, x, training, config):
    pvera_a, pvera_b = projections
    p = config["pvera_dropout"]

    def hook(layer):
        def add(module, inputs, result):
            x = inputs[0]
            previous_dtype = x.dtype
            size_in, size_out = in_out(module)
            x = x.to(layer["d"].dtype)
            dropped = F.dropout(x, p, training) if p > 0 else x
            mu, logvar = (layer["d"] * F.linear(dropped, pvera_a[:, :size_in])).chunk(2, dim=-1)
            z = mu
            if training or config["sample_at_inference"]:
                std = torch.exp(0.5 * logvar)
                if layer["generator"] is None:
                    eps = torch.randn_like(std)
                else:
                    eps = torch.randn(std.shape, dtype=std.dtype, generator=layer["generator"])
                z = mu + eps * std
            return (result + layer["b"] * F.linear(z, pvera_b[:size_out, :])).to(previous_dtype)
        return add
    return hooked_forward(model, {n: hook(layer) for n, layer in layers.items()}, x, training)


def named(layers):
    return {f"{n}.pvera_lambda_{k}": tensor(layer[k]) for n, layer in layers.items() for k in ("b", "d")}


def trainable_copies(layers):
    return {n: dict(layer, b=layer["b"].detach().clone().requires_grad_(),
                    d=layer["d"].detach().clone().requires_grad_()) for n, layer in layers.items()}


def grads_of(layers):
    return {f"{n}.pvera_lambda_{k}": tensor(layer[k].grad) for n, layer in layers.items() for k in ("b", "d")}


def merged_weights(model, projections, layers, r):
    pvera_a, pvera_b = projections
    modules = dict(model.named_modules())
    merged = {}
    with torch.no_grad():
        for n, layer in layers.items():
            size_in, size_out = in_out(modules[n])
            a = pvera_a[:, :size_in][:r]
            d = (layer["b"].unsqueeze(-1) * pvera_b[:size_out, :]) @ (layer["d"].unsqueeze(-1)[:r] * a)
            merged[n + ".weight"] = tensor(modules[n].weight + (d.T if layer["conv1d"] else d))
    return merged


def global_case(model, targets, config, g):
    """Also the start init_weights gives (`initial`: the same draws, then d_initial and zeros)."""
    torch.manual_seed(config["seed"])
    _, initial = make_adapter(model, targets, dict(config, init_weights=True))
    torch.manual_seed(config["seed"])
    projections, chosen = make_adapter(model, targets, config)
    next_draw = torch.rand(3)
    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], config["outputs"], generator=g)
    with torch.no_grad():
        eval_output = forward(model, projections, chosen, x, False, config)
    low = trainable_copies(chosen)
    autocast_train_output = seeded_backward(lambda: forward(model, projections, low, x, True, config),
                                            config["train_seed"], True)
    trained_now = trainable_copies(chosen)
    train_output = seeded_backward(lambda: forward(model, projections, trained_now, x, True, config),
                                   config["train_seed"])
    trained = trainable_copies(chosen)
    losses = adamw_mse_losses(lambda: forward(model, projections, trained, x, True, config),
                              [layer[k] for layer in trained.values() for k in ("b", "d")], target, config["train_seed"])
    return dict(config, targets=",".join(targets), pvera_A=tensor(projections[0]), pvera_B=tensor(projections[1]),
                next_draw=tensor(next_draw), initial=named(initial), chosen=named(chosen), input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output),
                **autocast_outputs(model, targets, x, lambda: forward(model, projections, chosen, x, False, config)),
                train_output=tensor(train_output), grads=grads_of(trained_now),
                autocast_train_output=tensor(autocast_train_output.float()), autocast_grads=grads_of(low),
                merged=merged_weights(model, projections, chosen, config["r"]), losses=losses,
                trained=named(trained))


def seeded_case(model, targets, config, g):
    """The layers' own generators go on from forward to forward: two evaluations (sampling at
    inference), then a training forward and its backward, in this order."""
    torch.manual_seed(config["seed"])
    projections, chosen = make_adapter(model, targets, config)
    next_draw = torch.rand(3)
    x = torch.randn(*config["input_shape"], generator=g)
    layers = trainable_copies(chosen)
    with torch.no_grad():
        first = forward(model, projections, layers, x, False, config)
        second = forward(model, projections, layers, x, False, config)
    train_output = forward(model, projections, layers, x, True, config)
    train_output.sum().backward()
    return dict(config, targets=",".join(targets), next_draw=tensor(next_draw), chosen=named(chosen),
                input=tensor(x), eval_outputs=[tensor(first), tensor(second)], train_output=tensor(train_output),
                grads=grads_of(layers))


def pvera_case(out, conv1d_class):
    model = saved_frozen(lambda: LinearConv1dNet(conv1d_class(5, 8)), 577, out / "pvera_model.pt")
    linears = saved_frozen(ThreeLinears, 587, out / "pvera_linears_model.pt")
    g = torch.Generator().manual_seed(593)
    drawn = {"r": 2, "projection_prng_key": 7, "init_weights": False, "d_initial": 0.1, "pvera_dropout": 0.25,
             "sample_at_inference": False, "generator_seed": None, "seed": 599, "train_seed": 601,
             "input_shape": [4, 6], "outputs": 3, "model": "pvera_model.pt"}
    seeded = {"r": 3, "projection_prng_key": 11, "init_weights": False, "d_initial": 0.2, "pvera_dropout": 0.0,
              "sample_at_inference": True, "generator_seed": 13, "seed": 607, "input_shape": [2, 3, 6],
              "model": "pvera_linears_model.pt"}
    return {"global": global_case(model, ["fc1", "proj", "head"], drawn, g),
            "seeded": seeded_case(linears, ["fc1", "fc2", "head"], seeded, g)}
