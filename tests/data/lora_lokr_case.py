"""PEFT's LoKr restated (peft/tuners/lokr/layer.py and lycoris_utils.py; PEFT is not packaged for
Debian), for tests/capi/test_lokr.cpp. Each targeted layer (nn.Linear, nn.Conv1d, nn.Conv2d), in
named_modules() order, has its weight's out = a b and in (a convolution's input channels per group)
= c d split by LyCORIS' factorization (a divisor near decompose_factor, or near the square root for
-1); w1 is a x c, whole unless decompose_both and r < max(a, c) / 2 (then w1_a a x r, w1_b r x c);
w2 is b x d with the kernel, whole unless r < max(b, d) / 2 (then w2_a b x r, w2_b r x d times the
kernel, or with use_effective_conv2d on a wider kernel the CP form: t2 r x r x kernel (a 1-D
kernel's k x 1), w2_a r x b, w2_b r x d). Draws in registration order (w1, w1_a, w1_b, w2, w2_a,
w2_b, t2): init_weights true zeroes w1 or w1_a, "lycoris" zeroes w2 or w2_b, false zeroes none; the
rest Kaiming-uniform. The delta is torch.kron(w1, w2) * alpha / r (w1 unsqueezed twice where w2 is
4-D; the CP form's w2 torch.einsum("ijkl,ip,jr->prkl", t2, w2_a, w2_b)), reshaped to the weight's
shape; in training rank_dropout keeps each output row where torch.rand(out) > p (as float32,
divided by its mean only with rank_dropout_scale), and each layer's branch is added only where
torch.rand(1) > module_dropout. The output is base(x) + F.linear(x, delta) (a convolution's F.conv
with the layer's stride, padding, dilation and groups), cast to x's dtype; merging adds the delta to
the weight. Written: lokr_model.pt and two cases ("cp": decompose_both and the CP form, "plain":
decompose_factor 2 and a 1-D convolution's whole w2).
"""
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import lycoris_forward, tensor

TARGETS = ["conv", "seq", "fc1", "head"]
NAMES = ["lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t2"]


class LokrNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 12, 3, padding=2, dilation=2)
        self.seq = nn.Conv1d(12, 4, 2)
        self.fc1 = nn.Linear(96, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(2)
        h = self.seq(h).flatten(1)
        return self.head(torch.tanh(self.fc1(h)))


def factorization(dimension, factor):
    """LyCORIS' split of `dimension` into m <= n (its own words in PEFT's lokr/layer.py)."""
    if factor > 0 and dimension % factor == 0:
        return factor, dimension // factor
    if factor == -1:
        factor = dimension
    m, n = 1, dimension
    while m < n:
        candidate = m + 1
        while dimension % candidate:
            candidate += 1
        if candidate > factor:
            break
        m, n = candidate, dimension // candidate
    return (n, m) if m > n else (m, n)


def shapes(module, r, config):
    """PEFT's update_layer and create_adapter_parameters: the factors' names and shapes."""
    w = module.weight
    a, b = factorization(w.shape[0], config["decompose_factor"])
    c, d = factorization(w.shape[1], config["decompose_factor"])
    kernel = list(w.shape[2:])
    out = {}
    if config["decompose_both"] and r < max(a, c) / 2:
        out["lokr_w1_a"], out["lokr_w1_b"] = [a, r], [r, c]
    else:
        out["lokr_w1"] = [a, c]
    if r >= max(b, d) / 2:
        out["lokr_w2"] = [b, d] + kernel
    elif kernel and config["use_effective_conv2d"] and math.prod(kernel) != 1:
        out["lokr_w2_a"], out["lokr_w2_b"] = [r, b], [r, d]
        out["lokr_t2"] = [r, r, kernel[0], kernel[1] if len(kernel) > 1 else 1]
    else:
        out["lokr_w2_a"], out["lokr_w2_b"] = [b, r], [r, d * math.prod(kernel)]
    return {name: out[name] for name in NAMES if name in out}


def make_factors(model, r_of, config, init):
    """The draws, layer by layer in module order, each layer's in registration order."""
    zeroed = {True: ("lokr_w1", "lokr_w1_a"), "lycoris": ("lokr_w2", "lokr_w2_b"), False: ()}[init]
    factors = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        f = {}
        for factor, shape in shapes(module, r_of[name], config).items():
            w = torch.empty(shape)
            if factor in zeroed:
                nn.init.zeros_(w)
            else:
                nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            f[factor] = w.requires_grad_()
        factors[name] = f
    return factors


def delta(module, f, scaling, training, rank_dropout, rank_dropout_scale):
    w1 = f["lokr_w1"] if "lokr_w1" in f else f["lokr_w1_a"] @ f["lokr_w1_b"]
    if "lokr_w2" in f:
        w2 = f["lokr_w2"]
    elif "lokr_t2" in f:
        w2 = torch.einsum("i j k l, i p, j r -> p r k l", f["lokr_t2"], f["lokr_w2_a"], f["lokr_w2_b"])
    else:
        w2 = f["lokr_w2_a"] @ f["lokr_w2_b"]
    if w2.dim() == 4:
        w1 = w1.unsqueeze(2).unsqueeze(2)
    # PEFT's w2.contiguous(); a 1-D kernel's CP w2 (b x d x k x 1) keeps a stride torch 1.13's kron
    # cannot view, so it is copied with plain strides (the same values: kron multiplies pairs).
    weight = (torch.kron(w1, w2.clone(memory_format=torch.contiguous_format)) * scaling).reshape(module.weight.shape)
    if training and rank_dropout:
        drop = (torch.rand(weight.size(0)) > rank_dropout).float()
        drop = drop.view(-1, *[1] * len(weight.shape[1:]))
        if rank_dropout_scale:
            drop /= drop.mean()
        weight *= drop
    return weight


def forward(model, factors, scalings, config, x, training):
    rank_dropout = config["rank_dropout"] if training else 0.0
    deltas = {name: (lambda module, f=f, s=scalings[name]: delta(module, f, s, training, rank_dropout,
                                                                 config["rank_dropout_scale"]))
              for name, f in factors.items()}
    return lycoris_forward(model, deltas, x, training, config["module_dropout"])


def run(model, config, x, target):
    r_of = {n: config["rank_pattern"].get(n, config["r"]) for n in TARGETS}
    scalings = {n: config["alpha"] / r_of[n] for n in TARGETS}
    torch.manual_seed(config["seed"])
    initial = make_factors(model, r_of, config, config["init"])
    next_draw = torch.rand(3)
    torch.manual_seed(config["seed"])
    chosen = make_factors(model, r_of, config, False)
    with torch.no_grad():
        eval_output = forward(model, chosen, scalings, config, x, training=False)
    torch.manual_seed(config["train_seed"])
    train_output = forward(model, chosen, scalings, config, x, True)
    train_output.sum().backward()
    grads = {f"{n}.{s}": tensor(w.grad if w.grad is not None else torch.zeros_like(w))
             for n, f in chosen.items() for s, w in f.items()}
    modules = dict(model.named_modules())
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + delta(modules[n], chosen[n], scalings[n], False, 0.0,
                                                                  False))
                  for n in TARGETS}
    trained = {n: {s: w.detach().clone().requires_grad_() for s, w in f.items()} for n, f in chosen.items()}
    optimizer = torch.optim.AdamW([w for f in trained.values() for w in f.values()], lr=1e-2)
    losses = []
    torch.manual_seed(config["train_seed"])
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, scalings, config, x, True), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # PyTorch 2's default (Debian's 1.13 zeroes them)
    as_json = lambda factors: {f"{n}.{s}": tensor(w) for n, f in factors.items() for s, w in f.items()}
    init = {True: "true", False: "false", "lycoris": "lycoris"}[config["init"]]
    return dict(config, init=init, initial=as_json(initial), next_draw=tensor(next_draw), chosen=as_json(chosen),
                eval_output=tensor(eval_output), train_output=tensor(train_output), grads=grads, merged=merged,
                losses=losses, trained=as_json(trained),
                names=[f"{n}.{s}" for n in TARGETS for s in chosen[n]])


def lokr_case(out):
    torch.manual_seed(61)
    model = LokrNet()
    torch.jit.script(model).save(str(out / "lokr_model.pt"))
    # A layer without weights (nn.Linear(0, 4), whose draw PyTorch skips), for test_lokr.cpp.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.script(nn.Sequential(nn.Linear(0, 4))).save(str(out / "empty_linear_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(67)
    x = torch.randn(2, 4, 5, 5, generator=g)
    target = torch.randn(2, 3, generator=g)
    cp = {"r": 2, "alpha": 3.0, "rank_pattern": {"conv": 1, "seq": 1}, "decompose_both": True,
          "decompose_factor": -1, "use_effective_conv2d": True, "rank_dropout": 0.25, "module_dropout": 0.2,
          "rank_dropout_scale": True, "init": True, "seed": 71, "train_seed": 73}
    plain = {"r": 2, "alpha": 4.0, "rank_pattern": {"seq": 4}, "decompose_both": False, "decompose_factor": 2,
             "use_effective_conv2d": False, "rank_dropout": 0.3, "module_dropout": 0.1, "rank_dropout_scale": False,
             "init": "lycoris", "seed": 79, "train_seed": 83}
    # LyCORIS' factorization over dimensions and factors (those that divide, those that do not, 0,
    # negative ones), for tests/cpp/test_lokr_factorization.cpp.
    splits = [[dimension, factor, *factorization(dimension, factor)]
              for dimension in list(range(1, 130)) + [768, 1000, 3072, 4096, 4097, 11008]
              for factor in (-1, -2, 0, 1, 2, 3, 4, 7, 16, 64)]
    return {"targets": ",".join(TARGETS), "input": tensor(x), "target": tensor(target),
            "cp": run(model, cp, x, target), "plain": run(model, plain, x, target), "factorizations": splits}
