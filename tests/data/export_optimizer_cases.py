"""Weights after each step of PyTorch's own RMSprop and Adagrad, for tests/capi/test_optimizers.cpp to
reproduce bit for bit: a small MLP (Linear 3->4, Tanh, Linear 4->2, MSE loss) trained on a fixed
batch, with default and non-default hyper-parameters and with a second parameter group for the
biases. Values are written as float.hex() strings (exact).

Run with Debian's python3-torch: python3 export_optimizer_cases.py OUTPUT_DIR
"""
import json
import sys
from pathlib import Path

import torch

NAMES = ["0.weight", "0.bias", "2.weight", "2.bias"]
STEPS = 6

# (algorithm, options of the optimizer, options of a second group holding the biases or None)
CASES = [
    ("rmsprop", {}, None),
    ("rmsprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1, "momentum": 0.9, "centered": True}, None),
    ("rmsprop", {"lr": 0.02, "momentum": 0.5},
     {"lr": 0.005, "momentum": 0.0, "centered": True, "weight_decay": 0.2}),
    ("adagrad", {}, None),
    ("adagrad", {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.5, "eps": 1e-8},
     None),
    ("adagrad", {"lr": 0.05}, {"lr": 0.02, "initial_accumulator_value": 0.3, "lr_decay": 0.01}),
]


def hexes(tensor):
    return [float(v).hex() for v in tensor.detach().flatten().tolist()]


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


def main(out_dir):
    torch.set_num_threads(1)
    net = model()
    initial = {name: p.detach().clone() for name, p in net.named_parameters()}
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, generator=g)
    y = torch.randn(5, 2, generator=g)
    cases = []
    for algorithm, options, group in CASES:
        net = model()
        params = dict(net.named_parameters())
        if group is None:
            groups = [{"params": [params[n] for n in NAMES]}]
        else:
            groups = [{"params": [params["0.weight"], params["2.weight"]]},
                      dict(group, params=[params["0.bias"], params["2.bias"]])]
        cls = {"rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad}[algorithm]
        opt = cls(groups, **options)
        if algorithm == "adagrad" and group and "initial_accumulator_value" in group:
            # PyTorch fills every accumulator with the constructor's value, whatever a group says;
            # ours fills a group's with its own (README, "Where we differ"). Same arithmetic after.
            for p in groups[1]["params"]:
                opt.state[p]["sum"].fill_(group["initial_accumulator_value"])
        steps = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
            steps.append({n: hexes(params[n]) for n in NAMES})
        cases.append({"algorithm": algorithm, "options": options, "group": group, "steps": steps})
    data = {
        "torch": torch.__version__,
        "initial": {n: {"shape": list(t.shape), "values": hexes(t)} for n, t in initial.items()},
        "x": hexes(x), "y": hexes(y),
        "cases": cases,
    }
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "optimizer_cases.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv[1])
