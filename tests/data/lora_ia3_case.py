"""PEFT's (IA)^3 restated (peft/tuners/ia3/layer.py and model.py, PEFT not being packaged for
Debian), for tests/capi/test_ia3.cpp: each targeted layer, in named_modules() order, gets ia3_l =
torch.randn of its shape (a linear layer's (out, 1), or (1, in) for a feedforward module; a
convolution's (1, channels, 1, 1)), set to ones where init_ia3_weights; a linear layer's output is
(base(x) * l.flatten()).to(its dtype), a feedforward one's base((x.to(l.dtype) * l.flatten()).to(x's
dtype)); a convolution's (base(x).to(l.dtype) * l).to(x's dtype), a feedforward one's
base((x.to(l.dtype) * l).to(weight's dtype)); merging multiplies the weight (transposed for
transformers' Conv1D) and, for output vectors, the bias. Written: ia3_model.pt and the case (draws,
chosen vectors, outputs (also under bf16 autocast), gradients, merged tensors, three AdamW steps).
"""
import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import tensor

TARGETS = ["conv", "conv_ff", "fc1", "proj", "head"]
FEEDFORWARD = ["conv_ff", "proj"]


class Ia3Net(nn.Module):
    """Convolutions, a linear layer, transformers' Conv1D (`proj`, given: its class lives in the
    exporter's transformers module) and a linear head."""

    def __init__(self, proj):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.conv_ff = nn.Conv2d(4, 3, 1)
        self.fc1 = nn.Linear(48, 8)
        self.proj = proj
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        h = self.conv_ff(h).flatten(1)
        h = torch.tanh(self.fc1(h))
        return self.head(torch.tanh(self.proj(h)))


def is_conv1d(module):
    return type(module).__name__ == "Conv1D"


def feedforward(name):
    return any(name.endswith(key) for key in FEEDFORWARD)  # PEFT's _check_target_module_feedforward


def make_vectors(model, init):
    """PEFT's update_layer for every target, in named_modules() order."""
    vectors = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        ff = feedforward(name)
        if isinstance(module, nn.Conv2d):
            shape = (1, module.in_channels if ff else module.out_channels, 1, 1)
        else:
            in_f, out_f = module.weight.shape if is_conv1d(module) else (module.in_features, module.out_features)
            shape = (1, in_f) if ff else (out_f, 1)
        vector = torch.randn(shape)
        if init:
            nn.init.constant_(vector, 1.0)
        vectors[name] = vector.requires_grad_()
    return vectors


def forward(model, vectors, x):
    """The model with PEFT's IA3 layers' arithmetic, through hooks."""
    modules = dict(model.named_modules())
    handles = []
    for name, l in vectors.items():
        module, conv = modules[name], isinstance(modules[name], nn.Conv2d)
        if feedforward(name):
            def scale_input(m, inputs, l=l, conv=conv):
                x = inputs[0]
                if conv:
                    return ((x.to(l.dtype) * l).to(m.weight.dtype),)
                return ((x.to(l.dtype) * l.flatten()).to(x.dtype),)
            handles.append(module.register_forward_pre_hook(scale_input))
        else:
            def scale_output(m, inputs, output, l=l, conv=conv):
                if conv:
                    return (output.to(l.dtype) * l).to(inputs[0].dtype)
                return (output * l.flatten()).to(output.dtype)
            handles.append(module.register_forward_hook(scale_output))
    y = model(x)
    for h in handles:
        h.remove()
    return y


def merged(model, vectors):
    """PEFT's merge: weight * ia3_l (Conv1D's transposed, a convolution's output vector transposed),
    and an output vector's bias."""
    modules, out = dict(model.named_modules()), {}
    for name, l in vectors.items():
        module, l = modules[name], l.detach()
        if isinstance(module, nn.Conv2d):
            scaling = l if feedforward(name) else l.transpose(0, 1)
        else:
            scaling = l.T if is_conv1d(module) else l
        out[name + ".weight"] = tensor(torch.mul(module.weight, scaling))
        if not feedforward(name):
            out[name + ".bias"] = tensor(torch.mul(module.bias, l.reshape(module.bias.shape)))
    return out


def ia3_case(out, conv1d_class):
    torch.manual_seed(31)
    model = Ia3Net(conv1d_class(6, 8))
    torch.jit.script(model).save(str(out / "ia3_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)  # PEFT freezes the base model
    seed = 41
    torch.manual_seed(seed)
    make_vectors(model, init=True)
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    drawn = make_vectors(model, init=False)
    g = torch.Generator().manual_seed(43)
    chosen = {n: (1 + 0.3 * torch.randn(v.shape, generator=g)).requires_grad_() for n, v in drawn.items()}
    x = torch.randn(2, 2, 4, 4, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        autocast_output = forward(model, chosen, x).float()
    y = forward(model, chosen, x)
    y.sum().backward()
    grads = {n: tensor(v.grad) for n, v in chosen.items()}
    target = torch.randn(2, 3, generator=g)
    trained = {n: v.detach().clone().requires_grad_() for n, v in chosen.items()}
    optimizer = torch.optim.AdamW(list(trained.values()), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(forward(model, trained, x), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return {"targets": ",".join(TARGETS), "feedforward": ",".join(FEEDFORWARD), "seed": seed,
            "next_draw": tensor(next_draw), "drawn": {n: tensor(v) for n, v in drawn.items()},
            "chosen": {n: tensor(v) for n, v in chosen.items()}, "input": tensor(x), "output": tensor(y),
            "autocast_output": tensor(autocast_output),
            "grads": grads, "merged": merged(model, chosen), "target": tensor(target), "losses": losses,
            "trained": {n: tensor(v) for n, v in trained.items()}}
