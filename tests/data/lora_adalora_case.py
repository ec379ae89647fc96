"""PEFT's AdaLoRA restated (peft/tuners/adalora/layer.py, model.py; PEFT is not packaged for Debian),
for tests/capi/test_adalora.cpp. Each targeted layer (nn.Linear, transformers' Conv1D, nn.Conv2d), in
named_modules() order, draws torch.randn(r, in * kernel) for lora_A, torch.randn(r, 1) for lora_E,
torch.randn(out, r) for lora_B and torch.randn(1) for ranknum (then filled with r), and with
init_lora_weights zeroes E and draws A and B from normal(0, 0.02), A first. The output is base(x) +
(dropout(x) @ (A * E).T @ B.T) * lora_alpha / (ranknum + 1e-5) (a convolution's: F.conv2d of
dropout(x) with that product reshaped to the weight's shape). The loss gains orth_reg_weight times
the mean over A and B of ||A A^T - I||_F (B: ||B^T B - I||_F); the RankAllocator's
update_and_allocate(step) smooths |p * grad| of every tensor, and at the budget's steps zeroes the
entries of E whose importance is at most the k-th smallest (PEFT's rank_pattern), the final phase
masking with the last pattern. Saved files hold each layer's kept rows only. Written:
adalora_model.pt and the case.
"""
import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import tensor

TARGETS = ["conv", "fc1", "proj", "head"]


class AdaNet(nn.Module):
    def __init__(self, proj):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1, stride=2)
        self.fc1 = nn.Linear(12, 8)
        self.proj = proj  # transformers' Conv1D(5, 8): in 8, out 5
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(1)
        return self.head(torch.tanh(self.proj(torch.relu(self.fc1(h)))))


def in_out(module):
    """PEFT's in_features (times the kernel for a convolution) and out_features."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if isinstance(module, nn.Conv2d):
        return module.in_channels * module.kernel_size[0] * module.kernel_size[1], module.out_channels
    return module.weight.shape[0], module.weight.shape[1]  # Conv1D: in x out


def make_adapters(model, r, init):
    """update_layer's draws: A, E, B, ranknum; then zeros(E), normal(A), normal(B)."""
    adapters = {}
    for name, module in model.named_modules():
        if name not in TARGETS:
            continue
        size_in, size_out = in_out(module)
        a, e, b = torch.randn(r, size_in), torch.randn(r, 1), torch.randn(size_out, r)
        ranknum = torch.randn(1).fill_(float(r))
        if init:
            nn.init.zeros_(e)
            nn.init.normal_(a, mean=0.0, std=0.02)
            nn.init.normal_(b, mean=0.0, std=0.02)
        adapters[name] = {"lora_A": a.requires_grad_(), "lora_B": b.requires_grad_(), "lora_E": e.requires_grad_(),
                          "ranknum": ranknum}
    return adapters


def product(module, p, scaling):
    """(B @ (A * E)) * scaling / (ranknum + 1e-5), a convolution's reshaped to its weight."""
    delta = p["lora_B"] @ (p["lora_A"] * p["lora_E"])
    if isinstance(module, nn.Conv2d):
        return (delta * scaling / (p["ranknum"] + 1e-5)).reshape(module.weight.shape)
    if not isinstance(module, nn.Linear):
        delta = delta.T
    return delta * scaling / (p["ranknum"] + 1e-5)


def forward(model, adapters, x, training, dropout, scaling):
    modules = dict(model.named_modules())
    handles = []
    for name, p in adapters.items():
        def add(module, inputs, output, p=p):
            x = inputs[0]
            drop = (lambda t: F.dropout(t, dropout, training)) if dropout > 0 else (lambda t: t)
            if isinstance(module, nn.Conv2d):
                w = (p["lora_B"] @ (p["lora_A"] * p["lora_E"]) * scaling / (p["ranknum"] + 1e-5)).reshape(
                    module.weight.shape)
                return output + F.conv2d(drop(x), w, stride=module.stride, padding=module.padding,
                                         dilation=module.dilation, groups=module.groups)
            ranknum = p["ranknum"] + 1e-5
            return output + (drop(x) @ (p["lora_A"] * p["lora_E"]).T @ p["lora_B"].T) * scaling / ranknum
        handles.append(modules[name].register_forward_hook(add))
    model.train(training)
    y = model(x)
    for h in handles:
        h.remove()
    return y


def orthogonal_regularization(adapters):
    """AdaLoraModel.forward's: the mean of ||A A^T - I|| and ||B^T B - I|| in parameter order."""
    regu_loss, num_param = 0, 0
    for p in adapters.values():
        for key in ("lora_A", "lora_B"):
            w = p[key]
            para_cov = w @ w.T if key == "lora_A" else w.T @ w
            eye = torch.eye(*para_cov.size(), out=torch.empty_like(para_cov))
            num_param += 1
            regu_loss += torch.norm(para_cov - eye, p="fro")
    return regu_loss / num_param


class RankAllocator:
    """PEFT's RankAllocator over the adapters' tensors, named "<module>.<tensor>"."""

    def __init__(self, adapters, r, target_r, tinit, tfinal, total_step, delta_t, beta1, beta2):
        self.adapters = adapters
        self.target_r, self.tinit, self.tfinal, self.total_step = target_r, tinit, tfinal, total_step
        self.delta_t, self.beta1, self.beta2 = delta_t, beta1, beta2
        self.init_bgt = sum(p["lora_A"].size(0) for p in adapters.values())
        self.target_bgt = target_r * len(adapters)
        self.reset_ipt()
        self.rank_pattern = None

    def reset_ipt(self):
        self.ipt, self.exp_avg_ipt, self.exp_avg_unc = {}, {}, {}

    def named(self):
        for module, p in self.adapters.items():
            for key in ("lora_A", "lora_B", "lora_E"):
                yield module, key, p[key]

    def budget_schedule(self, step):
        if step <= self.tinit:
            return self.init_bgt, False
        if step > self.total_step - self.tfinal:
            return self.target_bgt, True
        mul_coeff = 1 - (step - self.tinit) / (self.total_step - self.tfinal - self.tinit)
        budget = int((self.init_bgt - self.target_bgt) * (mul_coeff**3) + self.target_bgt)
        return budget, step % self.delta_t == 0

    def update_ipt(self):
        for module, key, p in self.named():
            n = (module, key)
            if n not in self.ipt:
                self.ipt[n] = torch.zeros_like(p)
                self.exp_avg_ipt[n] = torch.zeros_like(p)
                self.exp_avg_unc[n] = torch.zeros_like(p)
            with torch.no_grad():
                self.ipt[n] = (p * p.grad).abs().detach()
                self.exp_avg_ipt[n] = self.beta1 * self.exp_avg_ipt[n] + (1 - self.beta1) * self.ipt[n]
                self.exp_avg_unc[n] = (self.beta2 * self.exp_avg_unc[n] +
                                       (1 - self.beta2) * (self.ipt[n] - self.exp_avg_ipt[n]).abs())

    def score(self, n):
        return self.exp_avg_ipt[n] * self.exp_avg_unc[n]

    def mask_to_budget(self, budget):
        triplet, all_score = {}, []
        for module in self.adapters:
            ipt_a = torch.mean(self.score((module, "lora_A")), dim=1, keepdim=True)
            ipt_b = torch.mean(self.score((module, "lora_B")), dim=0, keepdim=False).view(-1, 1)
            ipt_e = self.score((module, "lora_E"))
            sum_ipt = ipt_e.view(-1) + torch.cat([ipt_a, ipt_b], dim=1).sum(dim=1, keepdim=False).view(-1)
            triplet[module] = sum_ipt.view(-1, 1)
            all_score.append(sum_ipt.view(-1))
        threshold = torch.kthvalue(torch.cat(all_score), k=self.init_bgt - budget)[0].item()
        pattern = {}
        with torch.no_grad():
            for module, p in self.adapters.items():
                p["lora_E"].masked_fill_(triplet[module] <= threshold, 0.0)
                pattern[module] = (~(triplet[module] <= threshold)).view(-1).tolist()
        return pattern

    def update_and_allocate(self, step):
        """AdaLoraModel.update_and_allocate."""
        if step < self.total_step - self.tfinal:
            self.update_ipt()
            budget, mask_ind = self.budget_schedule(step)
            if mask_ind:
                self.rank_pattern = self.mask_to_budget(budget)
        elif step == self.total_step - self.tfinal:
            budget, _ = self.budget_schedule(step)
            self.rank_pattern = self.mask_to_budget(budget)
            self.reset_ipt()
        else:
            with torch.no_grad():
                for module, p in self.adapters.items():
                    mask = torch.Tensor(self.rank_pattern[module]).unsqueeze(-1)
                    p["lora_E"].masked_fill_(~mask.bool(), 0.0)


def adalora_case(out, conv1d_class):
    torch.manual_seed(131)
    model = AdaNet(conv1d_class(5, 8))
    torch.jit.script(model).save(str(out / "adalora_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    modules = dict(model.named_modules())
    init_r, target_r, alpha, dropout, orth_reg_weight = 4, 2, 6.0, 0.25, 0.3
    tinit, tfinal, total_step, delta_t = 1, 2, 8, 2
    seed, train_seed = 137, 139
    torch.manual_seed(seed)
    initial = make_adapters(model, init_r, True)
    next_draw = torch.rand(3)
    torch.manual_seed(seed)
    chosen = make_adapters(model, init_r, False)
    g = torch.Generator().manual_seed(149)
    x = torch.randn(4, 2, 4, 4, generator=g)
    target = torch.randn(4, 3, generator=g)
    with torch.no_grad():
        eval_output = forward(model, chosen, x, False, dropout, alpha)
    torch.manual_seed(train_seed)
    train_output = forward(model, chosen, x, True, dropout, alpha)
    regularization = orthogonal_regularization(chosen)
    loss = F.mse_loss(train_output, target)
    total = loss.clone()
    total += orth_reg_weight * regularization
    total.backward()
    keys = ("lora_A", "lora_B", "lora_E")
    as_json = lambda adapters: {f"{n}.{k}": tensor(p[k]) for n, p in adapters.items() for k in keys}
    grads = {f"{n}.{k}": tensor(p[k].grad) for n, p in chosen.items() for k in keys}
    with torch.no_grad():
        merged = {n + ".weight": tensor(modules[n].weight + product(modules[n], chosen[n], alpha)) for n in TARGETS}

    # Training from PEFT's start through every phase of the schedule: AdamW, then update_and_allocate.
    trained = {n: {k: (v.detach().clone().requires_grad_() if k != "ranknum" else v) for k, v in p.items()}
               for n, p in initial.items()}
    allocator = RankAllocator(trained, init_r, target_r, tinit, tfinal, total_step, delta_t, 0.85, 0.85)
    optimizer = torch.optim.AdamW([p[k] for p in trained.values() for k in keys], lr=1e-2)
    losses, patterns = [], []
    torch.manual_seed(train_seed)
    for step in range(total_step):
        y = forward(model, trained, x, True, dropout, alpha)
        step_loss = F.mse_loss(y, target)
        step_loss += orth_reg_weight * orthogonal_regularization(trained)
        losses.append(step_loss.item())
        step_loss.backward()
        optimizer.step()
        allocator.update_and_allocate(step)
        patterns.append(allocator.rank_pattern)
        optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        trained_output = forward(model, trained, x, False, dropout, alpha)
    pattern = allocator.rank_pattern
    # PEFT's saved tensors: each layer's kept rows of A and E and columns of B.
    saved = {}
    for n, p in trained.items():
        keep = pattern[n]
        saved[f"{n}.lora_A"] = tensor(p["lora_A"][keep])
        saved[f"{n}.lora_E"] = tensor(p["lora_E"][keep])
        saved[f"{n}.lora_B"] = tensor(p["lora_B"][:, keep])
    # PEFT's from_pretrained: the adapters drawn at init_r, then each layer of rank_pattern drawn
    # again at its rank (resize_modules_by_rank_pattern), before the file's tensors are copied in.
    torch.manual_seed(seed)
    make_adapters(model, init_r, True)
    for n in TARGETS:
        size_in, size_out = in_out(modules[n])
        rank = sum(pattern[n])
        torch.randn(rank, size_in), torch.randn(rank, 1), torch.randn(size_out, rank), torch.randn(1)
        torch.empty(rank, size_in).normal_(0.0, 0.02), torch.empty(size_out, rank).normal_(0.0, 0.02)
    next_draw_after_load = torch.rand(3)
    return {"targets": ",".join(TARGETS), "init_r": init_r, "target_r": target_r, "lora_alpha": alpha,
            "lora_dropout": dropout, "orth_reg_weight": orth_reg_weight, "tinit": tinit, "tfinal": tfinal,
            "total_step": total_step, "deltaT": delta_t, "seed": seed, "train_seed": train_seed,
            "initial": as_json(initial), "next_draw": tensor(next_draw), "chosen": as_json(chosen),
            "input": tensor(x), "target": tensor(target), "eval_output": tensor(eval_output),
            "train_output": tensor(train_output), "regularization": regularization.item(),
            "total_loss": total.item(), "grads": grads, "merged": merged, "losses": losses,
            "patterns": [None if p is None else {n: v for n, v in p.items()} for p in patterns],
            "trained": as_json(trained), "trained_output": tensor(trained_output),
            "rank_pattern": {f"{n}.lora_E": v for n, v in pattern.items()}, "saved": saved,
            "next_draw_after_load": tensor(next_draw_after_load)}
