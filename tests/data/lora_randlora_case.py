"""PEFT's RandLoRA restated (peft/tuners/randlora/model.py and layer.py; PEFT is not packaged for
Debian), for tests/capi/test_randlora.cpp. The shared bases come first, from a CPU generator of their
own seeded projection_prng_key, over the largest output and input of the targeted layers (max_dim and
min_dim their larger and smaller): randlora_A (r x 1 x min_dim), then randlora_B (max_dim x
num_bases x r, num_bases = ceil(min_dim / r)), kaiming_uniform_(a = sqrt(5)) in bfloat16 (PEFT's
_kaiming_init where Accelerate's is_bf16_available, the CPU's case), B one r-wide slice per base,
each then divided by its std; or ("sparse", "very_sparse") torch.rand draws set to -1, 0, 1 by
1 / (2 s) from either end (s 3, or sqrt(min_dim)), float32, divided by their std. Then each targeted
nn.Linear (in named_modules() order): randlora_lambda = torch.randn(r, n) from the global generator
(n = ceil(min(in, out) / r)), randlora_gamma = ones(n, min(in, out)) / max(in, out); with
init_weights lambda zeroed and gamma 1 / max(n, min(in, out)). Its forward (on the CPU, in float32):
A' = lambda[:, :, None] * A[:, :n, :min] * gamma[None] (PEFT's UniqueBaseGrad, its hand-written
backward too), flattened to (r n) x min, B' = B[:max, :n, :] flattened to max x (n r); the output plus
F.linear(F.linear(dropout(x), first), second) * alpha / r, first and second (A', B') where min is the
input, else (B'^T, A'^T), cast back to the input's dtype. Merging adds (second @ first) * alpha / r.
Written: randlora_model.pt and two cases ("dense": r 3 over 6-to-8, 8-to-8 and 8-to-4 layers, a 3-D
input, dropout; "sparse": r 2, randlora_only biases).
"""
import math

import torch
import torch.nn.functional as F

from lora_miss_case import ThreeLinears
from peft_restated import autocast_outputs, hooked_forward, saved_frozen, tensor


class UniqueBaseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, randlora_A, randlora_lambda, randlora_gamma):
        out = randlora_lambda[:, :, None] * randlora_A * randlora_gamma[None,]
        ctx.save_for_backward(randlora_A, randlora_lambda, randlora_gamma)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        randlora_A, randlora_lambda, randlora_gamma = ctx.saved_tensors
        randlora_A, randlora_lambda, randlora_gamma = (
            randlora_A.to(grad_output.dtype),
            randlora_lambda.to(grad_output.dtype),
            randlora_gamma.to(grad_output.dtype),
        )
        grad_randlora_lambda = torch.einsum("kbj,kvj,bj->kb", grad_output, randlora_A, randlora_gamma)
        grad_randlora_gamma = torch.einsum("kbj,kvj,kb->bj", grad_output, randlora_A, randlora_lambda)
        return None, grad_randlora_lambda, grad_randlora_gamma


def kaiming_bf16(shape, generator):
    """PEFT's _kaiming_init on a new bfloat16 tensor: kaiming_uniform_(a=sqrt(5)) from `generator`
    (torch 1.13's kaiming_uniform_ takes no generator: its bound, then uniform_)."""
    tensor_ = torch.empty(shape, dtype=torch.bfloat16)
    fan_in = shape[1] * math.prod(shape[2:])
    bound = math.sqrt(3.0) * (math.sqrt(2.0 / (1 + 5)) / math.sqrt(fan_in))
    with torch.no_grad():
        return tensor_.uniform_(-bound, bound, generator=generator)


def num_bases_of(min_dim, r):
    n = min_dim / r
    return int(n) if n.is_integer() else int(n) + 1


def make_bases(model, targets, config):
    modules = dict(model.named_modules())
    out = max(modules[n].out_features for n in targets)
    inn = max(modules[n].in_features for n in targets)
    max_dim, min_dim = max(out, inn), min(out, inn)
    r = config["r"]
    generator = torch.Generator(device="cpu").manual_seed(config["projection_prng_key"])
    n = num_bases_of(min_dim, r)
    if config["sparse"] or config["very_sparse"]:
        sparsity = math.sqrt(min_dim) if config["very_sparse"] else 3
        a = torch.rand((r, 1, min_dim), generator=generator)
        b = torch.rand((max_dim, n, r), generator=generator)
        b_sparse, a_sparse = torch.zeros(b.shape), torch.zeros(a.shape)
        b_sparse[b < 1 / (2 * sparsity)] = -1
        b_sparse[b > 1 - 1 / (2 * sparsity)] = 1
        a_sparse[a < 1 / (2 * sparsity)] = -1
        a_sparse[a > 1 - 1 / (2 * sparsity)] = 1
        return a_sparse / a_sparse.std(), b_sparse / b_sparse.std()
    a = kaiming_bf16((r, 1, min_dim), generator)
    b = torch.cat([kaiming_bf16((max_dim, 1, r), generator) for _ in range(n)], dim=1)
    return a / a.std(), b / b.std()


def make_layers(model, targets, config, init_weights):
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        small, large = min(module.in_features, module.out_features), max(module.in_features, module.out_features)
        n = num_bases_of(small, config["r"])
        lam = torch.randn(config["r"], n)
        gamma = torch.ones(n, small) / large
        if init_weights:
            lam.zero_()
            gamma.fill_(1 / max(gamma.shape))
        layers[name] = (lam, gamma)
    return layers


def scaled_bases(module, bases, lam, gamma):
    """get_scaled_bases on the CPU: everything in float32."""
    a, b = bases[0].float(), bases[1].float()
    small, large = min(module.in_features, module.out_features), max(module.in_features, module.out_features)
    n = lam.shape[1]
    update_b = b[:large, :n, :].flatten(start_dim=1)
    update_a = UniqueBaseGrad.apply(a[:, :n, :small], lam.float(), gamma.float()).flatten(end_dim=1)
    if small == module.in_features:
        return update_a, update_b
    return update_b.T, update_a.T


def forward(model, bases, layers, x, training, config):
    scaling = config["randlora_alpha"] / config["r"]

    def hook(lam, gamma):
        def add(module, inputs, output):
            previous = inputs[0].dtype
            first, second = scaled_bases(module, bases, lam, gamma)
            x = inputs[0].to(second.dtype)
            if config["randlora_dropout"] > 0:
                x = F.dropout(x, config["randlora_dropout"], training)
            return (output + F.linear(F.linear(x, first), second) * scaling).to(previous)
        return add
    return hooked_forward(model, {n: hook(lam, gamma) for n, (lam, gamma) in layers.items()}, x, training)


def one_case(model, targets, config, g):
    modules = dict(model.named_modules())
    bases = make_bases(model, targets, config)
    torch.manual_seed(config["seed"])
    initial = make_layers(model, targets, config, True)
    torch.manual_seed(config["seed"])
    chosen = make_layers(model, targets, config, False)
    next_draw = torch.rand(3)
    for lam, gamma in chosen.values():
        lam.requires_grad_()
        gamma.requires_grad_()
    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], 4, generator=g)
    biases = {n + ".bias": modules[n].bias for n in targets} if config["bias"] == "randlora_only" else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        eval_output = forward(model, bases, chosen, x, False, config)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, bases, chosen, x, False, config))

    def copies():
        return {n: (l.detach().clone().requires_grad_(), gm.detach().clone().requires_grad_())
                for n, (l, gm) in chosen.items()}

    def grads_of(layers):
        out = {}
        for n, (l, gm) in layers.items():
            out[f"{n}.randlora_lambda"] = tensor(l.grad)
            out[f"{n}.randlora_gamma"] = tensor(gm.grad)
        return out

    low = copies()
    torch.manual_seed(config["train_seed"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, bases, low, x, True, config)
    autocast_train_output.float().sum().backward()
    autocast_grads = grads_of(low)
    for b in biases.values():
        b.grad = None
    torch.manual_seed(config["train_seed"])
    train_output = forward(model, bases, chosen, x, True, config)
    train_output.sum().backward()
    grads = grads_of(chosen)
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    scaling = config["randlora_alpha"] / config["r"]
    with torch.no_grad():
        merged = {}
        for n, (l, gm) in chosen.items():
            first, second = scaled_bases(modules[n], bases, l, gm)
            merged[n + ".weight"] = tensor(modules[n].weight + ((first.T @ second.T).T * scaling).to(torch.float32))
    trained = copies()
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    parameters = [t for pair in trained.values() for t in pair] + list(biases.values())
    optimizer = torch.optim.AdamW(parameters, lr=1e-2)
    losses = []
    torch.manual_seed(config["train_seed"])
    for _ in range(3):
        loss = F.mse_loss(forward(model, bases, trained, x, True, config), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    trained_json = {}
    for n, (l, gm) in trained.items():
        trained_json[f"{n}.randlora_lambda"] = tensor(l)
        trained_json[f"{n}.randlora_gamma"] = tensor(gm)
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)

    def named(layers):
        out = {}
        for n, (l, gm) in layers.items():
            out[f"{n}.randlora_lambda"] = tensor(l)
            out[f"{n}.randlora_gamma"] = tensor(gm)
        return out

    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw),
                randlora_A=tensor(bases[0].float()), randlora_B=tensor(bases[1].float()),
                bases_dtype=str(bases[0].dtype), initial=named(initial), chosen=named(chosen), input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, autocast_train_output=tensor(autocast_train_output.float()),
                autocast_grads=autocast_grads, merged=merged, losses=losses, trained=trained_json)


def randlora_case(out):
    model = saved_frozen(ThreeLinears, 337, out / "randlora_model.pt")
    g = torch.Generator().manual_seed(347)
    dense = {"r": 3, "randlora_alpha": 6.0, "projection_prng_key": 11, "sparse": False, "very_sparse": False,
             "randlora_dropout": 0.25, "bias": "none", "seed": 349, "train_seed": 353, "input_shape": [5, 3, 6]}
    sparse = {"r": 2, "randlora_alpha": 4.0, "projection_prng_key": 0, "sparse": True, "very_sparse": False,
              "randlora_dropout": 0.0, "bias": "randlora_only", "seed": 359, "train_seed": 367,
              "input_shape": [5, 6]}
    return {"dense": one_case(model, ["fc1", "fc2", "head"], dense, g),
            "sparse": one_case(model, ["fc1", "fc2", "head"], sparse, g)}
