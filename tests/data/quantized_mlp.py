"""What the quantised-model fixtures share (export_four_bit_cases.py, export_eight_bit_cases.py): the
scripted MLP they quantise and transformers' rules for which of its layers stay as they are
(get_keys_to_not_convert, llm_int8_skip_modules' matching)."""
import re

import torch
from torch import nn


class QuantMlp(nn.Module):
    """fc1's weight is 320 blocks of 64 (two blocks of double quantisation's 256) with half a row of
    zeros, fc2's 82 blocks and a shorter one with a row far larger than the others, fc3's (the
    output layer) an odd number of values."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(128, 160)
        self.fc2 = nn.Linear(160, 33)
        self.fc3 = nn.Linear(33, 7)
        with torch.no_grad():
            self.fc1.weight.view(-1)[128:192].zero_()  # a block of zeros
            self.fc2.weight[5] *= 30.0  # a row far larger than the others

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def keys_not_converted(model):
    """transformers' get_keys_to_not_convert on this model: no tied weights, the last parameter's module."""
    return {list(model.named_parameters())[-1][0].rsplit(".", 1)[0]}


def skipped(key, name):
    return bool(re.match(key + "\\.", name) or re.match(key, name) or name.endswith(key))
