"""A scripted model with nn.Linear layers and what PEFT's LoRA does to it, for tests/capi/test_lora.cpp.

PEFT itself is not packaged for Debian, so its LoRA layer is reproduced here from its definition
(peft/tuners/lora/layer.py): for each targeted nn.Linear, in named_modules() order, lora_A =
nn.Linear(in, r, bias=False) and lora_B = nn.Linear(r, out, bias=False) are made (each drawing its
default initialisation), then A is Kaiming-uniform re-initialised and B zeroed; the layer's output
becomes base(x) + lora_B(lora_A(x)) * lora_alpha / r. Written: lora_model.pt (TorchScript) and
lora_cases.json (the initial A matrices after manual_seed(1234), the next draw from the global
generator, chosen B matrices, an input, PEFT's output and the merged weights) and, for the same
network written as a layer spec, PEFT's output in training mode with lora_dropout (its "spec" case)
and with DoRA (its "dora" case, from peft/tuners/lora/dora.py); lora_bias on the TorchScript model
(its "lora_bias" case); and the initialisations that decompose the weights, OLoRA and PiSSA (its
"decomposing" case); trainable token rows beside LoRA ("tokens") and alone, PEFT's
TrainableTokensConfig ("standalone_tokens"); LoRA on convolutions ("conv"); on grouped
convolutions with lora_bias, and DoRA on convolutions ("conv_variants"); LoRA on an embedding
("embedding"); LoRA on transformers' Conv1D, GPT-2's layers ("conv1d"); LoRA on
nn.MultiheadAttention ("attention"); LoRA on parameters, a mixture of experts' 3-D weights
(target_parameters: "parameters", lora_parameters_case.py); EVA's data-driven start ("eva",
lora_eva_case.py); CorDA's ("corda", lora_corda_case.py); LoRA-GA's ("lora_ga", lora_ga_case.py);
LoftQ's ("loftq", lora_loftq_case.py); PEFT's IA3 ("ia3", lora_ia3_case.py); PEFT's LoHa ("loha", lora_loha_case.py);
PEFT's LoKr ("lokr", lora_lokr_case.py); PEFT's VeRA ("vera", lora_vera_case.py);
PEFT's OFT ("oft", lora_oft_case.py); PEFT's AdaLoRA ("adalora", lora_adalora_case.py); PEFT's BOFT
("boft", lora_boft_case.py); PEFT's HRA ("hra", lora_hra_case.py);
PEFT's FourierFT ("fourierft", lora_fourierft_case.py); PEFT's LN tuning ("ln_tuning",
lora_ln_tuning_case.py); PEFT's MiSS ("miss", lora_miss_case.py); PEFT's C3A ("c3a",
lora_c3a_case.py); PEFT's SHiRA ("shira", lora_shira_case.py); PEFT's RandLoRA ("randlora",
lora_randlora_case.py); PEFT's DeLoRA ("delora", lora_delora_case.py); PEFT's RoAd ("road",
lora_road_case.py); PEFT's GraLoRA ("gralora", lora_gralora_case.py); PEFT's HiRA ("hira", lora_hira_case.py);
PEFT's PVeRA ("pvera", lora_pvera_case.py).

Run with Debian's python3-torch: python3 export_lora_cases.py OUTPUT_DIR
"""
import json
import math
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from lora_corda_case import corda_case
from lora_eva_case import eva_case
from lora_ga_case import lora_ga_case
from lora_ia3_case import ia3_case
from lora_loha_case import loha_case
from lora_lokr_case import lokr_case
from lora_vera_case import vera_case
from lora_oft_case import oft_case
from lora_adalora_case import adalora_case
from lora_boft_case import boft_case
from lora_hra_case import hra_case
from lora_fourierft_case import fourierft_case
from lora_miss_case import miss_case
from lora_c3a_case import c3a_case
from lora_delora_case import delora_case
from lora_road_case import road_case
from lora_gralora_case import gralora_case
from lora_hira_case import hira_case
from lora_pvera_case import pvera_case
from lora_randlora_case import randlora_case
from lora_shira_case import shira_case
from lora_ln_tuning_case import ln_tuning_case
from lora_loftq_case import loftq_case
from lora_parameters_case import parameters_case
from peft_restated import linear_pair, svd_lowrank_2x, tensor


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.norm(self.block(torch.tanh(self.fc1(x)))))


def targeted(name, targets):
    return any(name == t or name.endswith("." + t) for t in targets)


def make_adapters(model, targets, r, lora_bias=False):
    """PEFT's adapters for the targeted nn.Linear layers, drawn as PEFT draws them (with lora_bias,
    lora_B's bias is drawn by nn.Linear and zeroed, and comes third)."""
    adapters = {}
    for name, module in model.named_modules():
        if not targeted(name, targets):
            continue
        lora_a = nn.Linear(module.in_features, r, bias=False)
        lora_b = nn.Linear(r, module.out_features, bias=lora_bias)
        nn.init.kaiming_uniform_(lora_a.weight, a=math.sqrt(5))
        nn.init.zeros_(lora_b.weight)
        adapters[name] = (lora_a.weight.detach().clone(), lora_b.weight.detach().clone())
        if lora_bias:
            nn.init.zeros_(lora_b.bias)
            adapters[name] += (lora_b.bias.detach().clone(),)
    return adapters


def lora_bias_case(model, g):
    """PEFT's lora_bias on Net: the draws (lora_B = nn.Linear(r, out, bias=True)), then chosen B
    matrices and biases; the output, PEFT's base(x) + lora_B(lora_A(x)) * scaling with lora_B's
    bias, and the merged weights and biases."""
    targets, r, alpha, seed = ["fc1", "head"], 2, 4.0, 17
    scaling = alpha / r
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    adapters = make_adapters(model, targets, r, lora_bias=True)
    next_draw = torch.rand(3)
    chosen_b = {n: 0.3 * torch.randn(b.shape, generator=g) for n, (a, b, c) in adapters.items()}
    chosen_bias = {n: 0.2 * torch.randn(c.shape, generator=g) for n, (a, b, c) in adapters.items()}
    x = torch.randn(5, 6, generator=g)

    def hook(name):
        a = adapters[name][0]
        return lambda m, inputs, output: output + F.linear(F.linear(inputs[0], a), chosen_b[name],
                                                           chosen_bias[name]) * scaling

    handles = [modules[n].register_forward_hook(hook(n)) for n in adapters]
    with torch.no_grad():
        y = model(x)
    for h in handles:
        h.remove()
    merged = {}
    for n, (a, b, c) in adapters.items():
        merged[n + ".weight"] = tensor(modules[n].weight + (chosen_b[n] @ a) * scaling)
        merged[n + ".bias"] = tensor(modules[n].bias + chosen_bias[n] * scaling)
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "seed": seed,
            "initial_a": {n: tensor(v[0]) for n, v in adapters.items()}, "next_draw": tensor(next_draw),
            "chosen_b": {n: tensor(b) for n, b in chosen_b.items()},
            "chosen_bias": {n: tensor(c) for n, c in chosen_bias.items()},
            "input": tensor(x), "output": tensor(y), "merged": merged}


def peft_decompose(weight, init, r, scaling):
    """PEFT's olora_init and pissa_init: A, B (float32) and the residual weight (in the weight's dtype)."""
    w = weight.detach().to(torch.float32)
    if init == "olora":
        q, rr = torch.linalg.qr(w)
        b, a = q[:, :r].contiguous(), rr[:r].contiguous()
    else:
        if init == "pissa":
            v, s, uh = torch.linalg.svd(w, full_matrices=False)
            v_r, s_r, uh_r = v[:, :r], s[:r], uh[:r]
        else:
            v_r, s_r, u_r = svd_lowrank_2x(w, r, int(init.split("_niter_")[-1]))
            uh_r = u_r.t()
        s_r = s_r / scaling
        a = torch.diag(torch.sqrt(s_r)) @ uh_r
        b = v_r @ torch.diag(torch.sqrt(s_r))
    return a, b, (w - scaling * b @ a).to(weight.dtype)


def peft_orthogonal(in_features, out_features, r):
    """PEFT's orthogonal_init: a random orthogonal r x r matrix's odd and even rows project Gaussian
    draws, so that B A is zero (to rounding) while neither is."""
    q, _ = torch.linalg.qr(torch.randn(r, r))
    a = torch.randn(in_features, r // 2).mm(q[0::2, :]).T / 10.0
    b = torch.randn(r // 2, out_features).T.mm(q[1::2, :]) / 10.0
    return a.contiguous(), b.contiguous()


def decomposing_cases(model, g):
    """PEFT's OLoRA, PiSSA and orthogonal initialisations on Net (and PiSSA on Net in bfloat16): per
    targeted layer, in module order, nn.Linear's draws for lora_A and lora_B, then the decomposition
    (or the orthogonal start, which leaves the weight); the adapters (moved to the layer's dtype, then
    float32 again), the residual weights, the next global draw, and the adapted model's output at the
    start."""
    import copy
    targets, r, alpha, seed = ["fc1", "block.0", "head"], 2, 4.0, 23
    scaling = alpha / r
    x = torch.randn(5, 6, generator=g)
    cases = {}
    for init, dtype in [("olora", torch.float32), ("pissa", torch.float32), ("pissa_niter_2", torch.float32),
                        ("pissa", torch.bfloat16), ("orthogonal", torch.float32)]:
        net = copy.deepcopy(model).to(dtype)
        modules = dict(net.named_modules())
        torch.manual_seed(seed)
        adapters = {}
        for name, module in net.named_modules():
            if not targeted(name, targets):
                continue
            nn.Linear(module.in_features, r, bias=False)
            nn.Linear(r, module.out_features, bias=False)
            if init == "orthogonal":  # the weight stays
                a, b = peft_orthogonal(module.in_features, module.out_features, r)
            else:
                a, b, residual = peft_decompose(module.weight, init, r, scaling)
                with torch.no_grad():
                    module.weight.copy_(residual)
            adapters[name] = (a.to(dtype).float(), b.to(dtype).float())
        next_draw = torch.rand(3)

        def hook(name):
            a, b = adapters[name]
            return lambda m, inputs, output: (output + F.linear(F.linear(inputs[0].float(), a), b) * scaling).to(
                output.dtype)

        handles = [modules[n].register_forward_hook(hook(n)) for n in adapters]
        with torch.no_grad():
            y = net(x.to(dtype))
        for h in handles:
            h.remove()
        cases[init + ("_bf16" if dtype == torch.bfloat16 else "")] = {
            "init": init, "initial_a": {n: tensor(a) for n, (a, b) in adapters.items()},
            "initial_b": {n: tensor(b) for n, (a, b) in adapters.items()},
            "residual": {n: tensor(modules[n].weight.float()) for n in adapters},
            "next_draw": tensor(next_draw), "output": tensor(y.float())}
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "seed": seed, "input": tensor(x),
            "cases": cases}


def peft_forward(model, adapters, chosen_b, scaling, dropout, x):
    """PEFT's Linear.forward on the adapted layers: base(x) + lora_B(lora_A(dropout(x))) * scaling."""
    modules = dict(model.named_modules())

    def hook(name):
        a, b = adapters[name][0], chosen_b[name]
        return lambda m, inputs, output: output + F.linear(
            F.linear(F.dropout(inputs[0], dropout, m.training), a), b) * scaling

    handles = [modules[name].register_forward_hook(hook(name)) for name in adapters]
    y = model(x)
    for h in handles:
        h.remove()
    return y


# Net as a layer spec: fc1 is layer 0, block.0 layer 2, norm layer 4, head layer 5.
SPEC = [{"type": "linear", "in_features": 6, "out_features": 8}, {"type": "tanh"},
        {"type": "linear", "in_features": 8, "out_features": 8}, {"type": "relu"},
        {"type": "layernorm", "normalized_shape": 8}, {"type": "linear", "in_features": 8, "out_features": 3}]
SPEC_NAMES = {"fc1": "0", "block.0": "2", "norm": "4", "head": "5"}


def spec_case(model, g):
    """PEFT with lora_dropout 0.3 in training mode on Net, named as the spec model names it."""
    targets, r, alpha, dropout, seed = ["0", "2", "5"], 2, 6.0, 0.3, 11
    net_targets = [n for n, s in SPEC_NAMES.items() if s in targets]
    torch.manual_seed(seed)
    adapters = make_adapters(model, net_targets, r)
    chosen_b = {name: 0.3 * torch.randn(b.shape, generator=g) for name, (a, b) in adapters.items()}
    x = torch.randn(4, 6, generator=g)
    model.train()
    y = peft_forward(model, adapters, chosen_b, alpha / r, dropout, x)
    model.eval()
    state = {}
    for key, value in model.state_dict().items():
        module, _, leaf = key.rpartition(".")
        state[SPEC_NAMES[module] + "." + leaf] = tensor(value)
    return {"spec": SPEC, "state": state, "targets": ",".join(targets), "r": r, "lora_alpha": alpha,
            "lora_dropout": dropout, "seed": seed,
            "initial_a": {SPEC_NAMES[n]: tensor(a) for n, (a, b) in adapters.items()},
            "chosen_b": {SPEC_NAMES[n]: tensor(b) for n, b in chosen_b.items()},
            "input": tensor(x), "train_output": tensor(y)}


def dora_case(model, g):
    """PEFT's DoRA (peft/tuners/lora/dora.py, variants.py) on Net named as the spec model names it:
    the magnitudes as PEFT starts them, then chosen B matrices and magnitudes; the outputs in
    training mode with lora_dropout and in evaluation, and PEFT's merged weights."""
    targets, r, alpha, dropout, seed = ["0", "2", "5"], 2, 6.0, 0.3, 13
    scaling = alpha / r
    net_targets = [n for n, s in SPEC_NAMES.items() if s in targets]
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    adapters = make_adapters(model, net_targets, r)
    initial_m = {n: torch.linalg.norm(modules[n].weight + scaling * (b @ a), dim=1) for n, (a, b) in adapters.items()}
    chosen_b = {n: 0.3 * torch.randn(b.shape, generator=g) for n, (a, b) in adapters.items()}
    chosen_m = {n: m * (1 + 0.2 * torch.randn(m.shape, generator=g)) for n, m in initial_m.items()}
    x = torch.randn(4, 6, generator=g)

    def hook(name, training):
        a, b, m = adapters[name][0], chosen_b[name], chosen_m[name]

        def dora(module, inputs, output):
            h = inputs[0]
            if dropout > 0 and training:
                h = F.dropout(h, dropout, True)
                base = F.linear(h, module.weight)
            else:
                base = output - module.bias
            lora_weight = F.linear(F.linear(torch.eye(a.shape[1]), a), b).T
            norm = torch.linalg.norm(module.weight + scaling * lora_weight.detach(), dim=1).detach()
            scale = (m / norm).view(1, -1)
            return output + ((scale - 1) * base + scale * F.linear(F.linear(h, a), b) * scaling)
        return dora

    outputs = {}
    for training in (True, False):
        model.train(training)
        handles = [modules[n].register_forward_hook(hook(n, training)) for n in adapters]
        with torch.no_grad():
            outputs[training] = model(x)
        for h in handles:
            h.remove()
    model.eval()
    merged = {}
    for n, (a, b) in adapters.items():
        w = modules[n].weight.detach()
        delta = (chosen_b[n] @ a) * scaling
        norm = torch.linalg.norm(w + 1 * delta, dim=1)
        merged[SPEC_NAMES[n] + ".weight"] = tensor((chosen_m[n] / norm).view(-1, 1) * (w + delta))
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "initial_a": {SPEC_NAMES[n]: tensor(a) for n, (a, b) in adapters.items()},
            "initial_magnitude": {SPEC_NAMES[n]: tensor(m) for n, m in initial_m.items()},
            "chosen_b": {SPEC_NAMES[n]: tensor(b) for n, b in chosen_b.items()},
            "chosen_magnitude": {SPEC_NAMES[n]: tensor(m) for n, m in chosen_m.items()},
            "input": tensor(x), "train_output": tensor(outputs[True]), "eval_output": tensor(outputs[False]),
            "merged": merged}


class TokNet(nn.Module):
    """An embedding, a linear layer and a head tied to the embedding (GPT-2's)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.fc = nn.Linear(6, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.fc(self.embed(ids))))


def token_batch(step):
    ids = torch.tensor([(7 * i + 3 * step) % 10 for i in range(12)]).reshape(3, 4)
    return ids, (ids * 3 + 1) % 10


def train_on_token_batches(forward, parameters, lr):
    """Three AdamW steps of next-token loss over token_batch(0..2); the losses."""
    opt = torch.optim.AdamW(parameters, lr=lr)
    losses = []
    for step in range(3):
        ids, targets = token_batch(step)
        loss = F.cross_entropy(forward(ids).reshape(-1, 10), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def tokens_case(out):
    """LoRA on fc with trainable_token_indices [7, 2, 9] (the list form: the input embedding), as PEFT
    computes it: every wrapped layer (the embedding, and the head through its tied adapter) computes
    with W.index_copy(0, indices, delta); delta starts as W's rows. Three AdamW steps of next-token
    loss, then PEFT's merged embedding weight."""
    torch.manual_seed(21)
    model = TokNet()
    torch.jit.script(model).save(str(out / "tokens_model.pt"))
    indices, r, alpha, seed, lr = [7, 2, 9], 2, 4.0, 31, 0.05
    scaling = alpha / r
    torch.manual_seed(seed)
    (a, b), = make_adapters(model, ["fc"], r).values()
    a, b = a.requires_grad_(), b.requires_grad_()
    w = model.embed.weight.detach()
    index = torch.tensor(indices)
    delta = w[indices].clone().requires_grad_()
    initial_delta = delta.detach().clone()

    def peft_forward(ids, adapters=True):
        weight = w.index_copy(0, index, delta) if adapters else w
        x = F.embedding(ids, weight)
        h = F.linear(x, model.fc.weight.detach(), model.fc.bias.detach())
        if adapters:
            h = h + F.linear(F.linear(x, a), b) * scaling
        head_weight = w.index_copy(0, index, delta) if adapters else w  # the tied adapter's own
        return F.linear(torch.tanh(h), head_weight)

    ids0, _ = token_batch(0)
    with torch.no_grad():
        base_output = peft_forward(ids0, adapters=False)
    losses = train_on_token_batches(peft_forward, [delta, a, b], lr)
    with torch.no_grad():
        output = peft_forward(ids0)
    merged = w.index_copy(0, index, delta.detach())
    return {"indices": indices, "targets": "fc", "r": r, "lora_alpha": alpha, "seed": seed, "lr": lr,
            "batches": [[t.flatten().tolist() for t in token_batch(step)] for step in range(3)],
            "initial_delta": tensor(initial_delta), "base_output": tensor(base_output), "losses": losses,
            "delta": tensor(delta), "lora_A": tensor(a), "lora_B": tensor(b), "output": tensor(output),
            "merged_embed": tensor(merged)}


def standalone_tokens_case():
    """PEFT's TrainableTokensConfig(token_indices=[7, 2, 9], init_weights=False) on TokNet: no
    target_modules, so the input embedding ("embed"), and the head tied to it through PEFT's tied
    adapter; the delta starts as torch.randn((3, 6)) after manual_seed(seed), then the next draws;
    every other parameter frozen. Three AdamW steps of next-token loss, the outputs, the merged
    embedding."""
    torch.manual_seed(21)
    model = TokNet()  # the weights tokens_case saved
    indices, seed, lr = [7, 2, 9], 41, 0.05
    torch.manual_seed(seed)
    w = model.embed.weight.detach()
    delta = torch.randn((len(indices), w.shape[1]), dtype=w.dtype, device=w.device).clone().requires_grad_()
    next_draw = torch.rand(3)
    initial_delta = delta.detach().clone()
    index = torch.tensor(indices)

    def peft_forward(ids):
        weight = w.index_copy(0, index, delta)
        h = F.linear(F.embedding(ids, weight), model.fc.weight.detach(), model.fc.bias.detach())
        return F.linear(torch.tanh(h), w.index_copy(0, index, delta))

    losses = train_on_token_batches(peft_forward, [delta], lr)
    with torch.no_grad():
        output = peft_forward(token_batch(0)[0])
    return {"indices": indices, "seed": seed, "lr": lr, "initial_delta": tensor(initial_delta),
            "batches": [[t.flatten().tolist() for t in token_batch(step)] for step in range(3)],
            "next_draw": tensor(next_draw), "losses": losses, "delta": tensor(delta), "output": tensor(output),
            "merged_embed": tensor(w.index_copy(0, index, delta.detach()))}


class ConvNet(nn.Module):
    """Convolutions of 2 and 1 dimensions (3 x 3 padded, 1 x 1, 3 x 3 with a stride, a Conv1d) and a
    linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)
        self.conv3 = nn.Conv2d(4, 3, 3, stride=2)
        self.seq = nn.Conv1d(3, 3, 2)
        self.head = nn.Linear(9, 3)

    def forward(self, x):
        h = self.conv3(torch.tanh(self.conv2(torch.relu(self.conv1(x)))))
        return self.head(self.seq(h.flatten(2)).flatten(1))


class OddConvs(nn.Module):
    """Convolutions PEFT's lora_A would not follow (dilated, reflect-padded, 'same'-padded) and a
    grouped one."""

    def __init__(self):
        super().__init__()
        self.dilated = nn.Conv2d(2, 2, 3, dilation=2, padding=2)
        self.grouped = nn.Conv2d(2, 2, 1, groups=2)
        self.reflect = nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect")
        self.same = nn.Conv2d(2, 2, 3, padding="same")

    def forward(self, x):
        return self.same(self.reflect(self.grouped(self.dilated(x))))


class ReadsConvWeight(nn.Module):
    """A forward that reads its convolution's weight itself instead of calling the layer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        return F.conv2d(x, self.conv.weight, self.conv.bias, padding=1).flatten(1)


def conv_case(out):
    """PEFT's LoRA on convolutions (peft/tuners/lora/layer.py _ConvNd, restated): lora_A =
    type(base)(in, r, kernel, stride, padding, bias=False), lora_B = type(base)(r, out, 1...,
    groups=base.groups, bias=False), drawn and re-initialised as the linear layers' are; the branch
    lora_B(lora_A(dropout(x))) * scaling; merged with get_delta_weight. Written: conv_model.pt,
    odd_convs_model.pt; the initial adapters after manual_seed(seed) and the next draws, chosen B
    weights, the outputs in evaluation and, after manual_seed(train_seed), in training mode with
    dropout, the gradients of a sum of the training output, and the merged weights; and
    conv_weight_read_model.pt, whose forward reads its convolution's weight itself."""
    torch.manual_seed(5)
    model = ConvNet()
    torch.jit.script(model).save(str(out / "conv_model.pt"))
    torch.jit.script(OddConvs()).save(str(out / "odd_convs_model.pt"))
    torch.jit.script(ReadsConvWeight()).save(str(out / "conv_weight_read_model.pt"))
    targets, r, alpha, dropout, seed, train_seed = ["conv1", "conv2", "conv3", "seq", "head"], 2, 4.0, 0.25, 8, 9
    scaling = alpha / r
    for p in model.parameters():
        p.requires_grad_(False)  # PEFT freezes the base model
    torch.manual_seed(seed)
    adapters = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        if isinstance(module, nn.Linear):
            a, b = nn.Linear(module.in_features, r, bias=False), nn.Linear(r, module.out_features, bias=False)
        else:
            conv, ones = type(module), (1,) * (module.weight.dim() - 2)
            a = conv(module.in_channels, r, module.kernel_size, module.stride, module.padding, bias=False)
            b = conv(r, module.out_channels, ones, ones, groups=module.groups, bias=False)
        nn.init.kaiming_uniform_(a.weight, a=math.sqrt(5))
        nn.init.zeros_(b.weight)
        adapters[name] = (a, b)
    initial_a = {n: tensor(a.weight) for n, (a, b) in adapters.items()}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(17)
    with torch.no_grad():
        for a, b in adapters.values():
            b.weight.copy_(0.3 * torch.randn(b.weight.shape, generator=g))
    x = torch.randn(2, 2, 6, 6, generator=g)
    modules = dict(model.named_modules())

    def hook(name, training):
        a, b = adapters[name]

        def add(module, inputs, output):
            return output + b(a(F.dropout(inputs[0], dropout, training))) * scaling
        return add

    def forward(training):
        model.train(training)
        handles = [modules[n].register_forward_hook(hook(n, training)) for n in adapters]
        y = model(x)
        for h in handles:
            h.remove()
        return y

    with torch.no_grad():
        eval_output = forward(False)
    torch.manual_seed(train_seed)
    train_output = forward(True)
    train_output.sum().backward()
    grads = {n + suffix: tensor(layer.weight.grad) for n, (a, b) in adapters.items()
             for suffix, layer in ((".lora_A.weight", a), (".lora_B.weight", b))}

    def delta(name):
        a, b = adapters[name][0].weight.detach(), adapters[name][1].weight.detach()
        base = modules[name]
        if isinstance(base, nn.Linear):
            return (b @ a) * scaling
        if base.weight.size()[2:4] == (1, 1):
            return (b.squeeze(3).squeeze(2) @ a.squeeze(3).squeeze(2)).unsqueeze(2).unsqueeze(3) * scaling
        conv_fn = F.conv2d if base.weight.dim() == 4 else F.conv1d
        return conv_fn(a.transpose(0, 1), b).transpose(0, 1) * scaling

    merged = {n + ".weight": tensor(modules[n].weight + delta(n)) for n in adapters}
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "initial_a": initial_a, "next_draw": tensor(next_draw),
            "chosen_b": {n: tensor(b.weight) for n, (a, b) in adapters.items()}, "input": tensor(x),
            "eval_output": tensor(eval_output), "train_output": tensor(train_output), "grads": grads,
            "merged": merged}


def outputs_with_hooks(model, hook, layers, x, train_seed):
    """The model's outputs on x with hook(name, training) on each of `layers` (PEFT's adapters added to
    their outputs): in evaluation without gradients, then, after manual_seed(train_seed), in training
    mode, the sum of the output backpropagated. By training (False, True)."""
    modules = dict(model.named_modules())
    outputs = {}
    for training in (False, True):
        model.train(training)
        handles = [modules[n].register_forward_hook(hook(n, training)) for n in layers]
        if training:
            torch.manual_seed(train_seed)
            outputs[training] = model(x)
            outputs[training].sum().backward()
        else:
            with torch.no_grad():
                outputs[training] = model(x)
        for h in handles:
            h.remove()
    model.eval()
    return outputs


def embed_net_adapters(modules, targets, r, init):
    """PEFT's adapters of EmbedNet's `targets`, made in their order as PEFT's update_layer makes them:
    an embedding's torch.randn((r, num_embeddings)) and torch.randn((dim, r)), then A zero and B from
    N(0, 1) again; a linear layer's two nn.Linear draws, then Kaiming A and zero B. With init "mica",
    after the same first draws, PEFT's mica_init: B the r left singular vectors of the smallest
    singular values (of the embedding's weight transposed), frozen, A zero. By name: (A, B)."""
    adapters = {}
    for name in targets:
        module = modules[name]
        embedding = isinstance(module, nn.Embedding)
        if embedding:
            a = nn.Parameter(torch.randn((r, module.num_embeddings)))
            b = nn.Parameter(torch.randn((module.embedding_dim, r)))
        else:
            a = nn.Linear(module.in_features, r, bias=False).weight
            b = nn.Linear(r, module.out_features, bias=False).weight
        if init == "mica":
            weight = module.weight.T if embedding else module.weight
            u = torch.linalg.svd(weight.detach().float(), full_matrices=False)[0]
            with torch.no_grad():
                b.data = u[:, -r:].contiguous()
                a.data = torch.zeros(r, weight.shape[1])
            b.requires_grad_(False)
        elif embedding:
            nn.init.zeros_(a)
            nn.init.normal_(b)
        else:
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))
            nn.init.zeros_(b)
        adapters[name] = (a, b)
    return adapters


def plain_lora_hook(modules, adapters, scaling, dropout):
    """hook(name, training) for outputs_with_hooks: PEFT's plain LoRA branch added to the layer's output,
    an embedding's lookup of A^T (no dropout) or a linear layer's B(A(dropout(x)))."""
    def hook(name, training):
        a, b = adapters[name]
        if isinstance(modules[name], nn.Embedding):
            padding = modules[name].padding_idx
            return lambda module, inputs, output: output + (F.embedding(inputs[0], a.T, padding) @ b.T) * scaling
        return lambda module, inputs, output: output + F.linear(F.linear(F.dropout(inputs[0], dropout, training),
                                                                         a), b) * scaling
    return hook


def embedding_dora_case(model, ids):
    """DoRA on EmbedNet's embedding (PEFT's DoraEmbeddingLayer and DoraEmbeddingVariant, restated: a
    magnitude per embedding dimension, the norms of W^T + s (B A); the output and the branch both
    scaled by m / norm) beside DoRA on its head: as embedding_case records plain LoRA."""
    modules = dict(model.named_modules())
    targets, r, alpha, dropout, seed, train_seed = ["embed", "head"], 2, 4.0, 0.25, 16, 17
    scaling = alpha / r
    torch.manual_seed(seed)
    adapters = embed_net_adapters(modules, targets, r, "true")

    def norm(w, lora_weight, scaling):  # DoraLinearLayer.get_weight_norm, the embedding's transposed
        return torch.linalg.norm(w + scaling * lora_weight, dim=1).to(w.dtype)

    with torch.no_grad():  # update_layer: lora_B @ lora_A
        magnitudes = {"embed": norm(modules["embed"].weight.T, adapters["embed"][1] @ adapters["embed"][0], scaling),
                      "head": norm(modules["head"].weight, adapters["head"][1] @ adapters["head"][0], scaling)}
    initial = {n + ".lora_magnitude_vector": tensor(m) for n, m in magnitudes.items()}
    initial["embed.lora_embedding_B"] = tensor(adapters["embed"][1])
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(43)
    with torch.no_grad():
        adapters["embed"][0].copy_(0.5 * torch.randn(adapters["embed"][0].shape, generator=g))
        adapters["head"][1].copy_(0.3 * torch.randn(adapters["head"][1].shape, generator=g))
        for n in magnitudes:
            magnitudes[n] = magnitudes[n] * (1 + 0.2 * torch.randn(magnitudes[n].shape, generator=g))
    for m in magnitudes.values():
        m.requires_grad_(True)
    chosen = {"embed.lora_embedding_A": tensor(adapters["embed"][0]), "head.lora_B.weight": tensor(adapters["head"][1])}
    chosen.update({n + ".lora_magnitude_vector": tensor(m) for n, m in magnitudes.items()})

    def hook(name, training):
        a, b = adapters[name]
        m = magnitudes[name]
        if name == "embed":
            def embed(module, inputs, output):
                lora_weight = (a.T @ b.T).T
                scale = m / norm(module.weight.T, lora_weight.detach(), scaling).detach()
                return scale * output + scale * (F.embedding(inputs[0], a.T, module.padding_idx) @ b.T) * scaling
            return embed

        def linear(module, inputs, output):
            h = inputs[0]
            if training:
                h = F.dropout(h, dropout, True)
                base = F.linear(h, module.weight)
            else:
                base = output - module.bias
            lora_weight = F.linear(F.linear(torch.eye(a.shape[1]), a), b).T
            scale = (m / norm(module.weight, lora_weight.detach(), scaling).detach()).view(1, -1)
            return output + ((scale - 1) * base + scale * F.linear(F.linear(h, a), b) * scaling)
        return linear

    outputs = outputs_with_hooks(model, hook, adapters, ids, train_seed)
    grads = {"embed.lora_embedding_A": tensor(adapters["embed"][0].grad),
             "embed.lora_embedding_B": tensor(adapters["embed"][1].grad),
             "head.lora_A.weight": tensor(adapters["head"][0].grad), "head.lora_B.weight": tensor(adapters["head"][1].grad)}
    grads.update({n + ".lora_magnitude_vector": tensor(m.grad) for n, m in magnitudes.items()})
    with torch.no_grad():  # DoRA's merge: the norms of W + delta with scaling 1
        w, (a, b) = modules["embed"].weight, adapters["embed"]
        delta = (b @ a).T * scaling
        merged = {"embed.weight": tensor((magnitudes["embed"] / norm(w.T, delta.T, 1)).view(1, -1) * (w + delta))}
        w, (a, b) = modules["head"].weight, adapters["head"]
        delta = (b @ a) * scaling
        merged["head.weight"] = tensor((magnitudes["head"] / norm(w, delta, 1)).view(-1, 1) * (w + delta))
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "initial": initial, "next_draw": tensor(next_draw), "chosen": chosen,
            "eval_output": tensor(outputs[False]), "train_output": tensor(outputs[True]), "grads": grads,
            "merged": merged}


def mica_case(model, ids):
    """PEFT's MiCA (init_lora_weights "mica", peft/tuners/lora/layer.py mica_init, restated) on EmbedNet's
    embedding and linear layers: after the layers' usual draws, B the r left singular vectors of the
    smallest singular values (of the embedding's weight transposed), frozen, and A zero. Recorded:
    the initial B, the next draws, chosen A, the outputs in evaluation and training, A's gradients,
    the merged weights."""
    modules = dict(model.named_modules())
    targets, r, alpha, dropout, seed, train_seed = ["embed", "fc", "head"], 2, 4.0, 0.25, 18, 19
    scaling = alpha / r
    torch.manual_seed(seed)
    adapters = embed_net_adapters(modules, targets, r, "mica")
    initial = {n + (".lora_embedding_B" if n == "embed" else ".lora_B.weight"): tensor(b)
               for n, (a, b) in adapters.items()}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(47)
    with torch.no_grad():
        for a, b in adapters.values():
            a.copy_(0.5 * torch.randn(a.shape, generator=g))
    chosen = {n + (".lora_embedding_A" if n == "embed" else ".lora_A.weight"): tensor(a)
              for n, (a, b) in adapters.items()}

    hook = plain_lora_hook(modules, adapters, scaling, dropout)
    outputs = outputs_with_hooks(model, hook, adapters, ids, train_seed)
    grads = {n + (".lora_embedding_A" if n == "embed" else ".lora_A.weight"): tensor(a.grad)
             for n, (a, b) in adapters.items()}
    with torch.no_grad():
        merged = {"embed.weight": tensor(modules["embed"].weight + (adapters["embed"][1] @ adapters["embed"][0]).T
                                         * scaling)}
        for n in ("fc", "head"):
            merged[n + ".weight"] = tensor(modules[n].weight + (adapters[n][1] @ adapters[n][0]) * scaling)
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "initial": initial, "next_draw": tensor(next_draw), "chosen": chosen,
            "eval_output": tensor(outputs[False]), "train_output": tensor(outputs[True]), "grads": grads,
            "frozen": list(initial), "merged": merged}


class VariantConvNet(nn.Module):
    """A 3 x 3 convolution with a stride, a grouped one, a depthwise one, a 1 x 1 one and a linear
    head; the tests build its twin as a layer spec, whose layers are named by position
    (VARIANT_SPEC_NAMES)."""

    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(4, 6, 3, padding=1, groups=2)
        self.depthwise = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.point = nn.Conv2d(6, 3, 1)
        self.head = nn.Linear(27, 2)

    def forward(self, x):
        h = torch.relu(self.grouped(torch.relu(self.conv0(x))))
        return self.head(self.point(torch.tanh(self.depthwise(h))).flatten(1))


VARIANT_SPEC_NAMES = {"conv0": "0", "grouped": "2", "depthwise": "4", "point": "6", "head": "8"}


def conv_variants_case(out):
    """PEFT's LoRA on grouped convolutions with lora_bias (lora_B takes the layer's groups and a bias:
    r divisible by them, PEFT's _ConvNd) and DoRA on convolutions (peft/tuners/lora/dora.py
    _DoraConvNdLayer, variants.py _DoraConvNdVariant, restated) beside DoRA on a linear layer, on
    VariantConvNet (conv_variants_model.pt). Each: the draws after manual_seed(seed) and the next
    ones, chosen B (biases, magnitudes), the outputs in evaluation and, after manual_seed(train_seed),
    in training mode with dropout, the gradients of their sum; DoRA's merged weights (PEFT's
    merge)."""
    torch.manual_seed(6)
    model = VariantConvNet()
    torch.jit.script(model).save(str(out / "conv_variants_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    modules = dict(model.named_modules())
    g = torch.Generator().manual_seed(31)
    x = torch.randn(2, 2, 6, 6, generator=g)

    def make(targets, r, lora_bias):
        adapters = {}
        for name in targets:
            module = modules[name]
            if isinstance(module, nn.Linear):
                a = nn.Linear(module.in_features, r, bias=False)
                b = nn.Linear(r, module.out_features, bias=lora_bias)
            else:
                ones = (1,) * (module.weight.dim() - 2)
                a = nn.Conv2d(module.in_channels, r, module.kernel_size, module.stride, module.padding, bias=False)
                b = nn.Conv2d(r, module.out_channels, ones, ones, groups=module.groups, bias=lora_bias)
            nn.init.kaiming_uniform_(a.weight, a=math.sqrt(5))
            nn.init.zeros_(b.weight)
            if lora_bias:
                nn.init.zeros_(b.bias)
            adapters[name] = (a, b)
        return adapters

    def run(hook, adapters, train_seed):
        return outputs_with_hooks(model, hook, adapters, x, train_seed)

    # Plain LoRA with lora_bias on every layer, the grouped and depthwise convolutions included.
    grouped = {"targets": list(VARIANT_SPEC_NAMES), "r": 6, "lora_alpha": 3.0, "lora_dropout": 0.25, "seed": 21,
               "train_seed": 22}
    scaling = grouped["lora_alpha"] / grouped["r"]
    torch.manual_seed(grouped["seed"])
    adapters = make(grouped["targets"], grouped["r"], True)
    grouped["initial_a"] = {n: tensor(a.weight) for n, (a, b) in adapters.items()}
    grouped["initial_b_shape"] = {n: list(b.weight.shape) for n, (a, b) in adapters.items()}
    grouped["next_draw"] = tensor(torch.rand(3))
    with torch.no_grad():
        for a, b in adapters.values():
            b.weight.copy_(0.3 * torch.randn(b.weight.shape, generator=g))
            b.bias.copy_(0.3 * torch.randn(b.bias.shape, generator=g))
    grouped["chosen"] = {n + suffix: tensor(t) for n, (a, b) in adapters.items()
                         for suffix, t in ((".lora_B.weight", b.weight), (".lora_B.bias", b.bias))}

    def plain_hook(name, training):
        a, b = adapters[name]
        p = grouped["lora_dropout"]
        return lambda module, inputs, output: output + b(a(F.dropout(inputs[0], p, training))) * scaling

    outputs = run(plain_hook, adapters, grouped["train_seed"])
    grouped["eval_output"], grouped["train_output"] = tensor(outputs[False]), tensor(outputs[True])
    grouped["grads"] = {n + suffix: tensor(t.grad) for n, (a, b) in adapters.items()
                        for suffix, t in ((".lora_A.weight", a.weight), (".lora_B.weight", b.weight),
                                          (".lora_B.bias", b.bias))}

    def dora_case(targets, r, lora_alpha, seed, train_seed, mergeable=True):
        """DoRA on `targets`: PEFT's magnitudes and norms (a grouped convolution's of its kernels' product
        viewed as PEFT views it), outputs, gradients and, where PEFT merges, the merged weights."""
        dora = {"targets": targets, "r": r, "lora_alpha": lora_alpha, "lora_dropout": 0.25, "seed": seed,
                "train_seed": train_seed}
        dropout = dora["lora_dropout"]
        scaling = dora["lora_alpha"] / r
        torch.manual_seed(dora["seed"])
        adapters = make(dora["targets"], r, False)

        def lora_weight(name, a, b):
            w = modules[name].weight
            if w.dim() == 2:  # DoraLinearLayer.get_lora_weight
                return b(a(torch.eye(a.weight.shape[1]))).T
            return torch.mm(b.weight.view([-1, r]), a.weight.view([r, -1])).reshape(w.shape)

        def weight_norm(w, lora_weight, scaling):
            if w.dim() == 2:
                return torch.linalg.norm(w + scaling * lora_weight, dim=1).to(w.dtype)
            return (w + scaling * lora_weight).norm(p=2, dim=tuple(range(1, w.dim())), keepdim=True).transpose(1, 0)

        with torch.no_grad():  # DoraLinearLayer.update_layer: lora_B @ lora_A, or the kernels' product
            magnitudes = {}
            for n, (a, b) in adapters.items():
                lw = b.weight @ a.weight if a.weight.dim() == 2 else lora_weight(n, a, b)
                magnitudes[n] = weight_norm(modules[n].weight, lw, scaling)
        dora["initial_a"] = {n: tensor(a.weight) for n, (a, b) in adapters.items()}
        dora["initial_magnitude"] = {n: tensor(m) for n, m in magnitudes.items()}
        dora["next_draw"] = tensor(torch.rand(3))
        with torch.no_grad():
            for n, (a, b) in adapters.items():
                b.weight.copy_(0.3 * torch.randn(b.weight.shape, generator=g))
                magnitudes[n] = magnitudes[n] * (1 + 0.2 * torch.randn(magnitudes[n].shape, generator=g))
        for m in magnitudes.values():
            m.requires_grad_(True)
        dora["chosen"] = {}
        for n, (a, b) in adapters.items():
            dora["chosen"][n + ".lora_B.weight"] = tensor(b.weight)
            dora["chosen"][n + ".lora_magnitude_vector"] = tensor(magnitudes[n])

        def dora_hook(name, training):
            a, b = adapters[name]
            m = magnitudes[name]

            def forward(module, inputs, output):
                h = inputs[0]
                w = module.weight
                conv = w.dim() > 2
                if dropout > 0 and training:
                    h = F.dropout(h, dropout, True)
                    base = (F.conv2d(h, w, None, module.stride, module.padding, module.dilation, module.groups) if conv
                            else F.linear(h, w))
                else:
                    base = output - (module.bias.view(1, -1, 1, 1) if conv else module.bias)
                norm = weight_norm(w, lora_weight(name, a, b).detach(), scaling).detach()
                scale = m / norm if conv else (m / norm).view(1, -1)
                return output + ((scale - 1) * base + scale * b(a(h)) * scaling)
            return forward

        outputs = run(dora_hook, adapters, dora["train_seed"])
        dora["eval_output"], dora["train_output"] = tensor(outputs[False]), tensor(outputs[True])
        dora["grads"] = {}
        for n, (a, b) in adapters.items():
            for suffix, t in ((".lora_A.weight", a.weight), (".lora_B.weight", b.weight),
                              (".lora_magnitude_vector", magnitudes[n])):
                dora["grads"][n + suffix] = tensor(t.grad)

        if not mergeable:  # PEFT's NotImplementedError for a convolution with groups
            return dora

        def delta(name, a, b):  # LoRA's get_delta_weight, _ConvNd's
            w = modules[name].weight
            if w.dim() == 2:
                return (b @ a) * scaling
            if w.size()[2:4] == (1, 1):
                return (b.squeeze(3).squeeze(2) @ a.squeeze(3).squeeze(2)).unsqueeze(2).unsqueeze(3) * scaling
            return F.conv2d(a.transpose(0, 1), b).transpose(0, 1) * scaling

        dora["merged"] = {}
        with torch.no_grad():  # DoRA's merge: the norm of W + delta with scaling 1
            for n, (a, b) in adapters.items():
                w = modules[n].weight
                d = delta(n, a.weight, b.weight)
                factor = (magnitudes[n] / weight_norm(w, d, 1)).view((-1,) + (1,) * (w.dim() - 1))
                dora["merged"][n + ".weight"] = tensor(factor * (w + d))
        return dora

    # DoRA on the ungrouped convolutions and the head, then on the grouped and depthwise ones (r 6:
    # divisible by their groups, 2 and 6).
    dora = dora_case(["conv0", "point", "head"], 2, 4.0, 23, 24)
    dora_grouped = dora_case(["grouped", "depthwise"], 6, 3.0, 25, 26, mergeable=False)
    return {"spec_names": VARIANT_SPEC_NAMES, "input": tensor(x), "grouped": grouped, "dora": dora,
            "dora_grouped": dora_grouped}


class EmbedNet(nn.Module):
    """An embedding with a padding row, a linear layer and an untied head; the tests build its twin
    as a layer spec ("0" the embedding, "1" fc, "3" head)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6, padding_idx=0)
        self.fc = nn.Linear(6, 6)
        self.head = nn.Linear(6, 4)

    def forward(self, ids):
        return self.head(torch.tanh(self.fc(self.embed(ids))))


def embedding_case(out):
    """PEFT's LoRA on an embedding (peft/tuners/lora/layer.py Embedding, restated): lora_embedding_A =
    torch.randn(r, num_embeddings), lora_embedding_B = torch.randn(dim, r), then A zeroed and B
    drawn again from N(0, 1); the layer's output plus embedding(ids, A^T) @ B^T * scaling, A looked up
    with the layer's padding_idx, no dropout; merged as W + (B @ A)^T * scaling. Beside LoRA on the
    linear layers (with dropout), on EmbedNet (embedding_model.pt): the draws after manual_seed(seed)
    and the next ones, chosen A and B, the outputs in evaluation and, after manual_seed(train_seed),
    in training mode, the gradients of their sum, and the merged weights."""
    torch.manual_seed(12)
    model = EmbedNet()
    torch.jit.script(model).save(str(out / "embedding_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    modules = dict(model.named_modules())
    targets, r, alpha, dropout, seed, train_seed = ["embed", "fc", "head"], 2, 4.0, 0.25, 14, 15
    scaling = alpha / r
    torch.manual_seed(seed)
    adapters = embed_net_adapters(modules, targets, r, "true")
    initial = {n + suffix: tensor(t) for n, (a, b) in adapters.items()
               for suffix, t in (((".lora_embedding_A", a), (".lora_embedding_B", b)) if n == "embed"
                                 else ((".lora_A.weight", a), (".lora_B.weight", b)))}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(41)
    with torch.no_grad():
        adapters["embed"][0].copy_(0.5 * torch.randn(adapters["embed"][0].shape, generator=g))
        for n in ("fc", "head"):
            adapters[n][1].copy_(0.3 * torch.randn(adapters[n][1].shape, generator=g))
    chosen = {"embed.lora_embedding_A": tensor(adapters["embed"][0]),
              "fc.lora_B.weight": tensor(adapters["fc"][1]), "head.lora_B.weight": tensor(adapters["head"][1])}
    ids = torch.tensor([[1, 0, 3, 9], [4, 4, 0, 7], [2, 8, 5, 6]])

    hook = plain_lora_hook(modules, adapters, scaling, dropout)
    outputs = outputs_with_hooks(model, hook, adapters, ids, train_seed)
    grads = {}
    for n, (a, b) in adapters.items():
        names = (".lora_embedding_A", ".lora_embedding_B") if n == "embed" else (".lora_A.weight", ".lora_B.weight")
        grads[n + names[0]], grads[n + names[1]] = tensor(a.grad), tensor(b.grad)
    with torch.no_grad():
        merged = {"embed.weight": tensor(modules["embed"].weight + (adapters["embed"][1] @ adapters["embed"][0]).T
                                         * scaling)}
        for n in ("fc", "head"):
            merged[n + ".weight"] = tensor(modules[n].weight + (adapters[n][1] @ adapters[n][0]) * scaling)
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "spec_names": {"embed": "0", "fc": "1", "head": "3"}, "initial": initial,
            "dora": embedding_dora_case(model, ids), "mica": mica_case(model, ids),
            "next_draw": tensor(next_draw), "chosen": chosen, "ids": ids.flatten().tolist(),
            "ids_shape": list(ids.shape), "eval_output": tensor(outputs[False]),
            "train_output": tensor(outputs[True]), "grads": grads, "merged": merged}


class Conv1D(nn.Module):
    """transformers' Conv1D (transformers/pytorch_utils.py, restated; transformers is not packaged for
    Debian): GPT-2's linear layer, its weight in x out, computing x W + b. Its module path is
    transformers', which TorchScript keeps in the type's name, and which PEFT (isinstance) and the
    library recognise it by."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = list(x.size()[:-1])  # transformers': x.size()[:-1] + (self.nf,), a tuple TorchScript lacks
        size_out.append(self.nf)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def _in_transformers_module(cls, name="transformers.pytorch_utils"):
    """Puts `cls` in a module named `name` (this file's source, so that TorchScript still finds it)."""
    module = sys.modules.setdefault(name, types.ModuleType(name))
    module.__file__ = __file__
    setattr(module, cls.__name__, cls)
    cls.__module__ = module.__name__


_in_transformers_module(Conv1D)


class TinyForCausalLM(nn.Module):
    """A transformers-like causal language model (its class in a transformers module path, which
    TorchScript keeps): an embedding, a Conv1D, a linear layer and the output layer lm_head, which
    PEFT's all-linear leaves out (get_output_embeddings). Written as transformers_lm.pt."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.c_fc = Conv1D(8, 6)
        self.fc = nn.Linear(8, 6)
        self.lm_head = nn.Linear(6, 10, bias=False)

    def forward(self, ids):
        return self.lm_head(self.fc(torch.tanh(self.c_fc(self.embed(ids)))))


_in_transformers_module(TinyForCausalLM, "transformers.models.tiny.modeling_tiny")


class Gpt2Mlp(nn.Module):
    """GPT-2's MLP (Conv1D c_fc, gelu, Conv1D c_proj) before an nn.Linear head."""

    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(12, 6)
        self.c_proj = Conv1D(6, 12)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        return self.head(torch.tanh(self.c_proj(F.gelu(self.c_fc(x)))))


def conv1d_adapters(modules, targets, r):
    """PEFT's adapters of `targets`, drawn in their order: a Conv1D is adapted as a linear layer with
    fan_in_fan_out (in_features, out_features = its weight's shape), lora_A = nn.Linear(in, r),
    lora_B = nn.Linear(r, out), then Kaiming A and zero B. By name: (A, B)."""
    adapters = {}
    for name in targets:
        module = modules[name]
        in_features, out_features = (module.weight.shape if isinstance(module, Conv1D)
                                     else (module.in_features, module.out_features))
        adapters[name] = linear_pair(in_features, out_features, r)
    return adapters


def fan_in_fan_out(modules, name, w):
    """PEFT's transpose(w, fan_in_fan_out): a Conv1D's weight (in x out) taken as nn.Linear's."""
    return w.T if isinstance(modules[name], Conv1D) else w


def conv1d_dora_case(model, x):
    """DoRA on Gpt2Mlp's Conv1D layers (PEFT's DoraLinearLayer with fan_in_fan_out: the norms of
    W^T + s (B A), one per output; with dropout in training, base = F.linear(x, W^T)), as
    conv1d_case records plain LoRA; PEFT writes fan_in_fan_out true (its last adapted layer is a
    Conv1D)."""
    modules = dict(model.named_modules())
    targets, r, alpha, dropout, seed, train_seed = ["c_fc", "c_proj"], 2, 4.0, 0.25, 62, 63
    scaling = alpha / r
    torch.manual_seed(seed)
    adapters = conv1d_adapters(modules, targets, r)

    def norm(w, lora_weight, scaling):  # DoraLinearLayer.get_weight_norm, after its transpose
        return torch.linalg.norm(w + scaling * lora_weight, dim=1).to(w.dtype)

    with torch.no_grad():
        magnitudes = {n: norm(modules[n].weight.T, b @ a, scaling) for n, (a, b) in adapters.items()}
    initial = {n + ".lora_magnitude_vector": tensor(m) for n, m in magnitudes.items()}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(64)
    with torch.no_grad():
        for n, (a, b) in adapters.items():
            b.copy_(0.3 * torch.randn(b.shape, generator=g))
            magnitudes[n] = magnitudes[n] * (1 + 0.2 * torch.randn(magnitudes[n].shape, generator=g))
    for m in magnitudes.values():
        m.requires_grad_(True)
    chosen = {n + ".lora_B.weight": tensor(b) for n, (a, b) in adapters.items()}
    chosen.update({n + ".lora_magnitude_vector": tensor(m) for n, m in magnitudes.items()})

    def hook(name, training):
        a, b = adapters[name]
        m = magnitudes[name]

        def dora(module, inputs, output):
            h = inputs[0]
            weight = module.weight.T
            if training:
                h = F.dropout(h, dropout, True)
                base = F.linear(h, weight)
            else:
                base = output - module.bias
            lora_weight = F.linear(F.linear(torch.eye(a.shape[1]), a), b).T
            scale = (m / norm(weight, lora_weight.detach(), scaling).detach()).view(1, -1)
            return output + ((scale - 1) * base + scale * F.linear(F.linear(h, a), b) * scaling)
        return dora

    outputs = outputs_with_hooks(model, hook, adapters, x, train_seed)
    grads = {}
    for n, (a, b) in adapters.items():
        grads[n + ".lora_A.weight"], grads[n + ".lora_B.weight"] = tensor(a.grad), tensor(b.grad)
        grads[n + ".lora_magnitude_vector"] = tensor(magnitudes[n].grad)
    merged = {}
    with torch.no_grad():  # DoraLinearVariant.merge_safe: transpose(dora_factor.view(-1, 1), fan_in_fan_out)
        for n, (a, b) in adapters.items():
            w = modules[n].weight
            delta = (b @ a).T * scaling
            merged[n + ".weight"] = tensor((magnitudes[n] / norm(w.T, delta.T, 1)).view(1, -1) * (w + delta))
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "initial": initial, "next_draw": tensor(next_draw), "chosen": chosen,
            "eval_output": tensor(outputs[False]), "train_output": tensor(outputs[True]), "grads": grads,
            "merged": merged}


def conv1d_init_cases(model):
    """PiSSA and MiCA on Gpt2Mlp's Conv1D layers (PEFT's pissa_init and mica_init take
    transpose(W, fan_in_fan_out), and PiSSA transposes the residual back): after each layer's
    nn.Linear draws, the adapters and the layers' weights at the start, and the next draw."""
    import copy
    targets, r, alpha, seed = ["c_fc", "c_proj"], 2, 4.0, 65
    scaling = alpha / r
    cases = {}
    for init in ("pissa", "mica"):
        net = copy.deepcopy(model)
        modules = dict(net.named_modules())
        torch.manual_seed(seed)
        initial, weights = {}, {}
        for name in targets:
            module = modules[name]
            nn.Linear(module.weight.shape[0], r, bias=False)
            nn.Linear(r, module.weight.shape[1], bias=False)
            w = module.weight.detach().T
            if init == "pissa":
                a, b, residual = peft_decompose(w, init, r, scaling)
                with torch.no_grad():
                    module.weight.copy_(residual.T)
            else:
                b = torch.linalg.svd(w.float(), full_matrices=False)[0][:, -r:].contiguous()
                a = torch.zeros(r, w.shape[1])
            initial[name + ".lora_A.weight"], initial[name + ".lora_B.weight"] = tensor(a), tensor(b)
            weights[name + ".weight"] = tensor(module.weight)
        cases[init] = {"initial": initial, "weights": weights, "next_draw": tensor(torch.rand(3))}
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "seed": seed, "cases": cases}


def conv1d_case(out):
    """PEFT's LoRA on transformers' Conv1D (GPT-2's layers; peft/tuners/lora/model.py dispatch_default
    makes a lora.Linear with fan_in_fan_out): lora_A (r x in) and lora_B (out x r) as on a linear
    layer, the branch B(A(dropout(x))) * scaling added to the output, merged as W + (B @ A)^T * scaling.
    Beside LoRA on an nn.Linear head, on Gpt2Mlp (conv1d_model.pt): the draws after manual_seed(seed),
    the next ones, chosen B, the outputs in evaluation and in training, the gradients of their sum,
    the merged weights; PEFT writes fan_in_fan_out false (its last adapted layer is the head)."""
    torch.manual_seed(60)
    model = Gpt2Mlp()
    torch.jit.script(model).save(str(out / "conv1d_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    modules = dict(model.named_modules())
    targets, r, alpha, dropout, seed, train_seed = ["c_fc", "c_proj", "head"], 2, 4.0, 0.25, 66, 67
    scaling = alpha / r
    torch.manual_seed(seed)
    adapters = conv1d_adapters(modules, targets, r)
    initial = {}
    for n, (a, b) in adapters.items():
        initial[n + ".lora_A.weight"], initial[n + ".lora_B.weight"] = tensor(a), tensor(b)
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(68)
    with torch.no_grad():
        for a, b in adapters.values():
            b.copy_(0.3 * torch.randn(b.shape, generator=g))
    chosen = {n + ".lora_B.weight": tensor(b) for n, (a, b) in adapters.items()}
    x = torch.randn(3, 2, 6, generator=g)
    outputs = outputs_with_hooks(model, plain_lora_hook(modules, adapters, scaling, dropout), adapters, x, train_seed)
    grads = {}
    for n, (a, b) in adapters.items():
        grads[n + ".lora_A.weight"], grads[n + ".lora_B.weight"] = tensor(a.grad), tensor(b.grad)
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + fan_in_fan_out(modules, n, b @ a) * scaling)
                  for n, (a, b) in adapters.items()}
    return {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed,
            "train_seed": train_seed, "initial": initial, "next_draw": tensor(next_draw), "chosen": chosen,
            "input": tensor(x), "eval_output": tensor(outputs[False]), "train_output": tensor(outputs[True]),
            "grads": grads, "merged": merged, "dora": conv1d_dora_case(model, x), "init": conv1d_init_cases(model)}


class AttnNet(nn.Module):
    """An nn.MultiheadAttention (batch first, with dropout) between an input projection and a head; the
    tests build its twin as a layer spec ("0" proj, "2" attn, "3" head)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 8)
        self.attn = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.head(a)


def attention_case(out):
    """PEFT's LoRA on nn.MultiheadAttention (peft/tuners/lora/layer.py MultiheadAttention, restated):
    targeting the attention adapts its in_proj (lora_A r x E, lora_B 3E x r) and its out_proj, both
    with the attention's rank; the draws are PEFT's (its out_proj's adapters, then the in_proj's, then
    the out_proj's again: its update_layer updates both); the attention computes with the weights
    W + (B A) * scaling, which its forward reads, and no lora_dropout (PEFT merges the adapters before
    the forward). PEFT's forward adds the out_proj's delta twice (its merge writes W + dW, then calls
    the out_proj's own merge: huggingface/peft#3774); recorded here is W + dW. On AttnNet
    (attention_model.pt): the draws after manual_seed(seed), the next ones, chosen B, the outputs in
    evaluation (the scripted model with the merged weights, as the library runs it) and in training
    (with the head's LoRA and its dropout beside), the gradients, the merged weights."""
    torch.manual_seed(70)
    model = AttnNet()
    torch.jit.script(model).save(str(out / "attention_model.pt"))
    scripted = torch.jit.load(str(out / "attention_model.pt"))  # its own tensors (a scripted module shares them)
    for p in model.parameters():
        p.requires_grad_(False)
    r, alpha, dropout, seed, train_seed = 2, 4.0, 0.25, 71, 72
    scaling = alpha / r
    e = model.attn.embed_dim
    torch.manual_seed(seed)
    linear_pair(e, e, r)  # the out_proj's first adapters, replaced
    adapters = {"attn": linear_pair(e, 3 * e, r), "attn.out_proj": linear_pair(e, e, r),
                "head": linear_pair(8, 3, r)}
    initial = {n + s: tensor(t) for n, (a, b) in adapters.items() for s, t in ((".lora_A.weight", a),
                                                                            (".lora_B.weight", b))}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(73)
    with torch.no_grad():
        for a, b in adapters.values():
            b.copy_(0.3 * torch.randn(b.shape, generator=g))
    chosen = {n + ".lora_B.weight": tensor(b) for n, (a, b) in adapters.items()}
    x = torch.randn(3, 4, 6, generator=g)

    def merged(name, w):
        a, b = adapters[name]
        return w + (b @ a) * scaling

    # Evaluation, the attention alone adapted: the scripted model with its weights merged.
    with torch.no_grad():
        scripted.attn.in_proj_weight.copy_(merged("attn", model.attn.in_proj_weight))
        scripted.attn.out_proj.weight.copy_(merged("attn.out_proj", model.attn.out_proj.weight))
        scripted.eval()
        eval_output = scripted(x)
    # Training, with the head's LoRA and its dropout: the eager model computing with the merged
    # weights (functional_call), the head's branch added to its output.
    model.train()
    head_a, head_b = adapters["head"]
    handle = model.head.register_forward_hook(
        lambda module, inputs, output: output + F.linear(F.linear(F.dropout(inputs[0], dropout, True), head_a),
                                                         head_b) * scaling)
    weights = {"attn.in_proj_weight": merged("attn", model.attn.in_proj_weight),
               "attn.out_proj.weight": merged("attn.out_proj", model.attn.out_proj.weight)}
    torch.manual_seed(train_seed)
    train_output = torch.nn.utils.stateless.functional_call(model, weights, (x,))
    train_output.sum().backward()
    handle.remove()
    model.eval()
    grads = {}
    for n, (a, b) in adapters.items():
        grads[n + ".lora_A.weight"], grads[n + ".lora_B.weight"] = tensor(a.grad), tensor(b.grad)
    with torch.no_grad():
        merged_weights = {"attn.in_proj_weight": tensor(merged("attn", model.attn.in_proj_weight)),
                          "attn.out_proj.weight": tensor(merged("attn.out_proj", model.attn.out_proj.weight)),
                          "head.weight": tensor(merged("head", model.head.weight))}
    return {"r": r, "lora_alpha": alpha, "lora_dropout": dropout, "seed": seed, "train_seed": train_seed,
            "initial": initial, "next_draw": tensor(next_draw), "chosen": chosen, "input": tensor(x),
            "eval_output": tensor(eval_output), "train_output": tensor(train_output), "grads": grads,
            "merged": merged_weights, "spec_names": {"proj": "0", "attn": "2", "head": "3"}}


def weighted_case(model):
    """PEFT's add_weighted_adapter (peft/tuners/lora/model.py, utils/merge_utils.py, restated) on Net:
    three adapters with chosen values ("default" r 2 on fc1 and head, "b" r 3 on fc1 and block.0, "c"
    r 2 on fc1 and head), and for each combination the draws after manual_seed(seed) (PEFT's
    inject_adapter: the first adapter's initialisation on the targets of all, at the combined rank),
    the next ones, and the combined A and B of each layer."""
    g = torch.Generator().manual_seed(77)
    modules = dict(model.named_modules())
    specs = {"default": (["fc1", "head"], 2, 4.0), "b": (["fc1", "block.0"], 3, 3.0), "c": (["fc1", "head"], 2, 8.0)}
    adapters = {name: {m: (0.3 * torch.randn(r, modules[m].in_features, generator=g),
                           0.3 * torch.randn(modules[m].out_features, r, generator=g)) for m in targets}
                for name, (targets, r, alpha) in specs.items()}

    def scaling(name):
        return specs[name][2] / specs[name][1]

    def task_arithmetic(tensors, weights):  # merge_utils.task_arithmetic
        stacked = torch.stack(tensors, dim=0)
        w = torch.tensor(weights)
        w = w.view(w.shape + (1,) * (stacked.dim() - w.dim()))
        return (stacked * w).sum(dim=0)

    def pruned(t, density, at_random):  # merge_utils.prune: magnitude (topk) or DARE (bernoulli, rescaled)
        if density >= 1:
            return t
        if at_random:
            return t * torch.bernoulli(torch.full_like(t, density)) / density
        keep = torch.zeros_like(t).reshape(-1)
        keep[torch.topk(t.abs().reshape(-1), k=int(density * t.numel()), largest=True)[1]] = 1
        return t * keep.reshape(t.shape)

    def merged(method, tensors, weights, density, sign_method):  # merge_utils' five merges
        if method == "linear":
            return task_arithmetic(tensors, weights)
        stacked = torch.stack([pruned(t, density, method.startswith("dare")) for t in tensors], dim=0)
        w = torch.tensor(weights)
        weighted = stacked * w.view(w.shape + (1,) * (stacked.dim() - w.dim()))
        if method not in ("ties", "dare_ties"):
            return weighted.sum(dim=0)
        votes = stacked.sum(dim=0) if sign_method == "total" else stacked.sign().sum(dim=0)
        agree = stacked.sign() == torch.where(votes >= 0, 1, -1)
        return (weighted * agree).sum(dim=0) / torch.clamp(agree.sum(dim=0), min=1.0)

    combinations = []

    def combine(names, weights, how, svd_rank=None, density=None, sign_method="total", clamp=None, full=True):
        ranks = [specs[n][1] for n in names]
        kind = "linear" if len(names) == 1 else how
        svd = kind.endswith("svd")
        method = "linear" if kind == "svd" else kind[:-4] if svd else kind
        rank = sum(ranks) if kind == "cat" else (svd_rank or max(ranks)) if svd else ranks[0]
        targets = []
        for n in names:
            targets += [t for t in specs[n][0] if t not in targets]
        seed = 900 + len(combinations)
        torch.manual_seed(seed)
        drawn = make_adapters(model, targets, rank)
        layers = {}
        for m, (a0, b0) in drawn.items():
            present = [(n, w) for n, w in zip(names, weights) if m in adapters[n]]
            if kind == "cat":
                a, b = a0 * 0.0, b0 * 0.0
                cat_a = torch.cat([adapters[n][m][0] * w * scaling(n) for n, w in present], 0)
                cat_b = torch.cat([adapters[n][m][1] for n, w in present], 1)
                a[: cat_a.shape[0], :] = cat_a
                b[:, : cat_b.shape[1]] = cat_b
            elif not svd:  # the As merged first (their masks drawn first), then the Bs
                wa, wb = [], []
                for n, w in present:
                    scaled = w * scaling(n)
                    wa.append(math.sqrt(abs(scaled)) * (1 if scaled >= 0 else -1))
                    wb.append(math.sqrt(abs(scaled)))
                a = merged(method, [adapters[n][m][0] for n, w in present], wa, density, sign_method)
                b = merged(method, [adapters[n][m][1] for n, w in present], wb, density, sign_method)
            else:  # each delta is scaled, and weighted by weight x scaling again, as PEFT's
                deltas = [(adapters[n][m][1] @ adapters[n][m][0]) * scaling(n) for n, w in present]
                delta = merged(method, deltas, [w * scaling(n) for n, w in present], density, sign_method)
                u, s, vh = torch.linalg.svd(delta, full_matrices=full)
                b, a = u[:, :rank] @ torch.diag(s[:rank]), vh[:rank, :]
                if clamp is not None:
                    high = torch.quantile(torch.cat([b.flatten(), a.flatten()]), clamp)
                    b, a = b.clamp(-high, high), a.clamp(-high, high)
            layers[m] = {"a": tensor(a), "b": tensor(b)}
        next_draw = torch.rand(3)  # after DARE's masks
        options = {"svd_rank": svd_rank, "density": density, "svd_clamp": clamp,
                   "majority_sign_method": None if sign_method == "total" else sign_method,
                   "svd_full_matrices": None if full else False}
        combinations.append({"adapters": names, "weights": weights, "combination": how, "svd_rank": svd_rank or 0,
                             "options": {k: v for k, v in options.items() if v is not None},
                             "seed": seed, "rank": rank, "next_draw": tensor(next_draw), "layers": layers})

    combine(["default", "b"], [0.7, -0.4], "cat")
    combine(["default", "b"], [1.0, 0.5], "svd")
    combine(["b", "c"], [0.5, 2.0], "svd", svd_rank=1)
    combine(["default", "c"], [0.6, -0.3], "linear")
    combine(["b"], [2.0], "svd")  # a single adapter: PEFT combines it linearly
    combine(["default", "c"], [0.8, 0.5], "ties", density=0.5)
    combine(["default", "c", "default"], [0.8, -0.5, 0.3], "ties", density=0.7, sign_method="frequency")
    combine(["default", "c"], [0.8, 0.5], "dare_linear", density=0.6)
    combine(["default", "c"], [1.2, -0.5], "dare_ties", density=0.4, sign_method="frequency")
    combine(["default", "c"], [0.8, 0.5], "magnitude_prune", density=0.3)
    combine(["default", "c"], [0.8, 0.5], "magnitude_prune", density=1.5)  # >= 1: nothing pruned
    combine(["default", "b"], [1.0, 0.5], "ties_svd", density=0.5)
    combine(["b", "c"], [0.5, 2.0], "dare_linear_svd", svd_rank=2, density=0.6)
    combine(["default", "b", "c"], [0.4, 0.5, -0.6], "dare_ties_svd", density=0.5, clamp=0.9)
    combine(["default", "b"], [1.0, 0.5], "magnitude_prune_svd", density=0.4, full=False)
    combine(["default", "b"], [1.0, 0.5], "svd", clamp=0.75)
    return {"specs": {n: {"targets": t, "r": r, "lora_alpha": alpha} for n, (t, r, alpha) in specs.items()},
            "values": {n: {m + suffix: tensor(t) for m, (a, b) in layers.items()
                           for suffix, t in ((".lora_A.weight", a), (".lora_B.weight", b))}
                       for n, layers in adapters.items()},
            "combinations": combinations}


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(7)
    model = Net().eval()
    torch.jit.script(model).save(str(out / "lora_model.pt"))

    targets, r, alpha = ["fc1", "0", "head"], 4, 8.0
    scaling = alpha / r
    torch.manual_seed(1234)
    adapters = make_adapters(model, targets, r)
    next_draw = torch.rand(3)

    # Trained-looking B matrices, so that the adapters change the output.
    g = torch.Generator().manual_seed(99)
    chosen_b = {name: 0.3 * torch.randn(b.shape, generator=g) for name, (a, b) in adapters.items()}
    modules = dict(model.named_modules())
    x = torch.randn(5, 6, generator=g)
    y = peft_forward(model, adapters, chosen_b, scaling, 0.0, x)
    merged = {name + ".weight": modules[name].weight + (chosen_b[name] @ adapters[name][0]) * scaling
              for name in adapters}
    case = {"targets": ",".join(targets), "r": r, "lora_alpha": alpha, "seed": 1234,
            "modules": list(adapters), "initial_a": {n: tensor(a) for n, (a, b) in adapters.items()},
            "next_draw": tensor(next_draw), "chosen_b": {n: tensor(b) for n, b in chosen_b.items()},
            "input": tensor(x), "output": tensor(y), "merged": {n: tensor(w) for n, w in merged.items()},
            "spec": spec_case(model, g), "dora": dora_case(model, g), "lora_bias": lora_bias_case(model, g),
            "decomposing": decomposing_cases(model, g), "tokens": tokens_case(out),
            "standalone_tokens": standalone_tokens_case(), "conv": conv_case(out),
            "conv_variants": conv_variants_case(out), "embedding": embedding_case(out), "conv1d": conv1d_case(out),
            "attention": attention_case(out), "parameters": parameters_case(out),
            "weighted": weighted_case(model),
            "eva": eva_case(out), "corda": corda_case(out), "lora_ga": lora_ga_case(out),
            "loftq": loftq_case(out), "ia3": ia3_case(out, Conv1D), "loha": loha_case(out),
            "lokr": lokr_case(out), "vera": vera_case(out, Conv1D),
            "oft": oft_case(out), "adalora": adalora_case(out, Conv1D),
            "boft": boft_case(out), "hra": hra_case(out),
            "fourierft": fourierft_case(out, Conv1D), "ln_tuning": ln_tuning_case(out),
            "miss": miss_case(out), "c3a": c3a_case(out), "shira": shira_case(out),
            "randlora": randlora_case(out), "delora": delora_case(out),
            "road": road_case(out),
            "gralora": gralora_case(out, Conv1D),
            "hira": hira_case(out, Conv1D),
            "pvera": pvera_case(out, Conv1D)}
    (out / "lora_cases.json").write_text(json.dumps(case))
    torch.jit.script(TinyForCausalLM()).save(str(out / "transformers_lm.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
