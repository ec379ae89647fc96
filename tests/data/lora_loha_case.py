"""PEFT's LoHa restated (peft/tuners/loha/layer.py and lycoris_utils.py; PEFT is not packaged for
Debian), for tests/capi/test_loha.cpp: each targeted layer (nn.Linear, nn.Conv1d, nn.Conv2d), in
named_modules() order, gets hada_w1_a (out x r), hada_w1_b (r x in), hada_w2_a (out x r), hada_w2_b
(r x in), a convolution's `in` its input channels per group times its kernel; init_weights
Kaiming-uniform draws w1_a, w1_b, w2_a and zeroes w2_b (false: all four drawn). The delta
((w1_a @ w1_b) * (w2_a @ w2_b)) * scale (PEFT's HadaWeight, its own backward), scale
torch.tensor(alpha / r), reshaped to the weight's shape; in training, rank_dropout keeps each output
row with torch.rand(out) > p and rescales by the mean, and each layer's branch is added only where
torch.rand(1) > module_dropout (drawn at every training forward). The output is base(x) +
F.linear(x, delta) (a convolution's F.conv with the layer's stride, padding, dilation and groups),
cast to x's dtype; merging adds the delta to the weight. Written: loha_model.pt and the case.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import lycoris_forward, tensor

TARGETS = ["conv", "seq", "fc1", "head"]


class LohaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.seq = nn.Conv1d(4, 3, 2)
        self.fc1 = nn.Linear(45, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(2)
        h = self.seq(h).flatten(1)
        return self.head(torch.tanh(self.fc1(h)))


class HadaWeight(torch.autograd.Function):
    """PEFT's: the delta, and its gradients computed by hand."""

    @staticmethod
    def forward(ctx, w1a, w1b, w2a, w2b, scale):
        ctx.save_for_backward(w1a, w1b, w2a, w2b, scale)
        return ((w1a @ w1b) * (w2a @ w2b)) * scale

    @staticmethod
    def backward(ctx, grad_out):
        w1a, w1b, w2a, w2b, scale = ctx.saved_tensors
        grad_out = grad_out * scale
        temp = grad_out * (w2a @ w2b)
        grad_w1a, grad_w1b = temp @ w1b.T, w1a.T @ temp
        temp = grad_out * (w1a @ w1b)
        return grad_w1a, grad_w1b, temp @ w2b.T, w2a.T @ temp, None


def ranks(r, rank_pattern):
    return {name: rank_pattern.get(name, r) for name in TARGETS}


SUFFIXES = ("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b", "hada_t1", "hada_t2")


def make_factors(model, r_of, init, cp=False):
    """PEFT's create_adapter_parameters and reset_adapter_parameters(_random), in module order; with
    use_effective_conv2d (`cp`) a convolution wider than 1 x 1 gets the CP form: hada_w1_a, hada_w2_a
    r x out, hada_w1_b, hada_w2_b r x in, hada_t1, hada_t2 r x r x kernel (a 1-D one's k x 1)."""
    factors = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        r = r_of[name]
        out_f = module.weight.shape[0]
        kernel = list(module.weight.shape[2:])
        if cp and kernel and math.prod(kernel) != 1:
            in_f = module.weight.shape[1]
            core = [r, r, kernel[0], kernel[1] if len(kernel) > 1 else 1]
            shapes = [(r, out_f), (r, in_f), (r, out_f), (r, in_f), core, core]
        else:
            in_f = module.weight[0].numel()  # a convolution's in_channels / groups times its kernel
            shapes = [(out_f, r), (r, in_f), (out_f, r), (r, in_f)]
        f = {s: torch.empty(shape) for s, shape in zip(SUFFIXES, shapes)}
        for s, w in f.items():
            if init and s == "hada_w2_b":
                nn.init.zeros_(w)
            else:
                nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        factors[name] = {s: w.requires_grad_() for s, w in f.items()}
    return factors


class HadaWeightCP(torch.autograd.Function):
    """PEFT's CP form: each product rebuilt from its core by einsum, and the gradients by hand."""

    @staticmethod
    def forward(ctx, t1, w1a, w1b, t2, w2a, w2b, scale):
        ctx.save_for_backward(t1, w1a, w1b, t2, w2a, w2b, scale)
        rebuild1 = torch.einsum("i j k l, j r, i p -> p r k l", t1, w1b, w1a)
        rebuild2 = torch.einsum("i j k l, j r, i p -> p r k l", t2, w2b, w2a)
        return rebuild1 * rebuild2 * scale

    @staticmethod
    def backward(ctx, grad_out):
        t1, w1a, w1b, t2, w2a, w2b, scale = ctx.saved_tensors
        grad_out = grad_out * scale
        grads = []
        for (t, wa, wb), (t_other, wa_other, wb_other) in (((t1, w1a, w1b), (t2, w2a, w2b)),
                                                            ((t2, w2a, w2b), (t1, w1a, w1b))):
            temp = torch.einsum("i j k l, j r -> i r k l", t_other, wb_other)
            grad_w = torch.einsum("i j k l, i r -> r j k l", temp, wa_other) * grad_out
            grad_wa = torch.einsum("r j k l, i j k l -> r i", temp, grad_w)
            grad_temp = torch.einsum("i j k l, i r -> r j k l", grad_w, wa.T)
            grad_wb = torch.einsum("i r k l, i j k l -> r j", t, grad_temp)
            grad_t = torch.einsum("i j k l, j r -> i r k l", grad_temp, wb.T)
            grads += [grad_t, grad_wa, grad_wb]
        return (*grads, None)


def delta(module, f, scaling, training, rank_dropout):
    if "hada_t1" in f:
        weight = HadaWeightCP.apply(f["hada_t1"], f["hada_w1_a"], f["hada_w1_b"], f["hada_t2"], f["hada_w2_a"],
                                    f["hada_w2_b"], torch.tensor(scaling))
    else:
        weight = HadaWeight.apply(*(f[s] for s in SUFFIXES[:4]), torch.tensor(scaling))
    weight = weight.reshape(module.weight.shape)
    if training and rank_dropout:
        drop = (torch.rand(weight.size(0)) > rank_dropout).to(weight.dtype)
        drop = drop.view(-1, *[1] * len(weight.shape[1:]))
        drop /= drop.mean()
        weight *= drop
    return weight


def forward(model, factors, scalings, x, training, rank_dropout=0.0, module_dropout=0.0):
    deltas = {name: (lambda module, f=f, s=scalings[name]: delta(module, f, s, training, rank_dropout))
              for name, f in factors.items()}
    return lycoris_forward(model, deltas, x, training, module_dropout)


def run(model, cp, seed, train_seed):
    r, alpha, rank_pattern = 2, 3.0, {"head": 3}
    r_of = ranks(r, rank_pattern)
    scalings = {n: alpha / r_of[n] for n in TARGETS}
    torch.manual_seed(seed)
    initial = make_factors(model, r_of, True, cp)
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    chosen = make_factors(model, r_of, False, cp)
    g = torch.Generator().manual_seed(57)
    x = torch.randn(2, 2, 4, 4, generator=g)
    with torch.no_grad():
        eval_output = forward(model, chosen, scalings, x, training=False)
    rank_dropout, module_dropout = 0.25, 0.3
    torch.manual_seed(train_seed)
    train_output = forward(model, chosen, scalings, x, True, rank_dropout, module_dropout)
    train_output.sum().backward()
    grads = {f"{n}.{s}": tensor(w.grad if w.grad is not None else torch.zeros_like(w))
             for n, f in chosen.items() for s, w in f.items()}
    modules = dict(model.named_modules())
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + delta(modules[n], chosen[n], scalings[n], False, 0.0))
                  for n in TARGETS}
    target = torch.randn(2, 3, generator=g)
    trained = {n: {s: w.detach().clone().requires_grad_() for s, w in f.items()} for n, f in chosen.items()}
    optimizer = torch.optim.AdamW([w for f in trained.values() for w in f.values()], lr=1e-2)
    losses = []
    torch.manual_seed(train_seed)
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, scalings, x, True, rank_dropout, module_dropout), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # PyTorch 2's default (Debian's 1.13 zeroes them)
    as_json = lambda factors: {f"{n}.{s}": tensor(w) for n, f in factors.items() for s, w in f.items()}
    return {"targets": ",".join(TARGETS), "r": r, "alpha": alpha, "rank_pattern": rank_pattern, "seed": seed,
            "initial": as_json(initial), "next_draw": tensor(next_draw), "chosen": as_json(chosen),
            "input": tensor(x), "eval_output": tensor(eval_output), "rank_dropout": rank_dropout,
            "module_dropout": module_dropout, "train_seed": train_seed, "train_output": tensor(train_output),
            "grads": grads, "merged": merged, "target": tensor(target), "losses": losses,
            "trained": as_json(trained), "names": [f"{n}.{s}" for n in TARGETS for s in chosen[n]]}


def loha_case(out):
    torch.manual_seed(51)
    model = LohaNet()
    torch.jit.script(model).save(str(out / "loha_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    # use_effective_conv2d: both convolutions in the CP form (as "cp").
    return dict(run(model, False, 53, 59), cp=run(model, True, 61, 67))
