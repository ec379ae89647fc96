"""Exports the TorchScript models the tests load, the way a PyTorch user exports theirs.

Run with Debian's python3-torch: python3 export_models.py OUTPUT_DIR
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F


class Classifier(torch.nn.Module):
    """A small MLP whose forward returns (logits, loss) when given labels, as HF models do."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, labels: torch.Tensor):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return logits, F.cross_entropy(logits, labels)


class DictOutput(torch.nn.Module):
    """Returns a dict of outputs, as models with named outputs do."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 2)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x: torch.Tensor):
        y = self.proj(x) * self.scale
        return {"logits": y, "norm": y.norm()}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(Classifier()), str(out / "classifier.pt"))
    torch.jit.save(torch.jit.script(DictOutput()), str(out / "dict_output.pt"))
    # What PyTorch computes for a fixed input, for the tests to compare with.
    m = torch.jit.load(str(out / "dict_output.pt"))
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 8
    (out / "dict_output_logits.txt").write_text(" ".join(f"{v:.9g}" for v in m(x)["logits"].flatten().tolist()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
