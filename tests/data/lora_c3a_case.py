"""PEFT's C3A restated (peft/tuners/c3a/layer.py and utils.py; PEFT is not packaged for Debian), for
tests/capi/test_c3a.cpp. Each targeted nn.Linear, in named_modules() order, takes its block size b
(block_size_pattern's: the first key whose ".*\\.key$" re.match-es the module's name, else the key
equal to the name) and holds c3a_kernel, float32 zeros of out/b x in/b x b, then drawn from the
global generator: uniform_(-a, a) with a = sqrt(3) * sqrt(2 / (in + out)) ("xavier_uniform", and
False), a = sqrt(1 / in) ("kaiming_uniform"), normal_ ("gaussian"), nothing (True). Its forward adds
to the layer's output BlockCircularConvolution(x in float32, kernel) / in (ifft of the input's
blocks times fft of the kernel, summed per output block, fft, real part; its backward as PEFT
writes it), cast to the output's dtype; the result in the input's dtype (also disabled). Merging
adds get_circulant_fast(kernel) / in. Written: c3a_model.pt and two cases ("xavier": blocks of 2,
fc2's 4 by block_size_pattern, a 3-D input; "gaussian": blocks of 2, the biases trained).
"""
import math
import re

import torch
import torch.nn.functional as F
from torch.fft import fft, ifft

from lora_miss_case import ThreeLinears
from peft_restated import autocast_outputs, saved_frozen, tensor


class BlockCircularConvolution(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        _, n, b = w.shape
        x = x.reshape(*x.shape[:-1], n, b)
        ctx.save_for_backward(x, w)
        x = torch.einsum("...nb,mnb->...mb", ifft(x), fft(w))
        x = fft(x).real
        return x.reshape(*x.shape[:-2], -1)

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        m, _, b = w.shape
        grad_output = grad_output.reshape(*grad_output.shape[:-1], m, b)
        grad_output_fft = fft(grad_output)
        x_grad = fft(torch.einsum("...mb,mnb->...nb", grad_output_fft, ifft(w))).real
        x_grad = x_grad.reshape(*x_grad.shape[:-2], -1)
        w_grad = fft(torch.einsum("...mb,...nb->mnb", grad_output_fft, ifft(x))).real
        return x_grad, w_grad


def circulant(w):
    """PEFT's get_circulant_fast."""
    _, n, b = w.shape
    x = torch.eye(n * b, dtype=w.dtype).reshape(n * b, n, b)
    x = torch.einsum("...nb,mnb->...mb", ifft(x), fft(w))
    return fft(x).real.flatten(start_dim=1).T


def block_size_of(name, config):
    pattern = config["block_size_pattern"]
    key = next(filter(lambda k: re.match(rf".*\.{k}$", name), pattern), name)
    return pattern.get(key, config["block_size"])


def make_kernels(model, targets, config, init):
    kernels = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        b, fan_in, fan_out = block_size_of(name, config), module.in_features, module.out_features
        kernel = torch.zeros(fan_out // b, fan_in // b, b, dtype=torch.float32)
        with torch.no_grad():
            if init == "gaussian":
                torch.nn.init.normal_(kernel)
            elif init in ("xavier_uniform", False):
                a = math.sqrt(3.0) * (1.0 * math.sqrt(2.0 / float(fan_in + fan_out)))
                torch.nn.init.uniform_(kernel, -a, a)
            elif init == "kaiming_uniform":
                a = 1.0 * math.sqrt(1.0 / float(fan_in))
                torch.nn.init.uniform_(kernel, -a, a)
        kernels[name] = kernel
    return kernels


def forward(model, kernels, x, training):
    modules = dict(model.named_modules())
    handles = []
    for name, kernel in kernels.items():
        def c3a(module, inputs, output, kernel=kernel):
            previous = inputs[0].dtype
            x = inputs[0].to(torch.float32)
            x = BlockCircularConvolution.apply(x, kernel.to(torch.float32)) / x.size(-1)
            return (output + x.to(output.dtype)).to(previous)
        handles.append(modules[name].register_forward_hook(c3a))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def one_case(model, targets, config, g):
    seed, init = config["seed"], config["init_weights"]
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    chosen = make_kernels(model, targets, config, init)
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    kaiming = make_kernels(model, targets, config, "kaiming_uniform")
    for k in chosen.values():
        k.requires_grad_()
    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], 4, generator=g)
    biases = {n + ".bias": modules[n].bias for n in targets} if config["bias"] == "c3a_only" else {}
    for b in biases.values():
        b.requires_grad_(True)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False)
    autocast = autocast_outputs(model, targets, x, lambda: forward(model, chosen, x, False))
    low = {n: k.detach().clone().requires_grad_() for n, k in chosen.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast_train_output = forward(model, low, x, True)
    autocast_train_output.float().sum().backward()
    autocast_grads = {f"{n}.c3a_kernel": tensor(k.grad) for n, k in low.items()}
    for b in biases.values():
        b.grad = None
    train_output = forward(model, chosen, x, True)
    train_output.sum().backward()
    grads = {f"{n}.c3a_kernel": tensor(k.grad) for n, k in chosen.items()}
    grads.update({n: tensor(b.grad) for n, b in biases.items()})
    for b in biases.values():
        b.grad = None
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + circulant(chosen[n].float()).to(modules[n].weight.dtype)
                                        / modules[n].weight.size(-1)) for n in targets}
    trained = {n: k.detach().clone().requires_grad_() for n, k in chosen.items()}
    start_biases = {n: b.detach().clone() for n, b in biases.items()}
    optimizer = torch.optim.AdamW(list(trained.values()) + list(biases.values()), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x, True), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    trained_json = {f"{n}.c3a_kernel": tensor(k) for n, k in trained.items()}
    trained_json.update({n: tensor(b) for n, b in biases.items()})
    with torch.no_grad():  # the model as it was
        for n, b in biases.items():
            b.copy_(start_biases[n])
            b.requires_grad_(False)
    return dict(config, **autocast, targets=",".join(targets), next_draw=tensor(next_draw),
                chosen={f"{n}.c3a_kernel": tensor(k) for n, k in chosen.items()},
                kaiming={f"{n}.c3a_kernel": tensor(k) for n, k in kaiming.items()}, input=tensor(x),
                target=tensor(target), eval_output=tensor(eval_output), train_output=tensor(train_output),
                grads=grads, autocast_train_output=tensor(autocast_train_output.float()),
                autocast_grads=autocast_grads, merged=merged, losses=losses, trained=trained_json)


def c3a_case(out):
    model = saved_frozen(ThreeLinears, 263, out / "c3a_model.pt")
    g = torch.Generator().manual_seed(269)
    xavier = {"block_size": 2, "block_size_pattern": {"fc2": 4}, "init_weights": "xavier_uniform", "bias": "none",
              "seed": 271, "train_seed": 281, "input_shape": [5, 3, 6]}
    gaussian = {"block_size": 2, "block_size_pattern": {}, "init_weights": "gaussian", "bias": "c3a_only",
                "seed": 277, "train_seed": 283, "input_shape": [5, 6]}
    return {"xavier": one_case(model, ["fc1", "fc2", "head"], xavier, g),
            "gaussian": one_case(model, ["fc2", "head"], gaussian, g)}
