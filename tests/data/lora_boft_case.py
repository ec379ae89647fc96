"""PEFT's BOFT restated (peft/tuners/boft/layer.py; PEFT is not packaged for Debian), for
tests/capi/test_boft.cpp. Each targeted layer (nn.Linear; nn.Conv2d, whose "input" is in_channels x
kernel x kernel), in named_modules() order, splits its input into boft_block_num blocks of
boft_block_size (one given, the other 0) and trains boft_R (factors x blocks x block x block: zeros
with init_weights, else normal(0, 0.1)) and boft_s (out x 1, a convolution's 1 x out: ones, else
normal(1, 0.1)), R drawn before s. Each forward makes every block a rotation by the Cayley
transform solve(I + S, I - S) from the right (S = (R - R^T) / 2), in training replaces the blocks of
one factor (torch.randint) chosen by torch.randperm with the identity (boft_dropout), lays each
factor's blocks on a diagonal, permutes it by the factor's butterfly permutation P (P B P^T) and
multiplies the factors (the last on the left). PEFT builds the diagonals of several factors with its
CUDA extension (FastBlockDiag) and on a CPU takes one factor whatever boft_n_butterfly_factor says;
this restates the extension: each factor's blocks on its own diagonal. A linear layer computes
base(x @ M) with its bias taken out, scaled by s per output, and put back; a convolution computes
with its weight rotated, (M W^T)^T * s, and its bias. Merging writes that weight. Written:
boft_model.pt and two cases ("linear": blocks of 2 over two butterfly factors with dropout;
"conv": two blocks, one factor, the convolution too).
"""
import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import autocast_outputs, ConvThenLinears, saved_frozen, tensor, unrolled_in_features as in_features


def layout(n, config):
    """update_layer's blocks: (factors, block_num, block_size)."""
    factors = config["boft_n_butterfly_factor"]
    if config["boft_block_size"] == 0:
        num = config["boft_block_num"]
        return factors, num, n // num
    size = config["boft_block_size"]
    return factors, n // size, size


def butterfly_perm(n, b, r, n_butterfly_factor):
    """PEFT's block_butterfly_perm."""
    if n_butterfly_factor == 0:
        return torch.arange(n)
    block_size = int(n // b)
    indices = torch.arange(n)

    def sort_block(b, r):
        step = b / r
        initial_order = torch.arange(b)
        sorted_order = torch.empty(b, dtype=torch.long)
        evens = torch.arange(0, step, 2)
        odds = torch.arange(1, step, 2)
        sorted_seq = torch.cat((evens, odds), dim=0)
        for i, pos in enumerate(sorted_seq):
            sorted_order[int(i * r):int(i * r + r)] = initial_order[int(pos * r):int(pos * r + r)]
        return sorted_order

    sorted_order = sort_block(block_size, r)
    for i in range(0, n, block_size):
        block_end = i + block_size
        tmp_indices = indices[i:block_end]
        indices[i:block_end] = tmp_indices[sorted_order]
    return indices


def perm_matrices(n, factors, num, size):
    p = torch.empty((factors, n, n))
    for i in range(factors):
        perm = butterfly_perm(n, int(num / (2 ** i)), int(size / 2), factors - 1)
        m = torch.zeros((n, n))
        for j, idx in enumerate(perm):
            m[j, idx] = 1
        p[i] = m
    return p


def cayley(data):
    b, r, c = data.shape
    skew_mat = 0.5 * (data - data.transpose(1, 2))
    id_mat = torch.eye(r).unsqueeze(0).expand(b, r, c)
    return torch.linalg.solve(id_mat + skew_mat, id_mat - skew_mat, left=False).to(data.dtype)


def multiplicative_dropout(x, p, training):
    if not training or p == 0:
        return x
    n, d, h, _ = x.shape
    n_random = torch.randint(0, n, (1,)).item()
    num_to_replace = int(p * d)
    num_zeros = d - num_to_replace
    mask = torch.cat([torch.ones(num_to_replace), torch.zeros(num_zeros)])
    mask = mask[torch.randperm(d)].view(1, d, 1, 1)
    full_mask = torch.zeros(n, d, 1, 1)
    full_mask[n_random] = mask
    eye_matrix = torch.eye(h).repeat(n, d, 1, 1)
    return (1 - full_mask) * x + full_mask * eye_matrix


def butterfly_matrix(boft_r, p, dropout, training):
    n, d, h, _ = boft_r.shape
    rotations = cayley(boft_r.view(n * d, h, h)).view(n, d, h, h)
    rotations = multiplicative_dropout(rotations, dropout, training)
    block_diagonal = torch.stack([torch.block_diag(*torch.unbind(rotations[i])) for i in range(n)])  # FastBlockDiag
    batch = torch.bmm(block_diagonal, p.permute(0, 2, 1))
    batch = torch.bmm(p, batch)
    m = batch[0]
    for i in range(1, batch.shape[0]):
        m = batch[i] @ m
    return m


def make_adapters(model, targets, config):
    adapters = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        n = in_features(module)
        factors, num, size = layout(n, config)
        out = module.out_channels if isinstance(module, nn.Conv2d) else module.out_features
        boft_r = torch.zeros(factors, num, size, size)
        boft_s = torch.ones(1, out) if isinstance(module, nn.Conv2d) else torch.ones(out, 1)
        if not config["init_weights"]:
            nn.init.normal_(boft_r, mean=0.0, std=0.1)
            nn.init.normal_(boft_s, mean=1.0, std=0.1)
        adapters[name] = {"boft_R": boft_r.requires_grad_(), "boft_s": boft_s.requires_grad_(),
                          "P": perm_matrices(n, factors, num, size)}
    return adapters


def forward(model, adapters, x, training, dropout):
    modules = dict(model.named_modules())
    handles = []
    for name, a in adapters.items():
        module = modules[name]
        if isinstance(module, nn.Conv2d):
            def conv_forward(module, inputs, output, a=a):
                x = inputs[0]
                n = in_features(module)
                rotation = butterfly_matrix(a["boft_R"], a["P"], dropout, training) @ torch.eye(n)
                scale = a["boft_s"].transpose(0, 1) * torch.ones((module.out_channels, 1))
                w = module.weight.view(module.out_channels, n).transpose(0, 1)
                rotated = torch.mm(rotation, w).transpose(0, 1) * scale
                rotated = rotated.view(module.out_channels, module.in_channels, module.kernel_size[0],
                                       module.kernel_size[0])
                y = F.conv2d(x, rotated, module.bias, padding=module.padding[0], stride=module.stride[0])
                return y.to(x.dtype)
            handles.append(module.register_forward_hook(conv_forward))
        else:
            def rotate_input(module, inputs, a=a):
                rotation = butterfly_matrix(a["boft_R"], a["P"], dropout, training) @ torch.eye(module.in_features)
                a["scale"] = a["boft_s"] * torch.ones((module.out_features, 1))
                a["dtype"] = inputs[0].dtype
                return (inputs[0] @ rotation,)

            def scale_output(module, inputs, output, a=a):
                result = output - module.bias
                result = result * a["scale"].squeeze(-1)
                return (result + module.bias).to(a["dtype"])
            handles.append(module.register_forward_pre_hook(rotate_input))
            handles.append(module.register_forward_hook(scale_output))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def merged_weight(module, a):
    m = butterfly_matrix(a["boft_R"], a["P"], 0.0, False)
    if isinstance(module, nn.Conv2d):
        n = in_features(module)
        w = module.weight.view(module.out_channels, n).transpose(0, 1)
        w = torch.mm(m, w).transpose(0, 1) * a["boft_s"].transpose(0, 1)
        return w.view(module.weight.shape)
    return torch.mm(m, module.weight.transpose(0, 1)).transpose(0, 1) * a["boft_s"]


def one_case(model, targets, config, g):
    seed, train_seed = config["seed"], config["train_seed"]
    torch.manual_seed(seed)
    make_adapters(model, targets, dict(config, init_weights=True))
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    chosen = make_adapters(model, targets, config)
    next_draw_drawn = torch.rand(3)
    x = torch.randn(4, 2, 5, 5, generator=g)
    target = torch.randn(4, 3, generator=g)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False, config["boft_dropout"])
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False, config["boft_dropout"]))
    torch.manual_seed(train_seed)
    train_output = forward(model, chosen, x, True, config["boft_dropout"])
    train_output.sum().backward()
    keys = ("boft_R", "boft_s")
    grads = {f"{n}.{k}": tensor(a[k].grad) for n, a in chosen.items() for k in keys}
    modules = dict(model.named_modules())
    with torch.no_grad():
        merged = {n + ".weight": tensor(merged_weight(modules[n], chosen[n])) for n in targets}
    trained = {n: dict(a, boft_R=a["boft_R"].detach().clone().requires_grad_(),
                       boft_s=a["boft_s"].detach().clone().requires_grad_()) for n, a in chosen.items()}
    optimizer = torch.optim.AdamW([a[k] for a in trained.values() for k in keys], lr=1e-2)
    losses = []
    torch.manual_seed(train_seed)
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True, config["boft_dropout"]), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    as_json = lambda adapters: {f"{n}.{k}": tensor(a[k]) for n, a in adapters.items() for k in keys}
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw),
                next_draw_drawn=tensor(next_draw_drawn), chosen=as_json(chosen), input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, merged=merged, losses=losses, trained=as_json(trained))


def boft_case(out):
    model = saved_frozen(ConvThenLinears, 151, out / "boft_model.pt")
    g = torch.Generator().manual_seed(157)
    linear = {"boft_block_size": 2, "boft_block_num": 0, "boft_n_butterfly_factor": 2, "boft_dropout": 0.5,
              "init_weights": False, "seed": 163, "train_seed": 167}
    conv = {"boft_block_size": 0, "boft_block_num": 2, "boft_n_butterfly_factor": 1, "boft_dropout": 0.0,
            "init_weights": False, "seed": 173, "train_seed": 179}
    return {"linear": one_case(model, ["fc2", "head"], linear, g),
            "conv": one_case(model, ["conv", "fc2"], conv, g)}
