"""PEFT's LoRA-GA (preprocess_loraga with a train_step, then get_peft_model with init_lora_weights
"lora_ga") restated for tests/capi/test_lora_ga.cpp: the "lora_ga" entry of lora_cases.json and the
model lora_ga_model.pt.

PEFT is not packaged for Debian, so its estimate_gradients (peft/tuners/lora/loraga.py) and
lora_ga_init (peft/tuners/lora/layer.py) are restated here from their definitions, with
torch.svd_lowrank as PyTorch 2.x computes it (peft_restated.svd_lowrank_2x).
"""
import torch
import torch.nn.functional as F
from torch import nn

from lora_eva_case import EvaMlp
from peft_restated import svd_lowrank_2x, tensor

CONFIGS = [
    {"targets": ["fc1", "fc2", "fc3"], "r": 2, "lora_alpha": 4.0, "direction": "ArB2r", "scale": "stable",
     "stable_gamma": 16},
    {"targets": ["fc1", "fc3"], "r": 2, "lora_alpha": 2.0, "direction": "random", "scale": "weight_svd",
     "stable_gamma": 16},
    {"targets": ["fc1", "fc2"], "r": 2, "lora_alpha": 8.0, "direction": "ArBr", "scale": "gd_scale",
     "stable_gamma": 16, "rank_pattern": {"fc1": 3}},
    {"targets": ["fc2", "fc3"], "r": 1, "lora_alpha": 1.0, "direction": "A2rBr", "scale": "unit",
     "stable_gamma": 16},
]


def gradients(model, layers, batches):
    """estimate_gradients: the targeted weights alone require grad; the train step (MSE, backward per
    batch) accumulates; each gradient divided by its layer's backward passes."""
    modules = dict(model.named_modules())
    model.train()
    for p in model.parameters():
        p.requires_grad_(False)
    passes = {n: 0 for n in layers}
    hooks = []
    for n in layers:
        modules[n].weight.requires_grad_(True)
        hooks.append(modules[n].register_full_backward_hook(
            lambda m, gi, go, n=n: passes.__setitem__(n, passes[n] + 1)))
    for x, y in batches:
        F.mse_loss(model(x), y).backward()
    for h in hooks:
        h.remove()
    out = {}
    for n in layers:
        out[n] = modules[n].weight.grad.detach() / passes[n]
        modules[n].weight.grad = None
        modules[n].weight.requires_grad_(False)
    return out


def lora_ga_start(layer, grad, r, scaling, config):
    """lora_ga_init on an nn.Linear."""
    g = grad.to(torch.float32)
    u, s, v = svd_lowrank_2x(g, min(4 * r, min(g.shape)), 4)
    vh = v.t()
    u, s, vh = u[:, : 2 * r], s[: 2 * r], vh[: 2 * r, :]
    direction = config["direction"]
    if direction == "ArBr":
        a, b, s_b = vh[1: 2 * r: 2, :], u[:, 0: 2 * r: 2], s[0: 2 * r: 2]
        b = b @ torch.diag(s_b)
    elif direction == "A2rBr":
        a, b, s_b = vh[r: 2 * r, :], u[:, :r], s[:r]
        b = b @ torch.diag(s_b)
    elif direction == "ArB2r":
        a, b, s_b = vh[:r, :], u[:, r: 2 * r], s[r: 2 * r]
        b = b @ torch.diag(s_b)
    else:
        indices = torch.randperm(2 * r)[:r]
        a, s_b = vh[indices, :], s[indices]
        b = u[:, indices] @ torch.diag(s_b)
    weight = layer.weight
    if config["scale"] == "stable":
        b = b * ((weight.shape[0] ** 0.25) / (config["stable_gamma"] ** 0.5))
    elif config["scale"] == "weight_svd":
        _, weight_s, _ = svd_lowrank_2x(weight.data.to(torch.float32), r, 4)
        if s_b[0] > 0:
            b = b * (weight_s[0] / s_b[0])
    elif config["scale"] == "gd_scale":
        a = a / scaling
        b = b / scaling
    a, b = a.to(weight.dtype).contiguous(), b.to(weight.dtype).contiguous()
    residual = (weight.data.to(torch.float32) - scaling * (b.float() @ a.float())).to(weight.dtype)
    return a, b, residual


def run_case(config, seed, x, y):
    torch.manual_seed(101)
    model = EvaMlp()
    modules = dict(model.named_modules())
    layers = config["targets"]
    torch.manual_seed(seed)
    grads = gradients(model, layers, [(x[i:i + 6], y[i:i + 6]) for i in range(0, x.shape[0], 6)])
    result = {}
    for n in layers:
        layer = modules[n]
        r = config.get("rank_pattern", {}).get(n, config["r"])
        scaling = config["lora_alpha"] / r
        nn.Linear(layer.in_features, r, bias=False)
        nn.Linear(r, layer.out_features, bias=False)
        a, b, residual = lora_ga_start(layer, grads[n], r, scaling, config)
        result[n] = {"lora_A": tensor(a), "lora_B": tensor(b), "weight": tensor(residual)}
    return {"config": config, "seed": seed, "layers": result, "next_draw": tensor(torch.rand(3))}


def lora_ga_case(out):
    torch.manual_seed(101)
    torch.jit.script(EvaMlp()).save(str(out / "lora_ga_model.pt"))
    g = torch.Generator().manual_seed(102)
    x = torch.randn(18, 10, generator=g)
    y = torch.randn(18, 6, generator=g)
    return {"x": tensor(x), "y": tensor(y),
            "cases": [run_case(config, 103 + i, x, y) for i, config in enumerate(CONFIGS)]}
