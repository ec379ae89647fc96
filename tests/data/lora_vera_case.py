"""PEFT's VeRA restated (peft/tuners/vera/model.py and layer.py; PEFT is not packaged for Debian), for
tests/capi/test_vera.cpp. The shared projections come first, from a CPU generator of their own
seeded projection_prng_key: vera_A (r x the largest input of the targeted layers), then vera_B (the
largest output x r), each uniform in +- sqrt(3) * sqrt(2) / sqrt(its second dimension). Then each
targeted layer (nn.Linear, transformers' Conv1D), in named_modules() order: vera_lambda_b =
ones(out), vera_lambda_d = torch.randn(r) from the global generator, then with init_weights
lambda_d filled with d_initial and lambda_b zeroed. The output is base(x) + lambda_b *
F.linear(lambda_d * F.linear(dropout(x), vera_A[:, :in]), vera_B[:out]), cast back to the output's
dtype; merging adds transpose((lambda_b B) @ (lambda_d A), fan_in_fan_out) to the weight. Written:
vera_model.pt and the case.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import in_out, LinearConv1dNet, saved_frozen, tensor

TARGETS = ["fc1", "proj", "head"]


def kaiming(shape, generator):
    bound = math.sqrt(3.0) * (math.sqrt(2) / math.sqrt(shape[1]))
    return torch.empty(shape).uniform_(-bound, bound, generator=generator)


def make_adapter(model, r, key, init, d_initial):
    modules = dict(model.named_modules())
    largest_out = max(in_out(modules[n])[1] for n in TARGETS)
    largest_in = max(in_out(modules[n])[0] for n in TARGETS)
    generator = torch.Generator(device="cpu").manual_seed(key)
    vera_a = kaiming((r, largest_in), generator)
    vera_b = kaiming((largest_out, r), generator)
    vectors = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        lambda_b, lambda_d = torch.ones(in_out(module)[1]), torch.randn(r)
        if init:
            lambda_d.fill_(d_initial)
            lambda_b.zero_()
        vectors[name] = [lambda_b.requires_grad_(), lambda_d.requires_grad_()]
    return vera_a, vera_b, vectors


def forward(model, projections, vectors, x, training, dropout):
    vera_a, vera_b = projections
    modules = dict(model.named_modules())
    handles = []
    for name, (lambda_b, lambda_d) in vectors.items():
        def add(module, inputs, output, lambda_b=lambda_b, lambda_d=lambda_d):
            x = inputs[0]
            size_in, size_out = in_out(module)
            x = F.dropout(x.to(lambda_d.dtype), dropout, training) if dropout > 0 else x.to(lambda_d.dtype)
            branch = lambda_b * F.linear(lambda_d * F.linear(x, vera_a[:, :size_in]), vera_b[:size_out, :])
            return (output + branch).to(output.dtype)
        handles.append(modules[name].register_forward_hook(add))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def delta(module, projections, lambda_b, lambda_d):
    vera_a, vera_b = projections
    size_in, size_out = in_out(module)
    d = (lambda_b.unsqueeze(-1) * vera_b[:size_out, :]) @ (lambda_d.unsqueeze(-1) * vera_a[:, :size_in])
    return d if isinstance(module, nn.Linear) else d.T


def vera_case(out, conv1d_class):
    model = saved_frozen(lambda: LinearConv1dNet(conv1d_class(5, 8)), 89, out / "vera_model.pt")
    r, key, d_initial, dropout, seed, train_seed = 4, 7, 0.2, 0.25, 97, 101
    torch.manual_seed(seed)
    vera_a, vera_b, initial = make_adapter(model, r, key, True, d_initial)
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    _, _, chosen = make_adapter(model, r, key, False, d_initial)
    projections = (vera_a, vera_b)
    g = torch.Generator().manual_seed(103)
    x = torch.randn(4, 6, generator=g)
    with torch.no_grad():
        eval_output = forward(model, projections, chosen, x, False, dropout)
    torch.manual_seed(train_seed)
    train_output = forward(model, projections, chosen, x, True, dropout)
    train_output.sum().backward()
    suffixes = ("vera_lambda_b", "vera_lambda_d")
    grads = {f"{n}.{s}": tensor(v.grad) for n, vs in chosen.items() for s, v in zip(suffixes, vs)}
    modules = dict(model.named_modules())
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + delta(modules[n], projections, *chosen[n]))
                  for n in TARGETS}
    target = torch.randn(4, 3, generator=g)
    trained = {n: [v.detach().clone().requires_grad_() for v in vs] for n, vs in chosen.items()}
    optimizer = torch.optim.AdamW([v for vs in trained.values() for v in vs], lr=1e-2)
    losses = []
    torch.manual_seed(train_seed)
    for _ in range(3):
        loss = F.mse_loss(forward(model, projections, trained, x, True, dropout), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # PyTorch 2's default (Debian's 1.13 zeroes them)
    as_json = lambda vectors: {f"{n}.{s}": tensor(v) for n, vs in vectors.items() for s, v in zip(suffixes, vs)}
    return {"targets": ",".join(TARGETS), "r": r, "projection_prng_key": key, "d_initial": d_initial,
            "vera_dropout": dropout, "seed": seed, "train_seed": train_seed, "vera_A": tensor(vera_a),
            "vera_B": tensor(vera_b), "initial": as_json(initial), "next_draw": tensor(next_draw),
            "chosen": as_json(chosen), "input": tensor(x), "eval_output": tensor(eval_output),
            "train_output": tensor(train_output), "grads": grads, "merged": merged, "target": tensor(target),
            "losses": losses, "trained": as_json(trained)}
