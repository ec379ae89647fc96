"""The schedule-free optimizers next to the `schedulefree` package's own, step by step, bit for bit.

Steps an MLP with the package's AdamWScheduleFree / SGDScheduleFree (their one-tensor rules,
foreach=False; on the CPU PyTorch's foreach ops round alike) and with this library's
"adamw_schedule_free" / "sgd_schedule_free" from the same weights on the same batch, and compares
every weight after each step and after eval() and train(). The package is not installed anywhere
here: SCHEDULEFREE_SRC names its source folder (schedulefree/ of facebookresearch/schedule_free).
  SCHEDULEFREE_SRC=.../schedulefree python3 tests/sidebyside/schedule_free.py BUILD_DIR
Exit 1 on a difference.
"""
import ctypes
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from acc_ctypes import ACC_OPTIONS_OPTIMIZER, Library  # noqa: E402

SPEC = b'[{"type":"linear","in_features":3,"out_features":4},{"type":"tanh"},' \
       b'{"type":"linear","in_features":4,"out_features":2}]'
NAMES = ["0.weight", "0.bias", "2.weight", "2.bias"]
# (package module, class, its arguments, our algorithm, our options)
CASES = [
    ("adamw_schedulefree", "AdamWScheduleFree", {}, "adamw_schedule_free", {}),
    ("adamw_schedulefree", "AdamWScheduleFree",
     dict(lr=0.02, warmup_steps=3, weight_decay=0.1, r=1.0, weight_lr_power=1.0, betas=(0.8, 0.99), eps=1e-6),
     "adamw_schedule_free",
     dict(lr=0.02, warmup_steps=3, weight_decay=0.1, r=1.0, weight_lr_power=1.0, beta1=0.8, beta2=0.99, eps=1e-6)),
    ("adamw_schedulefree", "AdamWScheduleFree", dict(lr=0.01, inner_momentum=0.9, weight_decay=0.05),
     "adamw_schedule_free", dict(lr=0.01, inner_momentum=0.9, weight_decay=0.05)),
    ("sgd_schedulefree", "SGDScheduleFree", {}, "sgd_schedule_free", {}),
    ("sgd_schedulefree", "SGDScheduleFree", dict(lr=0.3, momentum=0.7, weight_decay=0.2, r=0.5, warmup_steps=2),
     "sgd_schedule_free", dict(lr=0.3, momentum=0.7, weight_decay=0.2, r=0.5, warmup_steps=2)),
]


def package_class(module, name):
    spec = importlib.util.spec_from_file_location(module, os.path.join(os.environ["SCHEDULEFREE_SRC"], module + ".py"))
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return getattr(loaded, name)


def run_case(lib, case, x, y, steps=7):
    module, name, theirs_args, algorithm, our_options = case
    model = lib.new("acc_model_from_spec", SPEC)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    params = dict(net.named_parameters())

    def ours(n):
        t = lib.new("acc_model_parameter", model, n.encode())
        try:
            return lib.to_torch(t)
        finally:
            lib.lib.acc_tensor_free(t)

    with torch.no_grad():
        for n in NAMES:
            params[n].copy_(ours(n))
    theirs = package_class(module, name)(net.parameters(), foreach=False, **theirs_args)
    options = lib.options(ACC_OPTIONS_OPTIMIZER, our_options)
    opt = lib.new("acc_optimizer_create", model, algorithm.encode(), options)
    x_ours, y_ours = lib.tensor(x), lib.tensor(y)
    differences = []

    def compare(when):
        for n in NAMES:
            if not torch.equal(ours(n), params[n].detach()):
                differences.append(f"{when}, {n}: differs by {(ours(n) - params[n].detach()).abs().max().item()}")

    theirs.train()
    lib.acc_optimizer_set_training(opt, 1)
    for step in range(1, steps + 1):
        theirs.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        theirs.step()
        lib.acc_optimizer_zero_grad(opt)
        out = lib.new("acc_model_forward1", model, x_ours, 0)
        loss = lib.new("acc_loss_mse", out, y_ours, 1)
        lib.acc_tensor_backward(loss)
        lib.acc_optimizer_step(opt)
        for t in (out, loss):
            lib.lib.acc_tensor_free(t)
        compare(f"step {step}")
    theirs.eval()
    lib.acc_optimizer_set_training(opt, 0)
    compare("eval()")
    theirs.train()
    lib.acc_optimizer_set_training(opt, 1)
    compare("train()")
    return differences


def main():
    lib = Library(os.path.join(sys.argv[1], "libaccelerate.so"))
    torch.manual_seed(0)
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    status = 0
    for case in CASES:
        differences = run_case(lib, case, x, y)
        print(f"{case[3]} {case[4]}: {'bit-identical' if not differences else 'DIFFERS'}")
        for d in differences[:8]:
            print("  " + d)
        status |= bool(differences)
    return status


if __name__ == "__main__":
    sys.exit(main())
