"""PEFT's GraLoRA restated (peft/tuners/gralora/layer.py and model.py; PEFT is not packaged for
Debian), for tests/capi/test_gralora.cpp. Each targeted layer (nn.Linear; transformers' Conv1D, its
weight in x out), in named_modules() order, cuts its inputs and outputs into k = gralora_k blocks:
block by block A_j (r x in/k: kaiming_uniform_(a=sqrt(5)) from the global generator) and B_j
(out/k x r: zeros, or with init_weights False kaiming_uniform_ too), stacked and transposed into
gralora_A (k x in/k x r) and gralora_B (k x r x out/k); with hybrid_r two new nn.Linear layers
(in -> hybrid_r, hybrid_r -> out, their own draws), A drawn again and B zeroed (or drawn). The forward
adds alpha / (r + hybrid_r) times PEFT's two einsums (the blocks' rank exchanged between blocks) and
times the hybrid pair, each on its own dropout of the input, in place on the output, cast back to the
input's dtype (also disabled). Merging adds get_delta_weight (A scattered into its blocks' slots,
one einsum, the hybrid product; transposed for Conv1D). Written: gralora_model.pt,
gralora_conv1d_model.pt and three cases ("blocks": r 4, k 2 on three layers, B drawn, dropout, a 3-D
input; "hybrid": r 2, k 2 and hybrid_r 2, zeros, gralora_only biases; "conv1d": k 1 and hybrid_r 1 on
a Conv1D).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from lora_miss_case import ThreeLinears
from peft_restated import (LinearConv1dNet, adamw_mse_losses, autocast_outputs, hooked_forward, in_out, saved_frozen,
                           seeded_backward, tensor)


def make_layers(model, targets, config):
    k, r, h = config["gralora_k"], config["r"], config["hybrid_r"]
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        fin, fout = in_out(module)
        a_blocks, b_blocks = [], []
        for _ in range(k):
            a, b = torch.empty(r, fin // k), torch.empty(fout // k, r)
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))
            if config["init_weights"]:
                nn.init.zeros_(b)
            else:
                nn.init.kaiming_uniform_(b, a=math.sqrt(5))
            a_blocks.append(a)
            b_blocks.append(b)
        layer = {"A": torch.stack(a_blocks, 0).transpose(1, 2).contiguous(),
                 "B": torch.stack(b_blocks, 0).transpose(1, 2).contiguous(),
                 "in": fin, "out": fout, "conv1d": not isinstance(module, nn.Linear)}
        if h > 0:
            general_a, general_b = nn.Linear(fin, h, bias=False), nn.Linear(h, fout, bias=False)
            nn.init.kaiming_uniform_(general_a.weight, a=math.sqrt(5))
            if config["init_weights"]:
                nn.init.zeros_(general_b.weight)
            else:
                nn.init.kaiming_uniform_(general_b.weight, a=math.sqrt(5))
            layer["GA"], layer["GB"] = general_a.weight.data.clone(), general_b.weight.data.clone()
        layers[name] = layer
    return layers


def scaling(config):
    return config["alpha"] / (config["r"] + config["hybrid_r"])


def forward(model, layers, x, training, config):
    k, r, p = config["gralora_k"], config["r"], config["gralora_dropout"]

    def dropout(t):
        return F.dropout(t, p, training) if p > 0 else t

    def hook(layer):
        def add(module, inputs, result):
            x = inputs[0]
            previous = x.dtype
            torch_result_dtype = result.dtype
            x_is_2d = x.ndim == 2
            if x_is_2d:
                x = x.unsqueeze(1)
            dtype = layer["A"].dtype
            b, length, fin = x.shape
            output = torch.einsum(
                "bljr, jro -> bljo",
                torch.einsum("blni, nir -> blnr", dropout(x.to(dtype)).view(b, length, k, fin // k), layer["A"])
                .view(b, length, k, k, r // k).permute(0, 1, 3, 2, 4).reshape(b, length, k, r),
                layer["B"]).reshape(b, length, -1)
            if x_is_2d:
                output = output.squeeze(1)
            result += scaling(config) * output.to(torch_result_dtype)
            if "GA" in layer:
                hybrid = F.linear(F.linear(dropout(x.to(dtype)), layer["GA"]), layer["GB"])
                if x_is_2d:
                    hybrid = hybrid.squeeze(1)
                result += scaling(config) * hybrid.to(torch_result_dtype)
            return result.to(previous)
        return add
    return hooked_forward(model, {n: hook(layer) for n, layer in layers.items()}, x, training)


def delta(layer, config):
    k, r = config["gralora_k"], config["r"]
    fin, fout = layer["in"], layer["out"]
    l_indices = torch.arange(fin)
    n_indices = l_indices // (fin // k)
    i_indices = l_indices % (fin // k)
    scattered = torch.zeros(fin, k, r)
    scattered.scatter_(1, n_indices.unsqueeze(1).unsqueeze(2).expand(-1, 1, r),
                       layer["A"][n_indices, i_indices, :].unsqueeze(1))
    d = torch.einsum("ikr, kro -> iko",
                     scattered.view(fin, k, k, r // k).permute(0, 2, 1, 3).reshape(fin, k, r),
                     layer["B"]).reshape(fin, fout).T
    if "GA" in layer:
        d += layer["GB"] @ layer["GA"]
    return (d.T if layer["conv1d"] else d) * scaling(config)


NAMES = {"A": "gralora_A", "B": "gralora_B", "GA": "gralora_A_general.weight", "GB": "gralora_B_general.weight"}


def trained_keys(layer):
    return [k for k in ("A", "B", "GA", "GB") if k in layer]


def named(layers):
    return {f"{n}.{NAMES[k]}": tensor(layer[k]) for n, layer in layers.items() for k in trained_keys(layer)}


def one_case(model, targets, config, g):
    modules = dict(model.named_modules())
    torch.manual_seed(config["seed"])
    chosen = make_layers(model, targets, config)
    next_draw = torch.rand(3)

    def copies():
        return {n: dict(layer, **{k: layer[k].detach().clone().requires_grad_() for k in trained_keys(layer)})
                for n, layer in chosen.items()}

    def grads_of(layers):
        return {f"{n}.{NAMES[k]}": tensor(layer[k].grad) for n, layer in layers.items() for k in trained_keys(layer)}

    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], config["outputs"], generator=g)
    biases = {n + ".bias": modules[n].bias for n in targets} if config["bias"] == "gralora_only" else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False, config)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False, config))
    low = copies()
    autocast_train_output = seeded_backward(lambda: forward(model, low, x, True, config), config["train_seed"], True)
    autocast_grads = grads_of(low)
    for b in biases.values():
        b.grad = None
    trained_now = copies()
    train_output = seeded_backward(lambda: forward(model, trained_now, x, True, config), config["train_seed"])
    grads = grads_of(trained_now)
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + delta(layer, config)) for n, layer in chosen.items()}
    trained = copies()
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    losses = adamw_mse_losses(lambda: forward(model, trained, x, True, config),
                              [layer[k] for layer in trained.values() for k in trained_keys(layer)]
                              + list(biases.values()), target, config["train_seed"])
    trained_json = named(trained)
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw), chosen=named(chosen),
                input=tensor(x), target=tensor(target), eval_output=tensor(eval_output),
                train_output=tensor(train_output), grads=grads,
                autocast_train_output=tensor(autocast_train_output.float()), autocast_grads=autocast_grads,
                merged=merged, losses=losses, trained=trained_json)


def gralora_case(out, conv1d_class):
    model = saved_frozen(ThreeLinears, 457, out / "gralora_model.pt")
    conv1d_model = saved_frozen(lambda: LinearConv1dNet(conv1d_class(5, 8)), 461, out / "gralora_conv1d_model.pt")
    g = torch.Generator().manual_seed(463)
    blocks = {"r": 4, "gralora_k": 2, "hybrid_r": 0, "alpha": 8, "gralora_dropout": 0.25, "init_weights": False,
              "bias": "none", "seed": 467, "train_seed": 479, "input_shape": [5, 3, 6], "outputs": 4,
              "model": "gralora_model.pt"}
    hybrid = {"r": 2, "gralora_k": 2, "hybrid_r": 2, "alpha": 6, "gralora_dropout": 0.0, "init_weights": True,
              "bias": "gralora_only", "seed": 487, "train_seed": 491, "input_shape": [5, 6], "outputs": 4,
              "model": "gralora_model.pt"}
    conv1d = {"r": 2, "gralora_k": 1, "hybrid_r": 1, "alpha": 3, "gralora_dropout": 0.25, "init_weights": False,
              "bias": "none", "seed": 499, "train_seed": 503, "input_shape": [4, 6], "outputs": 3,
              "model": "gralora_conv1d_model.pt"}
    return {"blocks": one_case(model, ["fc1", "fc2", "head"], blocks, g),
            "hybrid": one_case(model, ["fc1", "head"], hybrid, g),
            "conv1d": one_case(conv1d_model, ["proj"], conv1d, g)}
