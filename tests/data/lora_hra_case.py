"""PEFT's HRA restated (peft/tuners/hra/layer.py; PEFT is not packaged for Debian), for
tests/capi/test_hra.cpp. Each targeted layer (nn.Linear; nn.Conv2d, whose "input" is in_channels x
kernel x kernel), in named_modules() order, trains hra_u (in x r): with init_weights and an even r,
kaiming_uniform_(a=sqrt(5)) of in x r/2 with each column repeated (equal pairs of reflections),
otherwise kaiming_uniform_ of in x r. Its forward computes with W H in place of W (a convolution's
weight viewed as out x in * kernel^2): H the product of the reflections I - 2 u u^T of hra_u's
normalised columns in order, or with apply_GS I - 2 U U^T, U the columns orthonormalised by
Gram-Schmidt; PEFT starts from torch.eye and takes the weight's data (no gradient), the bias as it
is (also under bf16 autocast: the output and gradients). Merging writes W H. Written: hra_model.pt and two cases ("householder": r 4 on two linear
layers and the convolution; "gram_schmidt": apply_GS, r 3 on the convolution and a linear layer,
bias hra_only).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import autocast_outputs, ConvThenLinears, saved_frozen, tensor, unrolled_in_features as in_features


def make_adapters(model, targets, config):
    """update_layer: an empty parameter, then reset_hra_parameters(_random)."""
    adapters = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        r = config["r"]
        u = torch.empty(in_features(module), r)
        if config["init_weights"] and r % 2 == 0:
            half_u = torch.zeros(u.shape[0], r // 2)
            nn.init.kaiming_uniform_(half_u, a=math.sqrt(5))
            u = torch.repeat_interleave(half_u, 2, dim=1)
        else:
            nn.init.kaiming_uniform_(u, a=math.sqrt(5))
        adapters[name] = u.requires_grad_()
    return adapters


def delta_weight(opt_u, apply_gs):
    """PEFT's get_delta_weight (reverse=False)."""
    rank = opt_u.shape[1]
    if apply_gs:
        weight = [(opt_u[:, 0] / opt_u[:, 0].norm()).view(-1, 1)]
        for i in range(1, rank):
            ui = opt_u[:, i].view(-1, 1)
            for j in range(i):
                ui = ui - (weight[j].t() @ ui) * weight[j]
            weight.append((ui / ui.norm()).view(-1, 1))
        weight = torch.cat(weight, dim=1)
        return torch.eye(opt_u.shape[0], dtype=opt_u.dtype) - 2 * weight @ weight.t()
    opt_u = opt_u / opt_u.norm(dim=0)
    weight = torch.eye(opt_u.shape[0], dtype=opt_u.dtype)
    for i in range(rank):
        ui = opt_u[:, i].view(-1, 1)
        weight = weight - 2 * weight @ ui @ ui.t()
    return weight


def forward(model, adapters, x, training, apply_gs):
    modules = dict(model.named_modules())
    handles = []
    for name, u in adapters.items():
        def hra(module, inputs, output, u=u):
            x = inputs[0]
            n = in_features(module)
            delta = delta_weight(u, apply_gs)
            new_weight = torch.mm(torch.eye(n).to(delta.dtype), delta)
            orig_weight = module.weight.data
            if isinstance(module, nn.Conv2d):
                out = module.out_channels
                new_weight = torch.mm(orig_weight.view(out, n), new_weight)
                new_weight = new_weight.view(out, module.in_channels, module.kernel_size[0], module.kernel_size[0])
                y = F.conv2d(x, new_weight, module.bias, padding=module.padding[0], stride=module.stride[0])
            else:
                y = F.linear(x, torch.mm(orig_weight, new_weight), module.bias)
            return y.to(x.dtype)
        handles.append(modules[name].register_forward_hook(hra))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def merged_weight(module, u, apply_gs):
    delta = delta_weight(u, apply_gs)
    w = module.weight.data
    return torch.mm(w.view(w.shape[0], -1), delta).view(w.shape)


def one_case(model, targets, config, g):
    seed, apply_gs, bias = config["seed"], config["apply_GS"], config["bias"] == "hra_only"
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    paired = make_adapters(model, targets, dict(config, init_weights=True))
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    chosen = make_adapters(model, targets, config)
    next_draw_drawn = torch.rand(3)
    x = torch.randn(4, 2, 5, 5, generator=g)
    target = torch.randn(4, 3, generator=g)
    biases = {n + ".bias": modules[n].bias for n in targets} if bias else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        paired_output = forward(model, paired, x, False, apply_gs)
        eval_output = forward(model, chosen, x, False, apply_gs)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False, apply_gs))
    # Under bf16 autocast (PEFT's torch.eye product then casts H): the output and the gradients.
    low = {n: u.detach().clone().requires_grad_() for n, u in chosen.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, low, x, True, apply_gs)
    autocast_train_output.float().sum().backward()
    autocast_grads = {f"{n}.hra_u": tensor(u.grad) for n, u in low.items()}
    for b in biases.values():
        b.grad = None
    train_output = forward(model, chosen, x, True, apply_gs)
    train_output.sum().backward()
    grads = {f"{n}.hra_u": tensor(u.grad) for n, u in chosen.items()}
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    with torch.no_grad():
        merged = {n + ".weight": tensor(merged_weight(modules[n], chosen[n], apply_gs)) for n in targets}
    trained = {n: u.detach().clone().requires_grad_() for n, u in chosen.items()}
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    optimizer = torch.optim.AdamW(list(trained.values()) + list(biases.values()), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True, apply_gs), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    trained_json = {f"{n}.hra_u": tensor(u) for n, u in trained.items()}
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw),
                next_draw_drawn=tensor(next_draw_drawn), paired={f"{n}.hra_u": tensor(u) for n, u in paired.items()},
                paired_output=tensor(paired_output), chosen={f"{n}.hra_u": tensor(u) for n, u in chosen.items()},
                input=tensor(x), target=tensor(target), eval_output=tensor(eval_output),
                train_output=tensor(train_output), grads=grads, autocast_train_output=tensor(autocast_train_output.float()),
                autocast_grads=autocast_grads, merged=merged, losses=losses, trained=trained_json)


def hra_case(out):
    model = saved_frozen(ConvThenLinears, 181, out / "hra_model.pt")
    g = torch.Generator().manual_seed(191)
    householder = {"r": 4, "apply_GS": False, "init_weights": False, "bias": "none", "seed": 193, "train_seed": 197}
    gram_schmidt = {"r": 3, "apply_GS": True, "init_weights": False, "bias": "hra_only", "seed": 199,
                    "train_seed": 211}
    return {"householder": one_case(model, ["conv", "fc2", "head"], householder, g),
            "gram_schmidt": one_case(model, ["conv", "fc1"], gram_schmidt, g)}
