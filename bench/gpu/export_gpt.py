#!/usr/bin/env python3
"""Exports the GPU benchmark's model as TorchScript: a GPT-2-small-sized decoder.

    export_gpt.py OUT.pt [--tiny] [--seed N] [--layers N --heads N --d-model N --vocab N --context N]

GPT-2 small by default (12 layers, 12 heads, d_model 768, vocab 50257, context 1024: about 124M
parameters): learned position embeddings, pre-LayerNorm blocks, a 4x GELU MLP, a final LayerNorm,
the head tied to the token embedding, no dropout. --tiny: 2 layers, 4 heads, d_model 64, vocab 256,
context 64 (the CPU smoke test).

forward(ids: int64 [B, T]) returns the logits flattened to [B*T, V] (a view of [B, T, V]): the C
API's cross-entropy takes [N, C] scores and the C API has no reshape, so every variant of the
benchmark computes the loss on the same [B*T, V] tensor against the shifted tokens flattened to
[B*T].

Attention is torch.nn.functional.scaled_dot_product_attention(is_causal=True) where this torch has
it (2.x: flash / memory-efficient kernels on the GPU), else an explicit masked softmax (torch 1.13).
The weights are initialised deterministically from --seed as GPT-2 does (normal(0, 0.02), residual
projections scaled by 1/sqrt(2 * layers), zero biases).
"""
import argparse
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class SdpaAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size(0), x.size(1), x.size(2)
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = c // self.n_head
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MaskedAttention(nn.Module):
    """The same attention with an explicit causal mask, for torch without scaled_dot_product_attention."""

    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size(0), x.size(1), x.size(2)
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = c // self.n_head
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(mask.logical_not(), float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Mlp(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.c_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, sdpa: bool):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = SdpaAttention(d_model, n_head) if sdpa else MaskedAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = Mlp(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, n_layer: int, n_head: int, d_model: int, vocab: int, context: int, sdpa: bool):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.h = nn.ModuleList([Block(d_model, n_head, sdpa) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(m: nn.Module):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # the head is tied to the token embedding
        return logits.view(-1, logits.size(-1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tiny", action="store_true", help="2 layers, 4 heads, d 64, vocab 256, context 64")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--context", type=int)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-sdpa", action="store_true", help="the explicit masked softmax even where SDPA exists")
    args = ap.parse_args()

    cfg = dict(layers=2, heads=4, d_model=64, vocab=256, context=64) if args.tiny else \
        dict(layers=12, heads=12, d_model=768, vocab=50257, context=1024)
    for key in cfg:
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if cfg["d_model"] % cfg["heads"]:
        print("export_gpt: d_model must be a multiple of heads", file=sys.stderr)
        return 2
    sdpa = HAVE_SDPA and not args.no_sdpa

    torch.manual_seed(args.seed)
    model = Gpt(cfg["layers"], cfg["heads"], cfg["d_model"], cfg["vocab"], cfg["context"], sdpa)
    model.train()
    params = sum(p.numel() for p in model.parameters())

    how = "script"
    try:
        exported = torch.jit.script(model)
    except Exception as e:  # scripting should work; tracing fixes the shapes of the example only
        print(f"export_gpt: torch.jit.script failed ({type(e).__name__}: {e}); tracing instead", file=sys.stderr)
        example = torch.randint(0, cfg["vocab"], (2, min(16, cfg["context"])))
        exported = torch.jit.trace(model, (example,), check_trace=False)
        how = "trace"
    exported.save(args.out)

    # The saved file computes what the eager model computes.
    loaded = torch.jit.load(args.out)
    g = torch.Generator().manual_seed(args.seed)
    probe = torch.randint(0, cfg["vocab"], (2, min(16, cfg["context"])), generator=g)
    with torch.no_grad():
        want = model(probe)
        got = loaded(probe)
    diff = (want - got).abs().max().item()
    if tuple(got.shape) != (probe.numel(), cfg["vocab"]) or not diff < 1e-4:
        print(f"export_gpt: the saved model disagrees with the eager one: shape {tuple(got.shape)}, "
              f"max |diff| {diff}", file=sys.stderr)
        return 1

    info = dict(cfg, parameters=params, attention="sdpa" if sdpa else "masked_softmax", export=how,
                torch=torch.__version__, seed=args.seed, path=args.out)
    print(f"export_gpt: {params} parameters ({params / 1e6:.1f}M), {cfg['layers']} layers, {cfg['heads']} heads, "
          f"d_model {cfg['d_model']}, vocab {cfg['vocab']}, context {cfg['context']}, "
          f"attention {info['attention']}, torch.jit.{how}, torch {torch.__version__} -> {args.out}")
    print("export_gpt: " + json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
