"""PEFT's LN tuning restated (peft/tuners/ln_tuning; PEFT is not packaged for Debian), for
tests/capi/test_ln_tuning.cpp. Each targeted module (here two nn.LayerNorm) is wrapped with a copy of
itself that the forward runs and that trains; every other parameter is frozen. The copies start
equal to the originals, so the model computes as before; training changes the copies alone, a
disabled forward (or unload) runs the originals, merging keeps the copies. Written: ln_model.pt and
the case (the base outputs, three AdamW steps' losses, the trained tensors and outputs).
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import saved_frozen, tensor

TARGETS = ["norm1", "norm2"]


class LnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.norm1 = nn.LayerNorm(8)
        self.fc2 = nn.Linear(8, 8)
        self.norm2 = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.norm1(torch.relu(self.fc1(x)))
        return self.head(torch.tanh(self.norm2(self.fc2(h))))


def ln_tuning_case(out):
    g = torch.Generator().manual_seed(257)

    def made():  # LayerNorm starts as ones and zeros: values of their own, so that a test sees them
        model = LnNet()
        with torch.no_grad():
            for name in TARGETS:
                getattr(model, name).weight.copy_(1 + 0.1 * torch.randn(8, generator=g))
                getattr(model, name).bias.copy_(0.1 * torch.randn(8, generator=g))
        return model

    model = saved_frozen(made, 251, out / "ln_model.pt")
    x = torch.randn(4, 6, generator=g)
    target = torch.randn(4, 3, generator=g)
    with torch.no_grad():
        base_output = model(x)
    tuned = copy.deepcopy(model)  # PEFT's copies train; the originals stay
    params = [p for name in TARGETS for p in getattr(tuned, name).parameters()]
    for p in params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(tuned(x), target)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        trained_output = tuned(x)
    trained = {f"{name}.{k}": tensor(v) for name in TARGETS for k, v in getattr(tuned, name).state_dict().items()}
    return {"targets": ",".join(TARGETS), "input": tensor(x), "target": tensor(target),
            "base_output": tensor(base_output), "losses": losses, "trained": trained,
            "trained_output": tensor(trained_output)}
