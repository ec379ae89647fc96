"""PEFT's LoRA on parameters (LoraConfig.target_parameters, its lora.ParamWrapper), restated from
peft/tuners/lora/layer.py for export_lora_cases.py (its "parameters" case), on a small mixture of
experts whose expert weights are 3-D parameters, as transformers keeps them.

PEFT adapts target_modules' layers first, then each targeted parameter in named_modules() order (a
module's own parameters in their order), drawing lora_A = nn.Linear(in, r * experts) and lora_B =
nn.Linear(r * experts, out) (each its default initialisation), then Kaiming A and zero B. A 3-D
parameter (experts x d1 x d2) takes d2 as lora_A's input and gives d1, or d1 and d2 where its
module says is_transposed; its delta is einsum("o r e, e r i -> e o i") (or "-> e i o") of B as
out x r x experts and A as experts x r x in, times the scaling; a 2-D parameter's is B @ A times
it. The module computes with W + delta (in W's dtype) while it runs. Several parameters of one
module nest one wrapper in the next: the first parameter's adapter is "<module>.base_layer.lora_A".
"""
import torch
import torch.nn.functional as F
from torch import nn

from peft_restated import linear_pair, tensor


class Experts(nn.Module):
    """A mixture of experts' weights: gate_up_proj and down_proj, experts first, each expert's matrix
    in x out (applied as x @ W) or, with is_transposed, out x in (W @ x)."""

    def __init__(self, experts: int, dim: int, hidden: int, transposed: bool):
        super().__init__()
        self.is_transposed = transposed
        shape_up = (experts, 2 * hidden, dim) if transposed else (experts, dim, 2 * hidden)
        shape_down = (experts, dim, hidden) if transposed else (experts, hidden, dim)
        self.gate_up_proj = nn.Parameter(0.3 * torch.randn(shape_up))
        self.down_proj = nn.Parameter(0.3 * torch.randn(shape_down))

    def forward(self, x, weights):
        if self.is_transposed:
            gate_up = torch.einsum("nd,ehd->enh", x, self.gate_up_proj)
        else:
            gate_up = torch.einsum("nd,edh->enh", x, self.gate_up_proj)
        gate, up = gate_up.chunk(2, dim=-1)
        h = F.silu(gate) * up
        if self.is_transposed:
            out = torch.einsum("enh,edh->end", h, self.down_proj)
        else:
            out = torch.einsum("enh,ehd->end", h, self.down_proj)
        return torch.einsum("end,ne->nd", out, weights)


class MoeNet(nn.Module):
    """A router, routed experts, two shared experts (is_transposed) and a head."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(6, 3)
        self.experts = Experts(3, 6, 4, False)
        self.shared = Experts(2, 6, 3, True)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        weights = torch.softmax(self.router(x), dim=-1)
        shared = torch.ones(x.size(0), 2) * 0.5
        h = x + self.experts(x, weights) + self.shared(x, shared)
        return self.head(torch.tanh(h))


TARGET_PARAMETERS = ["router.weight", "experts.gate_up_proj", "experts.down_proj", "shared.gate_up_proj",
                     "shared.down_proj"]
# PEFT's names for the wrappers (a module's first targeted parameter sits one wrapper deeper).
WRAPPERS = {"router.weight": "router", "experts.gate_up_proj": "experts.base_layer",
            "experts.down_proj": "experts", "shared.gate_up_proj": "shared.base_layer", "shared.down_proj": "shared"}


def in_out(w, transposed):
    """PEFT's in_features and out_features of a targeted parameter."""
    if w.dim() == 2:
        return w.shape[1], w.shape[0]
    return (w.shape[1], w.shape[2]) if transposed else (w.shape[2], w.shape[1])


def delta(w, a, b, scaling, transposed):
    """PEFT's ParamWrapper.get_delta_weight, in the parameter's dtype."""
    if w.dim() == 2:
        return ((b @ a) * scaling).to(w.dtype)
    experts = w.shape[0]
    a3 = a.reshape(experts, -1, a.shape[-1])
    b3 = b.reshape(b.shape[0], -1, experts)
    equation = "o r e, e r i -> e i o" if transposed else "o r e, e r i -> e o i"
    return (torch.einsum(equation, b3, a3) * scaling).to(w.dtype)


def parameters_case(out):
    torch.manual_seed(80)
    model = MoeNet()
    torch.jit.script(model).save(str(out / "moe_model.pt"))
    for p in model.parameters():
        p.requires_grad_(False)
    modules = dict(model.named_modules())
    params = dict(model.named_parameters())
    r, alpha, seed, train_seed = 2, 4.0, 81, 82
    rank_pattern = {"down_proj": 4}

    def rank(name):
        return rank_pattern["down_proj"] if name.endswith(".down_proj") else r

    torch.manual_seed(seed)
    adapters = {"head": linear_pair(6, 3, r) + (alpha / r,)}  # target_modules first
    for name in TARGET_PARAMETERS:
        w = params[name]
        transposed = getattr(modules[name.rsplit(".", 1)[0]], "is_transposed", False)
        experts = w.shape[0] if w.dim() == 3 else 1
        i, o = in_out(w, transposed)
        adapters[WRAPPERS[name]] = linear_pair(i, o, rank(name) * experts) + (alpha / rank(name),)
    initial = {n + s: tensor(t) for n, (a, b, _) in adapters.items()
               for s, t in ((".lora_A.weight", a), (".lora_B.weight", b))}
    next_draw = torch.rand(3)
    g = torch.Generator().manual_seed(83)
    with torch.no_grad():
        for a, b, _ in adapters.values():
            b.copy_(0.3 * torch.randn(b.shape, generator=g))
    chosen = {n + ".lora_B.weight": tensor(b) for n, (a, b, _) in adapters.items()}
    x = torch.randn(5, 6, generator=g)

    def adapted():
        out = {}
        for name in TARGET_PARAMETERS:
            a, b, scaling = adapters[WRAPPERS[name]]
            transposed = getattr(modules[name.rsplit(".", 1)[0]], "is_transposed", False)
            out[name] = params[name] + delta(params[name], a, b, scaling, transposed)
        return out

    head_a, head_b, head_scaling = adapters["head"]
    handle = model.head.register_forward_hook(
        lambda module, inputs, output: output + F.linear(F.linear(inputs[0], head_a), head_b) * head_scaling)
    for a, b, _ in adapters.values():
        a.requires_grad_(True)
        b.requires_grad_(True)
    outputs = {}
    with torch.no_grad():
        outputs[False] = torch.nn.utils.stateless.functional_call(model, adapted(), (x,))
    model.train()
    torch.manual_seed(train_seed)
    outputs[True] = torch.nn.utils.stateless.functional_call(model, adapted(), (x,))
    outputs[True].sum().backward()
    handle.remove()
    model.eval()
    grads = {}
    for n, (a, b, _) in adapters.items():
        grads[n + ".lora_A.weight"], grads[n + ".lora_B.weight"] = tensor(a.grad), tensor(b.grad)
    with torch.no_grad():
        merged = {name: tensor(w) for name, w in adapted().items()}
        merged["head.weight"] = tensor(model.head.weight + (head_b @ head_a) * head_scaling)
    # PEFT's model.parameters(): each wrapper lists its base module's first, then its adapters.
    order = ["router.weight", "router.bias", "router.lora_A.weight", "router.lora_B.weight",
             "experts.gate_up_proj", "experts.down_proj", "experts.base_layer.lora_A.weight",
             "experts.base_layer.lora_B.weight", "experts.lora_A.weight", "experts.lora_B.weight",
             "shared.gate_up_proj", "shared.down_proj", "shared.base_layer.lora_A.weight",
             "shared.base_layer.lora_B.weight", "shared.lora_A.weight", "shared.lora_B.weight",
             "head.weight", "head.bias", "head.lora_A.weight", "head.lora_B.weight"]
    return {"targets": "head", "target_parameters": TARGET_PARAMETERS, "rank_pattern": rank_pattern, "r": r,
            "lora_alpha": alpha, "seed": seed, "train_seed": train_seed, "initial": initial,
            "next_draw": tensor(next_draw), "chosen": chosen, "input": tensor(x),
            "eval_output": tensor(outputs[False]), "train_output": tensor(outputs[True]), "grads": grads,
            "merged": merged, "parameter_order": order}
