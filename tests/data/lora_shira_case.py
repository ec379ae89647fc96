"""PEFT's SHiRA restated (peft/tuners/shira/layer.py and mask_functions.py; PEFT is not packaged for
Debian), for tests/capi/test_shira.cpp. Each targeted nn.Linear (out x in), in named_modules() order,
draws its mask from a CPU generator of its own (random_mask: torch.Generator() seeded random_seed, or
left at its default seed where random_seed is None): the first r (in + out) entries of
torch.randperm(out * in), set in an out x in mask; shira_indices are the mask's positions in
torch.where's (row-major) order as int32, 2 x K, and shira_weight is zeros(K) (init_weights) or
torch.randn(K) from the global generator. Its forward computes F.linear(x, W + the sparse
(indices, shira_weight * scaling) matrix, bias) (the base layer's output, uncast, while disabled);
merging adds that sparse matrix to W. Written: shira_model.pt and two cases ("seeded": random_seed 42
on the three layers, a 3-D input; "unseeded": two layers, r 1, the default seed).
"""
import torch
import torch.nn.functional as F

from lora_miss_case import ThreeLinears
from peft_restated import autocast_outputs, hooked_forward, saved_frozen, tensor


def random_mask(module, r, random_seed):
    """PEFT's random_mask: a bool out x in mask of r (in + out) positions."""
    shape = (module.out_features, module.in_features)
    generator = torch.Generator()
    if random_seed is not None:
        generator.manual_seed(random_seed)
    idx = torch.randperm(shape[0] * shape[1], generator=generator)[: r * (shape[0] + shape[1])]
    val = torch.ones(*idx.shape, dtype=bool)
    mask = torch.zeros(*shape).to(val).view(1, -1)
    return mask.scatter_(1, idx.unsqueeze(0), val.unsqueeze(0)).view(shape)


def make_adapters(model, targets, config, init_weights):
    """Each layer's (indices, weight): the mask first, then update_layer's zeros or torch.randn."""
    adapters = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        mask = random_mask(module, config["r"], config["random_seed"])
        k = config["r"] * (module.in_features + module.out_features)
        weight = torch.zeros(k) if init_weights else torch.randn(k)
        rows, cols = torch.where(mask == 1.0)
        adapters[name] = (torch.cat([rows.unsqueeze(0), cols.unsqueeze(0)], 0).to(torch.int), weight)
    return adapters


def delta(module, indices, weight):
    """PEFT's get_delta_weight, a sparse matrix, as the dense one it adds to W: Debian's torch 1.13
    cannot take a sparse gradient through `new_weight += delta` (2.x can), and each entry of W gains
    its value once either way, so the sums are the same bits (checked on every use without gradients)."""
    values = weight * 1.0  # (scaling)
    dense = torch.zeros(module.out_features, module.in_features).index_put_(
        (indices[0].long(), indices[1].long()), values, accumulate=True)
    if not torch.is_grad_enabled() or not weight.requires_grad:
        with torch.no_grad():
            sparse_sum = module.weight.clone()
            sparse_sum += torch.sparse_coo_tensor(indices, values, (module.out_features, module.in_features))
            assert torch.equal(sparse_sum, module.weight + dense)
    return dense


def forward(model, adapters, x, training):
    def hook(indices, weight):
        def shira(module, inputs, output):
            new_weight = module.weight.clone() + delta(module, indices, weight)
            return F.linear(inputs[0], new_weight, bias=module.bias)
        return shira
    return hooked_forward(model, {n: hook(i, w) for n, (i, w) in adapters.items()}, x, training)


def one_case(model, targets, config, g):
    seed = config["seed"]
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    chosen = make_adapters(model, targets, config, False)
    next_draw = torch.rand(3)
    for _, w in chosen.values():
        w.requires_grad_()
    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], 4, generator=g)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False)
    autocast = autocast_outputs(model, [], x, lambda: forward(model, chosen, x, False))
    low = {n: (i, w.detach().clone().requires_grad_()) for n, (i, w) in chosen.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, low, x, True)
    autocast_train_output.float().sum().backward()
    autocast_grads = {f"{n}.shira_weight": tensor(w.grad) for n, (_, w) in low.items()}
    train_output = forward(model, chosen, x, True)
    train_output.sum().backward()
    grads = {f"{n}.shira_weight": tensor(w.grad) for n, (_, w) in chosen.items()}
    with torch.no_grad():
        merged = {}
        for n, (i, w) in chosen.items():
            merged[n + ".weight"] = tensor(modules[n].weight + delta(modules[n], i, w))
    trained = {n: (i, w.detach().clone().requires_grad_()) for n, (i, w) in chosen.items()}
    optimizer = torch.optim.AdamW([w for _, w in trained.values()], lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw),
                chosen={f"{n}.shira_weight": tensor(w) for n, (_, w) in chosen.items()},
                indices={n: i.flatten().tolist() for n, (i, _) in chosen.items()}, input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, autocast_train_output=tensor(autocast_train_output.float()),
                autocast_grads=autocast_grads, merged=merged, losses=losses,
                trained={f"{n}.shira_weight": tensor(w) for n, (_, w) in trained.items()})


def shira_case(out):
    model = saved_frozen(ThreeLinears, 293, out / "shira_model.pt")
    g = torch.Generator().manual_seed(307)
    seeded = {"r": 2, "random_seed": 42, "seed": 311, "train_seed": 313, "input_shape": [5, 3, 6]}
    unseeded = {"r": 1, "random_seed": None, "seed": 317, "train_seed": 331, "input_shape": [5, 6]}
    return {"seeded": one_case(model, ["fc1", "fc2", "head"], seeded, g),
            "unseeded": one_case(model, ["fc2", "head"], unseeded, g)}

