"""Writes the mixture of experts bench_lora fine-tunes with LoRA on its expert weights
(target_parameters) against full fine-tuning: blocks of a LayerNorm, a router and experts whose
weights are 3-D parameters (experts x in x out, as transformers keeps them), every expert applied to
every token and weighted by the router, then a head to one output. Inputs [batch, tokens, d].

Run with Debian's python3-torch: python3 export_moe.py OUTPUT.pt [--quick]
"""
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Experts(nn.Module):
    def __init__(self, experts: int, dim: int, hidden: int):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(experts, dim, 2 * hidden) * dim ** -0.5)
        self.down_proj = nn.Parameter(torch.randn(experts, hidden, dim) * hidden ** -0.5)

    def forward(self, x, weights):
        gate, up = torch.einsum("nd,edh->enh", x, self.gate_up_proj).chunk(2, dim=-1)
        out = torch.einsum("enh,ehd->end", F.silu(gate) * up, self.down_proj)
        return torch.einsum("end,ne->nd", out, weights)


class Block(nn.Module):
    def __init__(self, experts: int, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = Experts(experts, dim, hidden)

    def forward(self, x):
        h = self.norm(x)
        return x + self.experts(h, torch.softmax(self.router(h), dim=-1))


class MoeStack(nn.Module):
    def __init__(self, blocks: int, experts: int, dim: int, hidden: int):
        super().__init__()
        self.blocks = nn.ModuleList([Block(experts, dim, hidden) for _ in range(blocks)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        shape = x.shape
        h = x.reshape(-1, shape[-1])
        for block in self.blocks:
            h = block(h)
        return self.head(h).reshape(shape[0], shape[1], 1)


def main(path, quick):
    torch.manual_seed(0)
    model = MoeStack(2, 4, 32, 64) if quick else MoeStack(4, 8, 256, 512)
    torch.jit.script(model).save(path)


if __name__ == "__main__":
    main(sys.argv[1], "--quick" in sys.argv[2:])
