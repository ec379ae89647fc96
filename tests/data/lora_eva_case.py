"""PEFT's EVA (init_lora_weights "eva", initialize_lora_eva_weights) restated for
tests/capi/test_lora_eva.cpp: the "eva" entry of lora_cases.json and the models eva_lm_model.pt and
eva_mlp_model.pt.

PEFT is not packaged for Debian, so its get_eva_state_dict and _load_eva_state_dict
(peft/tuners/lora/eva.py) and its IncrementalPCA (peft/utils/incremental_pca.py) are restated here
from their definitions, with the adapters disabled (hooks on the base layers see what PEFT's hooks
see), and torch.svd_lowrank as PyTorch 2.x computes it (peft_restated.svd_lowrank_2x).
"""
import itertools
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from peft_restated import svd_lowrank_2x, tensor


class EvaLm(nn.Module):
    """q, k and v read one input (EVA computes them once); fc1 and fc2 read their own."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.fc1 = nn.Linear(16, 24)
        self.fc2 = nn.Linear(24, 12)
        self.head = nn.Linear(12, 20)

    def forward(self, ids):
        x = self.embed(ids)
        h = torch.tanh(self.q(x)) + torch.sigmoid(self.k(x)) * self.v(x)
        return self.head(torch.tanh(self.fc2(torch.relu(self.fc1(h)))))


class EvaMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 12)
        self.fc2 = nn.Linear(12, 12)
        self.fc3 = nn.Linear(12, 6)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Pca:
    """IncrementalPCA(n_components=n, lowrank=True, lowrank_seed=42), partial_fit only."""

    def __init__(self, n):
        self.n = n
        self.components = None

    def fit(self, x):
        x = x.clone()
        first = self.components is None
        if first:
            self.seen = torch.tensor([0])
            self.mean = self.var = None
        count = torch.tensor([x.shape[0]])
        total = self.seen + count
        last_sum = torch.zeros(x.shape[1], dtype=torch.float64) if self.mean is None else self.mean * self.seen
        new_sum = x.sum(dim=0, dtype=torch.float64)
        mean = (last_sum + new_sum) / total
        centred = x - new_sum / count
        correction = centred.sum(dim=0, dtype=torch.float64).square()
        centred.square_()
        unnormalized = centred.sum(dim=0, dtype=torch.float64)
        unnormalized -= correction / count
        if self.var is None:
            var = unnormalized / total
        else:
            ratio = self.seen.double() / count
            var = (self.var * self.seen + unnormalized
                   + ratio / total * (last_sum / ratio - new_sum).square()) / total
        if first:
            x -= mean
        else:
            batch_mean = torch.mean(x, dim=0)
            x -= batch_mean
            shift = torch.sqrt((self.seen.double() / total) * x.shape[0]) * (self.mean - batch_mean)
            x = torch.vstack((self.singular_values.view((-1, 1)) * self.components, x, shift))
        with torch.random.fork_rng():
            torch.manual_seed(42)
            u, s, v = svd_lowrank_2x(x, 2 * self.n, 4)
        vt = v.mH
        signs = torch.sign(vt[range(vt.shape[0]), torch.argmax(torch.abs(vt), dim=1)])
        u *= signs[: u.shape[1]].view(1, -1)
        vt *= signs.view(-1, 1)
        ratios = s ** 2 / torch.sum(var * total)
        self.seen, self.mean, self.var = total, mean, var
        self.components = vt[: self.n]
        self.singular_values = s[: self.n]
        self.ratios = ratios[: self.n]


def eva_components(model, layers, ranks, r, eva, loader, split):
    """get_eva_state_dict: `layers` (names, module order) with ranks; `split(batch)` gives the
    forward's inputs and the mask of the positions that count (None: rows flattened)."""
    modules = dict(model.named_modules())
    rho = eva["rho"]
    if rho > 1000:
        rho = min(rho, max(max(p.shape) for p in model.parameters()) // r)
    most = {n: round(ranks[n] * rho) for n in layers}
    budget = sum(ranks[n] for n in layers)
    state = {"mask": None}

    def rows(inp):
        x = inp[0]
        if state["mask"] is None:
            return x.view(-1, x.size(-1)) if x.ndim > 2 else x
        return x[state["mask"].nonzero().T.unbind()]

    model.eval()
    first = next(iter(loader))
    inputs, state["mask"] = split(first)
    seen = {}

    def remember(n):
        def run(module, inp, out):
            seen.setdefault(n, tuple(rows(inp).view(-1).tolist()))
        return run

    handles = [modules[n].register_forward_hook(remember(n)) for n in layers]
    with torch.no_grad():
        model(*inputs)
    for h in handles:
        h.remove()
    groups = {}
    for n in layers:
        groups.setdefault(seen[n], []).append(n)
    leader = {m: g[0] for g in groups.values() for m in g}
    for g in groups.values():
        for m in g:
            most[m] = max(most[x] for x in g)
    computed = [n for n in layers if leader[n] == n]
    followers = [m for g in groups.values() for m in g[1:]]
    order = computed + followers
    pcas = {n: Pca(most[n]) for n in computed}
    converged = {n: torch.zeros(most[n], dtype=torch.bool) for n in computed}

    def hook(n):
        def run(module, inp, out):
            x = rows(inp)
            if x.size(0) < most[n]:
                return
            pca = pcas[n]
            previous = None if pca.components is None else pca.components.clone()
            pca.fit(x.to(torch.float32))
            if previous is not None:
                converged[n] = torch.nn.functional.cosine_similarity(pca.components, previous) >= eva["tau"]
        return run

    active = {n: modules[n].register_forward_hook(hook(n)) for n in computed}
    done = {n: False for n in computed}
    dist = dict(most)
    for batch in itertools.cycle(loader):
        inputs, state["mask"] = split(batch)
        for n in computed:
            ok = bool(torch.all(converged[n][: dist[n]]))
            if not done[n] and ok and active[n] is not None:
                active[n].remove()
                active[n] = None
                done[n] = True
            elif done[n] and not ok:
                active[n] = modules[n].register_forward_hook(hook(n))
                done[n] = False
        if all(done.values()):
            break
        with torch.no_grad():
            model(*inputs)
        if any(pcas[n].components is None for n in computed):
            continue
        owners, values = [], []
        for n in order:
            for v in pcas[leader[n]].ratios[: most[n]]:
                owners.append(n)
                values.append(v)
        picked = torch.stack(values).argsort(descending=True)[:budget]
        counts = {n: 0 for n in order}
        for i in picked.tolist():
            counts[owners[i]] += 1
        for m in followers:
            if counts[leader[m]] < counts[m]:
                counts[leader[m]], counts[m] = counts[m], counts[leader[m]]
        dist = counts
    for h in active.values():
        if h is not None:
            h.remove()
    result = {}
    for n in order:
        pca = pcas[leader[n]]
        u = pca.components[: dist[n]]
        if eva["whiten"]:
            u /= pca.singular_values[: dist[n]].sqrt().reshape(-1, 1)  # in place, as PEFT's
        result[n] = u
    return result


def eva_adapters(model, layers, ranks, alphas, config, components):
    """_load_eva_state_dict on adapters made by get_peft_model with init "eva" (A as nn.Linear
    drew it, B zero): what each layer ends with, and PEFT's new configuration."""
    modules = dict(model.named_modules())
    out, rank_pattern, alpha_pattern, targets = {}, {}, {}, []
    for n in layers:
        u = components[n]
        rank, alpha = u.shape[0], alphas[n]
        if rank == 0:
            continue
        if rank != ranks[n]:
            if config["eva"]["adjust_scaling_factors"]:
                alpha *= rank / ranks[n]
            nn.Linear(modules[n].in_features, rank, bias=False)
            nn.Linear(rank, modules[n].out_features, bias=False)
        targets.append(n)
        if rank != config["r"]:
            rank_pattern[n] = rank
        if alpha != config["lora_alpha"]:
            alpha_pattern[n] = alpha
        entry = {"rank": rank, "lora_A": tensor(u.to(torch.float32))}
        if config.get("use_dora"):
            entry["magnitude"] = tensor(torch.linalg.norm(modules[n].weight.detach(), dim=1))
        out[n] = entry
    return {"layers": out, "target_modules": targets, "rank_pattern": rank_pattern, "alpha_pattern": alpha_pattern}


def run_case(model, config, pattern_ranks, seed, loader, split):
    """get_peft_model's draws (nn.Linear for A and B, B zeroed), EVA, the next draw."""
    layers = config["targets"]
    ranks = {n: pattern_ranks.get(n, config["r"]) for n in layers}
    alphas = {n: config["lora_alpha"] for n in layers}
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    for n in layers:
        nn.Linear(modules[n].in_features, ranks[n], bias=False)
        nn.Linear(ranks[n], modules[n].out_features, bias=False)
    components = eva_components(model, layers, ranks, config["r"], config["eva"], loader, split)
    result = eva_adapters(model, layers, ranks, alphas, config, components)
    result["next_draw"] = tensor(torch.rand(3))
    return result


def eva_case(out):
    torch.manual_seed(90)
    lm = EvaLm()
    torch.jit.script(lm).save(str(out / "eva_lm_model.pt"))
    g = torch.Generator().manual_seed(91)
    ids = torch.randint(0, 20, (40, 6), generator=g)
    mask = torch.ones(40, 6, dtype=torch.int64)
    mask[::3, 4:] = 0
    labels = ids.clone()
    labels[::4, :2] = -100
    lm_config = {"targets": ["q", "k", "v", "fc1", "fc2"], "r": 4, "lora_alpha": 8.0,
                 "eva": {"rho": 2.0, "tau": 0.99, "use_label_mask": True, "label_mask_value": -100, "whiten": True,
                         "adjust_scaling_factors": True}}
    lm_loader = DataLoader(TensorDataset(ids, labels, mask), batch_size=4, shuffle=True)

    def lm_split(batch):
        b_ids, b_labels, b_mask = batch
        return (b_ids,), torch.logical_and(b_mask.bool(), b_labels != -100)

    lm_case = run_case(lm, lm_config, {}, 92, lm_loader, lm_split)

    torch.manual_seed(93)
    mlp = EvaMlp()
    torch.jit.script(mlp).save(str(out / "eva_mlp_model.pt"))
    x = torch.randn(24, 10, generator=g)
    y = torch.randn(24, generator=g)
    mlp_config = {"targets": ["fc1", "fc2", "fc3"], "r": 3, "lora_alpha": 6.0, "use_dora": True,
                  "rank_pattern": {"fc3": 2},
                  "eva": {"rho": 1.5, "tau": 0.95, "use_label_mask": True, "label_mask_value": -100, "whiten": False,
                          "adjust_scaling_factors": False}}
    mlp_loader = DataLoader(TensorDataset(x, y), batch_size=6)
    mlp_case = run_case(mlp, mlp_config, mlp_config["rank_pattern"], 94, mlp_loader,
                        lambda batch: ((batch[0],), None))
    def longs(t):
        return {**tensor(t), "dtype": "int64"}

    return {"lm": {"config": lm_config, "seed": 92, "ids": longs(ids), "labels": longs(labels), "mask": longs(mask),
                   **lm_case},
            "mlp": {"config": mlp_config, "seed": 94, "x": tensor(x), "y": tensor(y), **mlp_case}}
