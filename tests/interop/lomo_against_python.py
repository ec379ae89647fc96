"""LOMO and AdaLomo through the C API (acc_lomo_backward, acc_backward_lr, acc_lomo_grad_norm)
against lomo_optim's Lomo and AdaLomo driven as Python Accelerate drives them (backward(loss,
learning_rate=lr): the loss over the accumulation steps, then fused_backward), on the same
TorchScript model, weights and batches: each step's loss and measured gradient norm and the final
weights, bit for bit. Then an AdaLomo run saved after a few steps and resumed in a new accelerator
goes on exactly as the uninterrupted one.

lomo_optim itself needs transformers and CUDA: with LOMO_OPTIM_SRC naming a checkout of it
(OpenLMLab/LOMO), the package is imported with those two stubbed out; otherwise the reference is the
package's update rules written out below from its source, op for op.

    lomo_against_python.py BUILD_DIR WORK_DIR
"""
import ctypes
import math
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sidebyside"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acc_ctypes as api  # noqa: E402
from resume_in_python import c_weights  # noqa: E402

STEPS, SAVED_AFTER = 6, 3


class Net(torch.nn.Module):
    """Matrices and vectors (AdaLomo factors the matrices' second moments), and dropout."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.drop = torch.nn.Dropout(0.2)
        self.out = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.norm(self.inner(x)))))


def batch(step):
    g = torch.Generator().manual_seed(300 + step)
    return torch.randn(6, 8, generator=g) * 3, torch.randint(0, 3, (6,), generator=g)


# ---- The reference ------------------------------------------------------------------------------

class FusedReference:
    """lomo_optim's fuse_update and its two backward passes, outside DeepSpeed, for Lomo
    (adaptive=False) and AdaLomo (adaptive=True)."""

    def __init__(self, model, adaptive, lr=1e-3, clip_grad_norm=None, clip_grad_value=None, weight_decay=0.0,
                 loss_scale=2 ** 10, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8):
        self.model, self.adaptive, self.lr = model, adaptive, lr
        self.clip_grad_norm, self.clip_grad_value, self.weight_decay = clip_grad_norm, clip_grad_value, weight_decay
        self.loss_scale = loss_scale if adaptive else 0
        self.eps, self.clip_threshold, self.decay_rate = eps, clip_threshold, decay_rate
        self.step_num, self.gathering, self.norms, self.clip_coef = 0, False, [], None
        self.moments = {}
        for _, p in model.named_parameters():
            if p.requires_grad:
                p.register_hook(self.hook)

    def hook(self, grad):
        self.consume()
        return grad

    def consume(self):
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                if not p.requires_grad or p.grad is None:
                    continue
                g = p.grad.to(torch.float32)
                p.grad = None
                if self.loss_scale:
                    g.div_(self.loss_scale)
                if self.gathering:
                    self.norms.append(torch.norm(g, 2.0))
                    continue
                if self.clip_grad_value is not None and self.clip_grad_value > 0:
                    g.clamp_(min=-self.clip_grad_value, max=self.clip_grad_value)
                if self.clip_grad_norm is not None and self.clip_grad_norm > 0 and self.clip_coef is not None:
                    g.mul_(self.clip_coef)
                if self.adaptive:
                    self.adaptive_update(name, p, g)
                else:
                    w = p.data.to(torch.float32)
                    if self.weight_decay > 0:
                        w.mul_(1.0 - self.lr * self.weight_decay)
                    w.add_(g, alpha=-self.lr)
                    p.data.copy_(w)

    def adaptive_update(self, name, p, g):
        rate = -self.decay_rate if self.step_num == 0 and self.decay_rate < 0 else self.decay_rate
        beta2t = 1.0 - math.pow(self.step_num, rate)
        u = (g ** 2) + self.eps[0]
        if p.dim() > 1:
            row, col = self.moments.setdefault(name, (torch.zeros(p.shape[0]), torch.zeros(p.shape[1])))
            row.mul_(beta2t).add_(u.mean(dim=-1), alpha=1.0 - beta2t)
            col.mul_(beta2t).add_(u.mean(dim=-2), alpha=1.0 - beta2t)
            u = (row / row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1) * col.unsqueeze(-2).rsqrt()
            u.mul_(g)
        else:
            (sq,) = self.moments.setdefault(name, (torch.zeros(p.shape[0]),))
            sq.mul_(beta2t).add_(u, alpha=1.0 - beta2t)
            u = sq.rsqrt().mul_(g)
        u.div_((u.norm(2) / (u.numel() ** 0.5) / self.clip_threshold).clamp_(min=1.0))
        w = p.data.to(torch.float32)
        scale = max(self.eps[1], torch.norm(w, 2.0) / math.sqrt(p.numel()))
        lr = self.lr * scale
        if self.weight_decay > 0:
            w.mul_(1.0 - lr * self.weight_decay)
        w.add_(u, alpha=-lr)
        p.data.copy_(w)

    def fused_backward(self, loss, lr):
        if self.clip_grad_norm is not None and self.clip_grad_norm > 0 and self.clip_coef is None:
            raise ValueError("grad_norm first")
        self.lr = lr
        if self.loss_scale:
            loss = loss * self.loss_scale
        if self.adaptive:
            self.step_num += 1
        loss.backward()
        self.consume()

    def grad_norm(self, loss):
        self.gathering, self.norms = True, []
        if self.loss_scale:
            loss = loss * self.loss_scale
        loss.backward(retain_graph=True)
        self.consume()
        with torch.no_grad():
            total = torch.norm(torch.stack(self.norms), 2.0)
            self.clip_coef = torch.clamp(float(self.clip_grad_norm) / (total + 1e-6), max=1.0)
        self.gathering = False
        return total


def lomo_optim_package(model, adaptive, **options):
    """lomo_optim's own Lomo / AdaLomo from LOMO_OPTIM_SRC, with transformers stubbed (it only asks
    whether DeepSpeed's ZeRO-3 is on, and logs) and AdaLomo's .cuda() kept on the CPU."""
    if "transformers" not in sys.modules:
        transformers = types.ModuleType("transformers")
        integrations = types.ModuleType("transformers.integrations")
        deepspeed = types.ModuleType("transformers.integrations.deepspeed")
        deepspeed.is_deepspeed_zero3_enabled = lambda: False
        utils = types.ModuleType("transformers.utils")
        utils.logging = types.SimpleNamespace(get_logger=lambda *a: types.SimpleNamespace(warning=print))
        for name, module in (("transformers", transformers), ("transformers.integrations", integrations),
                             ("transformers.integrations.deepspeed", deepspeed), ("transformers.utils", utils)):
            sys.modules[name] = module
        sys.path.insert(0, os.environ["LOMO_OPTIM_SRC"])
        torch.Tensor.cuda = lambda self, *a, **k: self
    import lomo_optim
    if not adaptive:
        options = {k: v for k, v in options.items() if k in ("lr", "clip_grad_norm", "clip_grad_value",
                                                             "weight_decay")}
    return (lomo_optim.AdaLomo if adaptive else lomo_optim.Lomo)(model, **options)


def python_options(options):
    """The C API's options as lomo_optim's arguments: eps1 and eps2 are its eps pair."""
    out = {k: v for k, v in options.items() if k not in ("eps1", "eps2")}
    if "eps1" in options or "eps2" in options:
        out["eps"] = (options.get("eps1", 1e-30), options.get("eps2", 1e-3))
    return out


def python_run(model_path, case):
    torch.manual_seed(case["seed"])
    model = torch.jit.load(model_path)
    model.train()
    adaptive = case["algorithm"] == "adalomo"
    make = lomo_optim_package if os.environ.get("LOMO_OPTIM_SRC") else FusedReference
    opt = make(model, adaptive, **python_options(case["options"]))
    accumulation = case.get("accumulation", 1)
    record = []
    for step in range(STEPS):
        x, y = batch(step)
        if case.get("bf16"):  # Accelerate's autocast, the outputs back in float32
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x)
            out = out.float()
        else:
            out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        norm = None
        if "clip_grad_norm" in case["options"]:
            measured = opt.grad_norm(loss)  # lomo_optim's returns nothing and keeps the norms
            norm = (measured if measured is not None else torch.norm(opt.grad_norms, 2.0)).item()
        # Accelerate's backward(loss, learning_rate=lr): loss / gradient_accumulation_steps first.
        opt.fused_backward(loss / accumulation, case["rates"][step])
        record.append((loss.item(), norm))
    return record, {n: t.detach().clone() for n, t in model.state_dict().items()}


# ---- The C API ----------------------------------------------------------------------------------

def c_accelerator(lib, model_path, case):
    settings = {"gradient_accumulation_steps": case.get("accumulation", 1)}
    if case.get("bf16"):
        settings["mixed_precision"] = "bf16"
    acc = lib.new("acc_accelerator_create", lib.options(api.ACC_OPTIONS_ACCELERATOR, settings))
    model = lib.new("acc_model_load_torchscript", model_path.encode())
    opt = lib.new("acc_optimizer_create", model, case["algorithm"].encode(),
                  lib.options(api.ACC_OPTIONS_OPTIMIZER, case["options"]))
    lib.acc_prepare(acc, ctypes.byref(model), ctypes.byref(opt), None, None)
    return acc, model, opt


def c_step(lib, acc, model, opt, case, step):
    x, y = batch(step)
    inputs, targets = lib.tensor(x), lib.tensor(y)
    outputs = lib.new("acc_model_forward", model, (ctypes.c_void_p * 1)(inputs), ctypes.c_size_t(1),
                      ctypes.c_uint32(0))
    loss = lib.new("acc_loss_cross_entropy", lib.list_get(outputs, 0), targets, api.REDUCTION_MEAN,
                   ctypes.c_double(0.0))
    norm = None
    if "clip_grad_norm" in case["options"]:
        measured = ctypes.c_double()
        lib.acc_lomo_grad_norm(acc, loss, ctypes.byref(measured))
        norm = measured.value
    lib.acc_backward_lr(acc, loss, ctypes.c_double(case["rates"][step]))
    lib.acc_optimizer_step(opt)  # nothing, as Accelerate's for LOMO
    lib.acc_optimizer_zero_grad(opt)
    return lib.item(loss), norm


def c_run(lib, model_path, case, checkpoint=None):
    """STEPS steps; with `checkpoint`, saved after SAVED_AFTER and resumed by a new accelerator."""
    acc, model, opt = c_accelerator(lib, model_path, case)
    lib.acc_set_seed(ctypes.c_uint64(case["seed"]))
    record = []
    for step in range(STEPS):
        if checkpoint and step == SAVED_AFTER:
            lib.acc_save_state(acc, checkpoint.encode(), None)
            for free, handle in (("acc_optimizer_free", opt), ("acc_model_free", model), ("acc_accelerator_free", acc)):
                getattr(lib.lib, free)(handle)
            acc, model, opt = c_accelerator(lib, model_path, case)
            lib.acc_set_seed(ctypes.c_uint64(99))  # load_state puts the saved generator back
            lib.acc_load_state(acc, checkpoint.encode(), None)
        record.append(c_step(lib, acc, model, opt, case, step))
    return record, c_weights(lib, model)


DECAYING = [0.05 * 0.7 ** s for s in range(STEPS)]
CASES = [
    {"algorithm": "lomo", "options": {"lr": 0.05}, "rates": [0.05] * STEPS},
    {"algorithm": "lomo", "options": {"weight_decay": 0.1, "clip_grad_value": 0.05}, "rates": DECAYING},
    {"algorithm": "lomo", "options": {"clip_grad_norm": 0.5, "weight_decay": 0.01}, "rates": DECAYING},
    {"algorithm": "lomo", "options": {}, "rates": DECAYING, "accumulation": 2},
    {"algorithm": "adalomo", "options": {}, "rates": [0.01] * STEPS},
    {"algorithm": "adalomo", "options": {"weight_decay": 0.1, "clip_grad_value": 0.02, "clip_grad_norm": 1.0,
                                         "clip_threshold": 0.5, "decay_rate": -0.5, "loss_scale": 0.0},
     "rates": DECAYING},
    {"algorithm": "adalomo", "options": {"eps2": 0.5}, "rates": DECAYING},  # the eps2 floor as the scale
    {"algorithm": "lomo", "options": {"clip_grad_norm": 1.0}, "rates": DECAYING, "bf16": True},
    {"algorithm": "adalomo", "options": {"weight_decay": 0.01}, "rates": DECAYING, "bf16": True},
]


def main(build, work):
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model_path = os.path.join(work, "lomo_net.pt")
    torch.jit.script(Net()).save(model_path)
    lib = api.load(build)
    failures = 0
    reference = "lomo_optim from " + os.environ["LOMO_OPTIM_SRC"] if os.environ.get("LOMO_OPTIM_SRC") else \
        "lomo_optim's rules as written out here"
    print(f"reference: {reference}")
    for i, case in enumerate(CASES):
        case["seed"] = 40 + i
        theirs, their_weights = python_run(model_path, case)
        runs = [("", c_run(lib, model_path, case))]
        if case["algorithm"] == "adalomo":
            runs.append((", saved and resumed", c_run(lib, model_path, case, os.path.join(work, f"lomo_{i}"))))
        for how, (ours, our_weights) in runs:
            same = ours == theirs and all(torch.equal(our_weights[n], their_weights[n]) for n in their_weights)
            moved = not all(torch.equal(our_weights[n], t) for n, t in torch.jit.load(model_path).state_dict().items())
            label = f"{case['algorithm']} {case['options']}{' bf16' if case.get('bf16') else ''}{how}"
            print(f"{label}: {'bit-identical' if same else 'DIFFERS'}")
            if not same or not moved:
                print(f"  C API: {ours}\n  Python: {theirs}\n  weights moved: {moved}")
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
