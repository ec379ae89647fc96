"""What the restatements of PEFT's layers share (export_lora_cases.py and the cases it imports)."""
import math

from torch import nn


def tensor(t):
    """A tensor as the fixtures record it: its shape and its values in order."""
    return {"shape": list(t.shape), "values": t.detach().flatten().tolist()}


def linear_pair(in_features, out_features, r):
    """PEFT's update_layer for a linear adapter: nn.Linear(in, r) and nn.Linear(r, out) drawn, then
    Kaiming A and zero B."""
    a = nn.Linear(in_features, r, bias=False).weight
    b = nn.Linear(r, out_features, bias=False).weight
    nn.init.kaiming_uniform_(a, a=math.sqrt(5))
    nn.init.zeros_(b)
    return a, b
