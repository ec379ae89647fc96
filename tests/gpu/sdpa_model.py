"""Exports a small causal self-attention block that calls
torch.nn.functional.scaled_dot_product_attention, as TorchScript, for the GPU test
GpuTorchScript.ScaledDotProductAttentionModelTrainsOnTheGpu.

    sdpa_model.py OUT.pt

Exits 77 (the test is skipped) when this torch has no scaled_dot_product_attention (before 2.0,
e.g. Debian 12's 1.13).
"""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIPPED: python has no torch ({e})")
    sys.exit(77)

if not hasattr(F, "scaled_dot_product_attention"):
    print(f"SKIPPED: torch {torch.__version__} has no torch.nn.functional.scaled_dot_product_attention")
    sys.exit(77)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: sdpa_model.py OUT.pt")
    torch.manual_seed(0)
    module = torch.jit.script(CausalSelfAttention())
    graph = str(module.graph)
    if "scaled_dot_product_attention" not in graph:
        sys.exit("the scripted module does not call scaled_dot_product_attention:\n" + graph)
    module.save(sys.argv[1])
    print(f"exported {sys.argv[1]} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
