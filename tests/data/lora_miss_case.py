"""PEFT's MiSS restated (peft/tuners/miss/layer.py; PEFT is not packaged for Debian), for
tests/capi/test_miss.cpp. Each targeted nn.Linear, in named_modules() order, holds miss_block:
zeros of r x out (init_weights True), r x mini_r ("mini") or out/r x r x r ("bat"), or
kaiming_uniform_(a=sqrt(5)) of r x out (init_weights False). Its forward, but for "bat", adds to
the layer's output the input zero-padded to a multiple of r, cast to the block's dtype, dropped out
(miss_dropout), its r-wide blocks summed, times the block ("mini"'s repeated out / mini_r times along
the outputs); "bat" computes F.linear with W + W_blocks @ B + B (each r x r block of W times its row
of blocks' shard), the input and bias cast to its dtype; either way the result in the input's dtype
(also disabled). Merging writes PEFT's get_delta_weight_miss (W plus the block's transpose over each
block of columns, the rest too) or, for "bat", W + get_delta_weight. Written: miss_model.pt and three
cases ("balance": the draws, r 4 over inputs of 6 and 8 with dropout; "mini": r 3, mini_r 2, bias
MiSS_only; "bat": r 4), the non-drawn blocks set from the case's "chosen".
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import autocast_outputs, saved_frozen, tensor


class ThreeLinears(nn.Module):
    """nn.Linear 6 to 8, 8 to 8 and 8 to 4: an input no r of 4 divides (padded), and square blocks."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


def make_blocks(model, targets, config):
    """update_layer: zeros of the variant's shape; init_weights False: kaiming_uniform_ of r x out."""
    blocks = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        r, out, init = config["r"], module.out_features, config["init_weights"]
        shape = (out // r, r, r) if init == "bat" else (r, config["mini_r"]) if init == "mini" else (r, out)
        block = torch.zeros(shape)
        if init is False:
            nn.init.kaiming_uniform_(block, a=math.sqrt(5))
        blocks[name] = block
    return blocks


def bat_delta(block, w):
    """PEFT's get_delta_weight (reverse=False)."""
    r = block.size(-1)
    blocks = w.to(block.dtype).reshape(w.size(0) // r, r, w.size(1) // r, r).permute(2, 0, 1, 3)
    return (blocks @ block + block).permute(1, 2, 0, 3).reshape(*w.shape)


def shard(module, block, config):
    return block.repeat(1, module.out_features // config["mini_r"]) if config["init_weights"] == "mini" else block


def forward(model, blocks, x, training, config):
    modules = dict(model.named_modules())
    handles = []
    for name, block in blocks.items():
        def miss(module, inputs, output, block=block):
            x = inputs[0]
            previous = x.dtype
            if config["init_weights"] == "bat":
                weight = module.weight.clone()
                weight = weight + bat_delta(block, weight)
                bias = module.bias.to(weight.dtype) if module.bias.dtype != weight.dtype else module.bias
                result = F.linear(x.to(weight.dtype) if x.dtype != weight.dtype else x, weight, bias)
            else:
                result = output
                miss_b = shard(module, block, config)
                r = miss_b.size(0)
                if x.size(-1) % r != 0:
                    x = F.pad(x, (0, (r - x.size(-1) % r) % r))
                x = x.to(miss_b.dtype) if x.dtype != miss_b.dtype else x
                dropped = F.dropout(x, config["miss_dropout"], training) if config["miss_dropout"] > 0 else x
                result = result + torch.sum(dropped.reshape(*x.shape[:-1], x.size(-1) // r, r), dim=-2) @ miss_b
            return result.to(previous)
        handles.append(modules[name].register_forward_hook(miss))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def merged_weight(module, block, config):
    """PEFT's merge: W + get_delta_weight ("bat"), else get_delta_weight_miss (reverse=False)."""
    weight = module.weight.data.clone()
    if config["init_weights"] == "bat":
        return weight + bat_delta(block, weight)
    miss_b = shard(module, block, config)
    in_features, r = weight.size(-1), miss_b.size(0)
    if in_features % r != 0:
        n_blocks = in_features // r
        aligned = n_blocks * r
        w_aligned = weight[:, :aligned].reshape(-1, n_blocks, r).permute(1, 2, 0)
        weight[:, :aligned] = (w_aligned + miss_b).permute(2, 0, 1).reshape(*weight[:, :aligned].shape)
        weight[:, aligned:] = weight[:, aligned:] + miss_b.transpose(0, 1)[:, :in_features % r]
        return weight
    w_blocks = weight.reshape(-1, weight.size(1) // r, r).permute(1, 2, 0)
    return (w_blocks + miss_b).permute(2, 0, 1).reshape(*weight.shape)


def one_case(model, targets, config, g):
    seed, train_seed = config["seed"], config["train_seed"]
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    chosen = make_blocks(model, targets, config)
    next_draw = torch.rand(3)
    if config["init_weights"] is not False:  # zeros: the case's own values, set in the model
        chosen = {n: torch.randn(b.shape, generator=g) * 0.5 for n, b in chosen.items()}
    for b in chosen.values():
        b.requires_grad_()
    x = torch.randn(5, 6, generator=g)
    target = torch.randn(5, 4, generator=g)
    bias = config["bias"] == "MiSS_only"
    biases = {n + ".bias": modules[n].bias for n in targets} if bias else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False, config)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False, config))
    low = {n: b.detach().clone().requires_grad_() for n, b in chosen.items()}
    torch.manual_seed(train_seed)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, low, x, True, config)
    autocast_train_output.float().sum().backward()
    autocast_grads = {f"{n}.miss_block": tensor(b.grad) for n, b in low.items()}
    for b in biases.values():
        b.grad = None
    torch.manual_seed(train_seed)
    train_output = forward(model, chosen, x, True, config)
    train_output.sum().backward()
    grads = {f"{n}.miss_block": tensor(b.grad) for n, b in chosen.items()}
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    with torch.no_grad():
        merged = {n + ".weight": tensor(merged_weight(modules[n], chosen[n], config)) for n in targets}
    trained = {n: b.detach().clone().requires_grad_() for n, b in chosen.items()}
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    optimizer = torch.optim.AdamW(list(trained.values()) + list(biases.values()), lr=1e-2)
    losses = []
    torch.manual_seed(train_seed)
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True, config), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    trained_json = {f"{n}.miss_block": tensor(b) for n, b in trained.items()}
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)
    init = config["init_weights"]
    return dict(config, **autocast, init_weights=init if isinstance(init, str) else str(init).lower(),
                targets=",".join(targets), next_draw=tensor(next_draw),
                chosen={f"{n}.miss_block": tensor(b) for n, b in chosen.items()}, input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, autocast_train_output=tensor(autocast_train_output.float()),
                autocast_grads=autocast_grads, merged=merged, losses=losses, trained=trained_json)


def miss_case(out):
    model = saved_frozen(ThreeLinears, 223, out / "miss_model.pt")
    g = torch.Generator().manual_seed(227)
    balance = {"r": 4, "mini_r": 1, "init_weights": False, "miss_dropout": 0.25, "bias": "none", "seed": 229,
               "train_seed": 233}
    mini = {"r": 3, "mini_r": 2, "init_weights": "mini", "miss_dropout": 0.0, "bias": "MiSS_only", "seed": 239,
            "train_seed": 241}
    bat = {"r": 4, "mini_r": 1, "init_weights": "bat", "miss_dropout": 0.0, "bias": "none", "seed": 251,
           "train_seed": 257}
    return {"balance": one_case(model, ["fc1", "fc2", "head"], balance, g),
            "mini": one_case(model, ["fc1", "head"], mini, g),
            "bat": one_case(model, ["fc2", "head"], bat, g)}
