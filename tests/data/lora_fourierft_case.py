"""PEFT's FourierFT restated (peft/tuners/fourierft/layer.py and model.py; PEFT is not packaged for
Debian), for tests/capi/test_fourierft.cpp. Each targeted layer (nn.Linear; transformers' Conv1D,
its weight in x out), in named_modules() order, takes its n_frequency (n_frequency_pattern's: the
first key whose ".*\\.key$" re.match-es the module's name, else the key equal to the name) and draws
its spectrum torch.randn(n_frequency) from the global generator (zeros after it with init_weights);
the places are the first n_frequency of torch.randperm(out * in) from a generator seeded
random_loc_seed, split into rows (// in) and columns (% in). Its forward adds F.linear(x, delta),
delta the real part of ifft2 of the out x in spectrum laid at those places, times scaling, the result
cast to the input's dtype (also disabled). Merging adds the delta (transposed for Conv1D). Written:
fourierft_model.pt and the case (draws, outputs in evaluation, in training and under bf16 autocast,
gradients, merged weights, three AdamW steps).
"""
import re

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import autocast_outputs, in_out, LinearConv1dNet, saved_frozen, tensor

TARGETS = ["fc1", "proj", "head"]


def n_frequency_of(name, config):
    pattern = config["n_frequency_pattern"]
    key = next(filter(lambda k: re.match(rf".*\.{k}$", name), pattern), name)
    return pattern.get(key, config["n_frequency"])


def make_adapters(model, config):
    adapters = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        in_features, out_features = in_out(module)
        n = n_frequency_of(name, config)
        indices = torch.randperm(out_features * in_features,
                                 generator=torch.Generator().manual_seed(config["random_loc_seed"]))[:n]
        indices = torch.stack([indices // in_features, indices % in_features], dim=0)
        spectrum = torch.randn(n)
        if config["init_weights"]:
            nn.init.zeros_(spectrum)
        adapters[name] = {"spectrum": spectrum.requires_grad_(), "indices": indices,
                          "shape": (out_features, in_features)}
    return adapters


def delta_weight(a, scaling):
    dense = torch.zeros(*a["shape"])
    dense[a["indices"][0, :], a["indices"][1, :]] = a["spectrum"].float()
    return (torch.fft.ifft2(dense).real * scaling).to(a["spectrum"].dtype)


def forward(model, adapters, x, scaling):
    modules = dict(model.named_modules())
    handles = []
    for name, a in adapters.items():
        def add(module, inputs, output, a=a):
            x = inputs[0]
            delta = delta_weight(a, scaling)
            return (output + F.linear(x.to(delta.dtype), delta)).to(x.dtype)
        handles.append(modules[name].register_forward_hook(add))
    y = model(x)
    for h in handles:
        h.remove()
    return y


def fourierft_case(out, conv1d_class):
    model = saved_frozen(lambda: LinearConv1dNet(conv1d_class(5, 8)), 223, out / "fourierft_model.pt")
    modules = dict(model.named_modules())
    config = {"n_frequency": 12, "scaling": 5.0, "random_loc_seed": 229, "n_frequency_pattern": {"head": 5},
              "init_weights": False, "seed": 233, "train_seed": 241}
    torch.manual_seed(config["seed"])
    zeros = make_adapters(model, dict(config, init_weights=True))
    next_draw = torch.rand(3)
    torch.manual_seed(config["seed"])
    chosen = make_adapters(model, config)
    g = torch.Generator().manual_seed(239)
    x = torch.randn(4, 6, generator=g)
    target = torch.randn(4, 3, generator=g)
    scaling = config["scaling"]
    model.eval()
    with torch.no_grad():
        eval_output = forward(model, chosen, x, scaling)
    autocast = autocast_outputs(model, TARGETS, x, lambda: forward(model, chosen, x, scaling))
    model.train()
    train_output = forward(model, chosen, x, scaling)
    train_output.sum().backward()
    grads = {f"{n}.fourierft_spectrum": tensor(a["spectrum"].grad) for n, a in chosen.items()}
    with torch.no_grad():
        merged = {}
        for n, a in chosen.items():
            delta = delta_weight(a, scaling)
            merged[n + ".weight"] = tensor(modules[n].weight + (delta.T if n == "proj" else delta))
    trained = {n: dict(a, spectrum=a["spectrum"].detach().clone().requires_grad_()) for n, a in chosen.items()}
    optimizer = torch.optim.AdamW([a["spectrum"] for a in trained.values()], lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, scaling), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    as_json = lambda adapters: {f"{n}.fourierft_spectrum": tensor(a["spectrum"]) for n, a in adapters.items()}
    return dict(config, **autocast, targets=",".join(TARGETS), next_draw=tensor(next_draw),
                zeros=as_json(zeros), chosen=as_json(chosen), input=tensor(x), target=tensor(target),
                eval_output=tensor(eval_output), train_output=tensor(train_output), grads=grads, merged=merged,
                losses=losses, trained=as_json(trained))
