"""PEFT's CorDA (preprocess_corda, then get_peft_model with init_lora_weights "corda") restated for
tests/capi/test_lora_corda.cpp: the "corda" entry of lora_cases.json and the models corda_lm_model.pt
and corda_mlp_model.pt.

PEFT is not packaged for Debian, so its calib_cov_distribution hook, collect_eigens_for_layer,
crop_corda_eigens (peft/tuners/lora/corda.py) and corda_init (peft/tuners/lora/layer.py) are
restated here from their definitions.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lora_eva_case import EvaLm, EvaMlp
from peft_restated import tensor


def covariances(model, layers, loader, split):
    """calib_cov_distribution: each call's input (one sequence: input[0].squeeze(0)), divided by the
    absolute value of its largest entry, adds x^T x; the sums divided by the calls."""
    modules = dict(model.named_modules())
    sums, calls = {n: 0 for n in layers}, {n: 0 for n in layers}

    def hook(n):
        def run(module, inp, out):
            x = inp[0].detach().squeeze(0).float()
            x = x / torch.max(x).abs()
            calls[n] += 1
            sums[n] += x.t().matmul(x)
        return run

    handles = [modules[n].register_forward_hook(hook(n)) for n in layers]
    model.eval()
    with torch.no_grad():
        for batch in loader:
            model(*split(batch))
    for h in handles:
        h.remove()
    for n in layers:
        sums[n] /= calls[n]
    return sums


def components(weight, covariance, r, method):
    """collect_eigens_for_layer and crop_corda_eigens."""
    w = weight.detach().float()
    c = covariance.float()
    damp = 0.01
    while True:
        compensate = torch.diag(torch.ones(c.size(0)) * torch.mean(torch.diag(c)) * damp)
        fixed = c + compensate
        inverse = torch.linalg.inv(fixed)
        if torch.dist(fixed @ inverse, torch.eye(c.size(0))).item() < 0.05:
            break
        damp = damp * 2
    u, s, vh = torch.linalg.svd(w @ fixed, full_matrices=False)
    v = (vh @ inverse).transpose(0, 1)
    if method == "ipm":
        return s[:r].clone(), u[:, :r].clone(), v[:, :r].clone()
    return s[-r:].clone(), u[:, -r:].clone(), v[:, -r:].clone()


def run_case(model, config, seed, loader, split):
    """preprocess_corda, then get_peft_model's draws and corda_init per layer, then the next draw."""
    modules = dict(model.named_modules())
    layers = config["targets"]
    ranks = {n: config.get("rank_pattern", {}).get(n, config["r"]) for n in layers}
    torch.manual_seed(seed)
    cov = covariances(model, layers, loader, split)
    eigens = {n: components(modules[n].weight, cov[n], ranks[n], config["corda_method"]) for n in layers}
    result = {}
    for n in layers:
        layer, r = modules[n], ranks[n]
        scaling = config["lora_alpha"] / r
        nn.Linear(layer.in_features, r, bias=False)
        nn.Linear(r, layer.out_features, bias=False)
        s, u, v = eigens[n]
        s = s / scaling
        a = v.t().mul(s.sqrt().view(-1, 1)).contiguous()
        b = u.mul(s.sqrt()).contiguous()
        residual = (layer.weight.detach().float() - scaling * b @ a).to(layer.weight.dtype)
        entry = {"lora_A": tensor(a), "lora_B": tensor(b), "weight": tensor(residual)}
        if config.get("use_dora"):
            entry["magnitude"] = tensor(torch.linalg.norm(residual + scaling * (b @ a), dim=1))
        result[n] = entry
    return {"layers": result, "next_draw": tensor(torch.rand(3))}


def corda_case(out):
    torch.manual_seed(96)
    lm = EvaLm()
    torch.jit.script(lm).save(str(out / "corda_lm_model.pt"))
    g = torch.Generator().manual_seed(97)
    ids = torch.randint(0, 20, (12, 6), generator=g)
    lm_config = {"targets": ["q", "k", "v", "fc1", "fc2"], "r": 3, "lora_alpha": 6.0, "rank_pattern": {"fc2": 2},
                 "corda_method": "ipm"}
    lm_loader = DataLoader(TensorDataset(ids), batch_size=1, shuffle=True)  # one sequence per call, as PEFT's
    lm_case = run_case(lm, lm_config, 98, lm_loader, lambda batch: (batch[0],))

    torch.manual_seed(99)
    mlp = EvaMlp()
    torch.jit.script(mlp).save(str(out / "corda_mlp_model.pt"))
    x = torch.randn(24, 10, generator=g)
    mlp_config = {"targets": ["fc1", "fc2", "fc3"], "r": 2, "lora_alpha": 3.0, "corda_method": "kpm", "use_dora": True}
    mlp_loader = DataLoader(TensorDataset(x), batch_size=6)
    mlp_case = run_case(mlp, mlp_config, 100, mlp_loader, lambda batch: (batch[0],))
    return {"lm": {"config": lm_config, "seed": 98, "ids": {**tensor(ids), "dtype": "int64"}, **lm_case},
            "mlp": {"config": mlp_config, "seed": 100, "x": tensor(x), **mlp_case}}
