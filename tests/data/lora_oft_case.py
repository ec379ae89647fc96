"""PEFT's OFT restated for linear layers (peft/tuners/oft/layer.py; PEFT is not packaged for Debian),
for tests/capi/test_oft.cpp. Each targeted nn.Linear, in named_modules() order, splits its input
into blocks: oft_block_size given (r 0) gives r = in / block, a block that does not divide in moved
to the nearest divisor (the lower one on a tie, PEFT's adjust_oft_parameters); r given does the
reverse. Its oft_R.weight is r x block (block - 1) / 2 (1 x ... with block_share), zeros with
init_weights, else normal(0, 0.1) from the global generator. Each forward turns the weight into a
skew-symmetric Q per block (upper triangle, minus its transpose), first projected into an
eps-ball around zero with coft (written back to the parameter), and into a rotation R by the
Cayley-Neumann series I + 2Q + 2Q^2 + ... + Q^(n-1) (use_cayley_neumann, n terms), else by
solve(I + Q, I - Q) from the right; the input, cast to the weight's dtype, is rotated block by block
(einsum "...rk,rkc->...rc"), cast back, and goes through the layer. Merging: W (R_blockdiag W^T)^T.
Written: oft_model.pt and two cases ("blocks": oft_block_size 4, the last layer's block moved to 3;
"shared": r 2, block_share, coft, solve).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import autocast_outputs, cast_to_input_hooks, saved_frozen, tensor

TARGETS = ["fc1", "fc2", "head"]


class OftNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 12)
        self.fc2 = nn.Linear(12, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


def adjust(in_features, params):
    """PEFT's adjust_oft_parameters: the nearest divisor of in_features (the lower one on a tie)."""
    if params >= in_features:
        return in_features
    higher = params
    while higher <= in_features and in_features % higher != 0:
        higher += 1
    lower = params
    while lower > 1 and in_features % lower != 0:
        lower -= 1
    return lower if params - lower <= higher - params else higher


def layout(in_features, config):
    if config["r"] == 0:
        block = config["oft_block_size"]
        if in_features % block != 0 or block > in_features:
            block = adjust(in_features, block)
        return in_features // block, block
    r = config["r"]
    if in_features % r != 0 or r > in_features:
        r = adjust(in_features, r)
    return r, in_features // r


def skew(vec, block):
    rows, cols = torch.triu_indices(block, block, 1)
    matrix = torch.zeros(vec.shape[0], block, block, dtype=vec.dtype)
    matrix[:, rows, cols] = vec
    return matrix - matrix.transpose(-2, -1)


def project(weight, block, eps):
    """PEFT's _project_batch (coft): each block's Q moved into the eps / sqrt(blocks) ball around 0."""
    q = skew(weight, block)
    eps = eps * 1 / torch.sqrt(torch.tensor(q.shape[0]))
    zero = torch.zeros((q.size(1), q.size(1)), dtype=q.dtype).unsqueeze(0).expand_as(q)
    diff = q - zero
    norm = torch.norm(q - zero, dim=(1, 2), keepdim=True)
    out = torch.where((norm <= eps).bool(), q, zero + eps * (diff / norm))
    rows, cols = torch.triu_indices(block, block, 1)
    return out[:, rows, cols]


def cayley(weight, block, neumann, terms):
    b = weight.shape[0]
    q = skew(weight, block)
    if neumann:
        r = torch.eye(block, dtype=weight.dtype).repeat(b, 1, 1)
        if terms > 1:
            r.add_(q, alpha=2.0)
            if terms > 2:
                power = torch.bmm(q, q)
                r.add_(power, alpha=2.0)
                for _ in range(3, terms - 1):
                    power = torch.bmm(power, q)
                    r.add_(power, alpha=2.0)
                power = torch.bmm(power, q)
                r.add_(power)
    else:
        eye = torch.eye(block).unsqueeze(0).expand(b, block, block)
        r = torch.linalg.solve(eye + q, eye - q, left=False)
    return r.to(weight.dtype)


def rotation(weight, block, config):
    if config["coft"]:
        with torch.no_grad():
            weight.copy_(project(weight, block, config["eps"]))
    return cayley(weight, block, config["use_cayley_neumann"], config["num_cayley_neumann_terms"])


def make_weights(model, config, init):
    weights = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        r, block = layout(module.in_features, config)
        w = torch.empty(1 if config["block_share"] else r, block * (block - 1) // 2)
        if init:
            nn.init.zeros_(w)
        else:
            nn.init.normal_(w, mean=0.0, std=0.1)
        weights[name] = w.requires_grad_()
    return weights


def forward(model, weights, config, x, training):
    modules = dict(model.named_modules())
    handles = []
    for name, w in weights.items():
        def rotate(module, inputs, w=w):
            x = inputs[0]
            r, block = layout(module.in_features, config)
            rotate = rotation(w, block, config)
            if config["block_share"]:
                rotate = rotate.repeat(r, 1, 1)
            xr = x.to(w.dtype).reshape(*x.shape[:-1], r, block)
            return (torch.einsum("...rk,rkc->...rc", xr, rotate).reshape(x.shape).to(x.dtype),)
        handles.append(modules[name].register_forward_pre_hook(rotate))
    handles += cast_to_input_hooks(model, list(weights))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def merged_weight(module, w, config):
    r, block = layout(module.in_features, config)
    rotate = rotation(w, block, config)
    blocks = [rotate[0 if config["block_share"] else i] for i in range(r)]
    oft = torch.block_diag(*blocks)
    return torch.mm(oft, module.weight.T.to(oft.dtype)).T.contiguous().to(module.weight.dtype)


def run(model, config, x, target):
    torch.manual_seed(config["seed"])
    initial = make_weights(model, config, True)
    next_draw = torch.rand(3)
    torch.manual_seed(config["seed"])
    chosen = make_weights(model, config, False)
    start = {n: w.detach().clone() for n, w in chosen.items()}
    with torch.no_grad():
        eval_output = forward(model, chosen, config, x, False)
    autocast = autocast_outputs(model, TARGETS, x, lambda: forward(model, chosen, config, x, False))
    train_output = forward(model, chosen, config, x, True)
    train_output.sum().backward()
    grads = {n + ".oft_R.weight": tensor(w.grad) for n, w in chosen.items()}
    modules = dict(model.named_modules())
    with torch.no_grad():
        merged = {n + ".weight": tensor(merged_weight(modules[n], chosen[n].detach().clone(), config))
                  for n in TARGETS}
    trained = {n: w.clone().requires_grad_() for n, w in start.items()}
    optimizer = torch.optim.AdamW(list(trained.values()), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, config, x, True), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # PyTorch 2's default (Debian's 1.13 zeroes them)
    as_json = lambda weights: {n + ".oft_R.weight": tensor(w) for n, w in weights.items()}
    return dict(config, **autocast, initial=as_json(initial), next_draw=tensor(next_draw), chosen=as_json(start),
                after_forward=as_json(chosen), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, merged=merged, losses=losses, trained=as_json(trained))


def oft_case(out):
    model = saved_frozen(OftNet, 107, out / "oft_model.pt")
    g = torch.Generator().manual_seed(109)
    x = torch.randn(4, 8, generator=g)
    target = torch.randn(4, 3, generator=g)
    blocks = {"r": 0, "oft_block_size": 4, "block_share": False, "coft": False, "eps": 6e-5,
              "use_cayley_neumann": True, "num_cayley_neumann_terms": 5, "seed": 113}
    shared = {"r": 2, "oft_block_size": 0, "block_share": True, "coft": True, "eps": 1e-2,
              "use_cayley_neumann": False, "num_cayley_neumann_terms": 5, "seed": 127}
    return {"targets": ",".join(TARGETS), "input": tensor(x), "target": tensor(target),
            "blocks": run(model, blocks, x, target), "shared": run(model, shared, x, target)}
