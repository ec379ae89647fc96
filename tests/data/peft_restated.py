"""What the restatements of PEFT's layers share (export_lora_cases.py and the cases it imports)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def tensor(t):
    """A tensor as the fixtures record it: its shape and its values in order."""
    return {"shape": list(t.shape), "values": t.detach().flatten().tolist()}


def linear_pair(in_features, out_features, r):
    """PEFT's update_layer for a linear adapter: nn.Linear(in, r) and nn.Linear(r, out) drawn, then
    Kaiming A and zero B."""
    a = nn.Linear(in_features, r, bias=False).weight
    b = nn.Linear(r, out_features, bias=False).weight
    nn.init.kaiming_uniform_(a, a=math.sqrt(5))
    nn.init.zeros_(b)
    return a, b


def svd_lowrank_2x(a, q, niter):
    """torch.svd_lowrank as PyTorch 2.x computes it (torch/_lowrank.py; Debian's 1.13 takes another
    path): Halko et al.'s algorithm 5.1 on A, or on A^T where A is wide."""
    wide = a.shape[0] < a.shape[1]
    if wide:
        a = a.mH
    start = torch.randn(a.shape[-1], q, dtype=a.dtype)
    basis = torch.linalg.qr(torch.matmul(a, start)).Q
    for _ in range(niter):
        basis = torch.linalg.qr(torch.matmul(a.mH, basis)).Q
        basis = torch.linalg.qr(torch.matmul(a, basis)).Q
    u, s, vh = torch.linalg.svd(torch.matmul(basis.mH, a), full_matrices=False)
    v = vh.mH
    u = basis.matmul(u)
    if wide:
        u, v = v, u
    return u, s, v


def lycoris_forward(model, deltas, x, training, module_dropout):
    """PEFT's LycorisLayer forward (LoHa's, LoKr's) as hooks on the targeted layers: in training a
    torch.rand(1) against module_dropout per layer, then the output plus the input (cast to the
    delta's dtype) through deltas[name](module) (F.linear, or the layer's F.conv with its stride,
    padding, dilation and groups), cast back to the input's dtype."""
    modules = dict(model.named_modules())
    handles = []
    for name, make_delta in deltas.items():
        def add(module, inputs, output, make_delta=make_delta):
            x = inputs[0]
            if (not training) or torch.rand(1) > module_dropout:
                w = make_delta(module)
                x_cast = x.to(w.dtype)
                if isinstance(module, nn.Linear):
                    branch = F.linear(x_cast, w)
                else:
                    conv = F.conv2d if isinstance(module, nn.Conv2d) else F.conv1d
                    branch = conv(x_cast, w, stride=module.stride, padding=module.padding, dilation=module.dilation,
                                  groups=module.groups)
                output = output + branch
            return output.to(x.dtype)
        handles.append(modules[name].register_forward_hook(add))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def hooked_forward(model, hooks, x, training):
    """The model's output on `x` in training or evaluation mode with each of `hooks` (module name to
    forward hook: a PEFT layer's forward restated) on its module, removed after."""
    modules = dict(model.named_modules())
    handles = [modules[name].register_forward_hook(hook) for name, hook in hooks.items()]
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def saved_frozen(make, seed, path):
    """The model make() builds after torch.manual_seed(seed), saved as TorchScript at `path` and frozen:
    the base the adapters train beside."""
    torch.manual_seed(seed)
    model = make()
    torch.jit.script(model).save(str(path))
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def cast_to_input_hooks(model, names):
    """PEFT's OFT, BOFT and HRA layers end their forward in result.to(x.dtype), enabled or not: forward
    hooks that do so on the named layers; their handles."""
    modules = dict(model.named_modules())
    return [modules[n].register_forward_hook(lambda module, inputs, output: output.to(inputs[0].dtype))
            for n in names]


def autocast_outputs(model, names, x, adapted):
    """The model's outputs on `x` in evaluation under bf16 autocast, as float32, and their dtypes: with
    the adapters (`adapted()` runs their forward) and disabled (the named layers' outputs cast to their
    inputs' dtype)."""
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        enabled = adapted()
        handles = cast_to_input_hooks(model, names)
        model.eval()
        disabled = model(x)
    for h in handles:
        h.remove()
    return {"autocast_output": tensor(enabled.float()), "autocast_disabled_output": tensor(disabled.float()),
            "autocast_dtypes": [str(enabled.dtype), str(disabled.dtype)]}


class ConvThenLinears(nn.Module):
    """A strided Conv2d (2 to 3 channels, a 2 x 2 kernel: an unrolled input of 8) and three nn.Linear
    layers (27 to 8 to 4 to 3): the model the BOFT and HRA cases adapt."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 2, stride=2, padding=1)
        self.fc1 = nn.Linear(27, 8)
        self.fc2 = nn.Linear(8, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(1)
        return self.head(torch.tanh(self.fc2(torch.relu(self.fc1(h)))))


def unrolled_in_features(module):
    """A linear layer's inputs, or a square-kernel Conv2d's in_channels x kernel x kernel."""
    if isinstance(module, nn.Conv2d):
        return module.in_channels * module.kernel_size[0] * module.kernel_size[0]
    return module.in_features


class LinearConv1dNet(nn.Module):
    """Two nn.Linear layers around transformers' Conv1D(5, 8) (`proj`, in 8, out 5): 6 to 8 to 5 to 3,
    the model the VeRA and FourierFT cases adapt."""

    def __init__(self, proj):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.proj = proj
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.proj(torch.relu(self.fc1(x)))))


def in_out(module):
    """PEFT's _get_in_out_features: a Conv1D's weight is in x out."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    return module.weight.shape[0], module.weight.shape[1]


def eval_and_autocast_outputs(model, run, x):
    """The evaluation output run() gives (a layer's forward restated, hooked in), then under bf16
    autocast its output and the model's own with the adapters disabled (PEFT's disabled layer returns
    its base layer's output as it is), without gradients."""
    with torch.no_grad():
        eval_output = run()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            enabled = run()
            model.eval()
            disabled = model(x)
    return eval_output, enabled, disabled


def seeded_backward(run, seed, autocast=False):
    """run()'s output (a training forward) with the global generator seeded `seed` first (dropout),
    under bf16 autocast where asked, after the backward of its sum (in float32)."""
    torch.manual_seed(seed)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        output = run()
    (output.float() if autocast else output).sum().backward()
    return output


def adamw_mse_losses(run, parameters, target, seed, steps=3):
    """`steps` AdamW steps (lr 1e-2) of the MSE between run() (a training forward) and `target`, the
    global generator seeded `seed` first: the losses. zero_grad(set_to_none=True), PyTorch 2's default
    (Debian's 1.13 zeroes them)."""
    optimizer = torch.optim.AdamW(parameters, lr=1e-2)
    losses = []
    torch.manual_seed(seed)
    for _ in range(steps):
        loss = F.mse_loss(run(), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return losses

