"""Exports the TorchScript models the tests load, the way a PyTorch user exports theirs.

Run with Debian's python3-torch: python3 export_models.py OUTPUT_DIR
"""
import functools
import importlib.util
import json
import struct
import sys
import zipfile
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


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor):
        return x + self.fc(torch.tanh(self.norm(x)))


class Stacked(torch.nn.Module):
    """A GPT's shape: an embedding, a position table the forward reads itself, residual blocks in a
    ModuleList and a head (stage 3 makes a unit of each submodule the forward calls)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 6)
        self.pos = torch.nn.Parameter(torch.randn(5, 6) * 0.1)
        self.blocks = torch.nn.ModuleList([Block(6) for _ in range(3)])
        self.head = torch.nn.Linear(6, 8)

    def forward(self, ids: torch.Tensor):
        h = self.embed(ids) + self.pos[: ids.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.head(h)


class DirectHead(Stacked):
    """Stacked whose forward reads its head's weight itself (a tied or shared projection often is)."""

    def forward(self, ids: torch.Tensor):
        h = self.embed(ids) + self.pos[: ids.shape[1]]
        for block in self.blocks:
            h = block(h)
        return F.linear(h, self.head.weight, self.head.bias)


class Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(6) for _ in range(3)])

    def forward(self, h: torch.Tensor):
        for block in self.blocks:
            h = block(h)
        return h


class Wrapped(torch.nn.Module):
    """Stacked with its blocks one level down (self.body(h)): FSDP's transformer_layer_cls_to_wrap
    ("Block") reaches them."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 6)
        self.pos = torch.nn.Parameter(torch.randn(5, 6) * 0.1)
        self.body = Body()
        self.head = torch.nn.Linear(6, 8)

    def forward(self, ids: torch.Tensor):
        return self.head(self.body(self.embed(ids) + self.pos[: ids.shape[1]]))


class Helper(torch.nn.Module):
    """Calls a method of its own that runs a submodule: stage 3 cannot see that call."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def inner(self, x: torch.Tensor):
        return self.fc(x)

    def forward(self, x: torch.Tensor):
        return self.inner(x) * 2


class Tied(torch.nn.Module):
    """GPT-2's tied head: the output projection is the embedding's weight itself."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 6)
        self.head = torch.nn.Linear(6, 8, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor):
        return self.head(torch.tanh(self.embed(ids)))


class TiedHeadFirst(torch.nn.Module):
    """A tied head made before its embedding: the shared weight is listed under the head's name."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(6, 8, bias=False)
        self.embed = torch.nn.Embedding(8, 6)
        self.embed.weight = self.head.weight

    def forward(self, ids: torch.Tensor):
        return self.head(torch.tanh(self.embed(ids)))


class Masked(torch.nn.Module):
    """A linear layer whose output a buffer it is given scales."""

    def __init__(self, mask: torch.Tensor):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor):
        return self.linear(x) * self.mask


class SharedMask(torch.nn.Module):
    """Two blocks holding one buffer: state_dict() lists it under both names, Accelerate's save_model
    writes it once (safetensors holds no aliases)."""

    def __init__(self):
        super().__init__()
        mask = torch.tensor([1.0, 0.0, 1.0, 0.5])
        self.a = Masked(mask)
        self.b = Masked(mask)

    def forward(self, x: torch.Tensor):
        return self.b(self.a(x))


class SharedLayer(torch.nn.Module):
    """One nn.Linear under three paths (a, b, c.1): Python's named_modules() lists it once, as "a"."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a
        self.c = torch.nn.Sequential(torch.nn.Linear(4, 4), self.a)

    def forward(self, x: torch.Tensor):
        return self.c(self.b(self.a(x)))


class DirectWeight(torch.nn.Module):
    """Reads its layer's weight itself instead of calling the layer."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor):
        return F.linear(x, self.fc.weight, self.fc.bias)


class Offset(torch.nn.Module):
    """A module holding a buffer and no parameter."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(8, dtype=torch.float32) / 8)

    def forward(self, x: torch.Tensor):
        return x + self.table


class Interleaved(torch.nn.Module):
    """Buffers among the parameters: state_dict() goes module by module, each module's parameters
    before its buffers (the model's own scale first, BatchNorm's statistics before the head)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(4, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.offset = Offset()
        self.head = torch.nn.Linear(8, 3)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor):
        return self.head(self.offset(self.norm(self.stem(x)))) * self.scale


def hub_shards(state: dict, max_shard_size: int) -> dict:
    """huggingface_hub's split_torch_state_dict_into_shards restated (Accelerate's save_model calls
    it): shards filled in state-dict order, a new one when the next tensor would overflow, a tensor
    larger than a shard in one of its own. Returns the index's weight_map."""
    shards, current, current_size = [], [], 0
    for name, tensor in state.items():
        size = tensor.untyped_storage().nbytes() if hasattr(tensor, "untyped_storage") else tensor.storage().nbytes()
        if size > max_shard_size:
            shards.append([name])
            continue
        if current_size + size > max_shard_size:
            shards.append(current)
            current, current_size = [], 0
        current.append(name)
        current_size += size
    if current:
        shards.append(current)
    return {name: f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
            for k, names in enumerate(shards) for name in names}


def write_interleaved(out: Path) -> None:
    m = Interleaved()
    torch.jit.save(torch.jit.script(m), str(out / "interleaved.pt"))
    state = m.state_dict()
    # The spec [linear 4->8, batchnorm1d 8, linear 8->3] is this nn.Sequential.
    sequential = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))
    (out / "interleaved_state.json").write_text(json.dumps(
        {"state_dict_names": list(state.keys()), "max_shard_size": 160, "weight_map": hub_shards(state, 160),
         "sequential_state_dict_names": list(sequential.state_dict().keys())}))


def write_cumulative_batch_norm(out: Path) -> None:
    """A spec's batchnorm1d with "momentum": null is PyTorch's momentum=None (each batch weighs 1/k in
    the running statistics): its state after three training batches, from the same seed."""
    torch.manual_seed(21)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=None)).train()
    batches = [torch.randn(5, 3) for _ in range(3)]
    outputs = [m(x).detach() for x in batches]
    out.write_text(json.dumps({
        "seed": 21,
        "spec": [{"type": "linear", "in_features": 3, "out_features": 4},
                 {"type": "batchnorm1d", "num_features": 4, "momentum": None}],
        "batches": [x.flatten().tolist() for x in batches], "last_output": outputs[-1].flatten().tolist(),
        "state": {k: v.flatten().tolist() for k, v in m.state_dict().items()}}))


class SizedBlock(torch.nn.Module):
    """A transformer block for FSDP's size-based wrapping: attention (a leaf it never enters), an MLP
    whose layers it can wrap one by one, and a norm."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.attn = torch.nn.MultiheadAttention(width, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor):
        h = self.norm(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.mlp(x)


class Sized(torch.nn.Module):
    """Blocks of 3248 parameters (attention 1088, MLP 1088 + 1040, norm 32) between an embedding
    and a head of 8 tokens: each min_num_params in SIZE_THRESHOLDS wraps other modules."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 16)
        self.blocks = torch.nn.ModuleList([SizedBlock(16) for _ in range(3)])
        self.head = torch.nn.Linear(16, 8)

    def forward(self, ids: torch.Tensor):
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


SIZE_THRESHOLDS = [100, 1000, 2000, 3000, 12000]


def fsdp_wrap_module():
    """torch.distributed.fsdp.wrap; loaded from its file where the package's import fails (Debian's
    torch 1.13 under Python 3.11)."""
    try:
        from torch.distributed.fsdp import wrap

        return wrap
    except Exception:
        path = Path(torch.__file__).parent / "distributed" / "fsdp" / "wrap.py"
        spec = importlib.util.spec_from_file_location("fsdp_wrap", path)
        wrap = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(wrap)
        return wrap


def write_size_wraps(model: torch.nn.Module, out: Path) -> None:
    """The modules torch's size_based_auto_wrap_policy wraps, for each threshold, found by torch's
    own recursion with a wrapper that records instead of wrapping."""
    wrap = fsdp_wrap_module()
    names = {id(m): name for name, m in model.named_modules()}
    chosen = {}
    for threshold in SIZE_THRESHOLDS:
        wrapped = []

        def record(module, **kwargs):
            wrapped.append(names[id(module)])
            return module

        policy = functools.partial(wrap.size_based_auto_wrap_policy, min_num_params=threshold)
        wrap._recursive_wrap(model, policy, record, ignored_modules=set(), ignored_params=set(), only_wrap_children=True)
        chosen[str(threshold)] = sorted(wrapped)
    out.write_text(json.dumps(chosen, indent=1))


def tied_batch(step: int):
    ids = torch.tensor([(3 * i + step) % 8 for i in range(12)]).reshape(3, 4)
    return ids, (ids + 1) % 8


def write_tied_steps(model_path: Path, out: Path) -> None:
    """The TorchScript module trained by PyTorch: 3 AdamW steps (lr 0.1) of next-token loss."""
    m = torch.jit.load(str(model_path))
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    for step in range(3):
        ids, targets = tied_batch(step)
        loss = F.cross_entropy(m(ids).reshape(-1, 8), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    result = {"names": [n for n, _ in m.named_parameters()],
              "state_dict_names": list(m.state_dict().keys()),
              "weights": {n: p.detach().flatten().tolist() for n, p in m.named_parameters()}}
    out.write_text(json.dumps(result))


def largest_tensor_record(archive: Path) -> zipfile.ZipInfo:
    with zipfile.ZipFile(archive) as z:
        return max((i for i in z.infolist() if "/data/" in i.filename and not i.filename.endswith(".pkl")),
                   key=lambda i: i.file_size)


def write_damaged_copies(archive: Path, out: Path) -> None:
    """A copy with one bit flipped inside the largest weight record (its CRC-32 no longer matches),
    and a well-formed copy (CRCs recomputed) whose largest weight record is cut to half its tensor."""
    data = bytearray(archive.read_bytes())
    record = largest_tensor_record(archive)
    name_length, extra_length = struct.unpack_from("<HH", data, record.header_offset + 26)
    start = record.header_offset + 30 + name_length + extra_length
    data[start + record.file_size // 2] ^= 0x10
    (out / (archive.stem + "_flipped.pt")).write_bytes(bytes(data))
    with zipfile.ZipFile(archive) as source, \
            zipfile.ZipFile(out / (archive.stem + "_short_record.pt"), "w", zipfile.ZIP_STORED) as short:
        for info in source.infolist():
            payload = source.read(info)
            if info.filename == record.filename:
                payload = payload[: len(payload) // 2]
            short.writestr(info.filename, payload)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(Classifier()), str(out / "classifier.pt"))
    torch.jit.save(torch.jit.script(DictOutput()), str(out / "dict_output.pt"))
    torch.jit.save(torch.jit.script(Stacked()), str(out / "stacked.pt"))
    torch.jit.save(torch.jit.script(Helper()), str(out / "helper.pt"))
    torch.jit.save(torch.jit.script(Wrapped()), str(out / "wrapped.pt"))
    torch.jit.save(torch.jit.script(Tied()), str(out / "tied.pt"))
    torch.jit.save(torch.jit.script(TiedHeadFirst()), str(out / "tied_head_first.pt"))
    torch.jit.save(torch.jit.script(DirectWeight()), str(out / "direct_weight.pt"))
    torch.jit.save(torch.jit.script(SharedMask()), str(out / "shared_mask.pt"))
    sized = Sized()
    torch.jit.save(torch.jit.script(sized), str(out / "sized.pt"))
    write_size_wraps(sized, out / "sized_wraps.json")
    write_tied_steps(out / "tied.pt", out / "tied_steps.json")
    write_damaged_copies(out / "classifier.pt", out)
    # What PyTorch computes for a fixed input, for the tests to compare with.
    m = torch.jit.load(str(out / "dict_output.pt"))
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 8
    (out / "dict_output_logits.txt").write_text(" ".join(f"{v:.9g}" for v in m(x)["logits"].flatten().tolist()))
    torch.jit.save(torch.jit.script(DirectHead()), str(out / "direct_head.pt"))  # the others' draws stay
    write_interleaved(out)  # (after them all, as DirectHead)
    write_cumulative_batch_norm(out / "cumulative_batch_norm.json")
    torch.jit.save(torch.jit.script(SharedLayer()), str(out / "shared_layer.pt"))  # (last: the draws above stay)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
