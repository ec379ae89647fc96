"""QLoRA's base model restated for tests/capi/test_four_bit.cpp: transformers' load_in_4bit
(BitsAndBytesConfig) on a scripted MLP, then PEFT's LoRA on the 4-bit layers, trained a few AdamW
steps.

Neither bitsandbytes nor PEFT is packaged for Debian, so what they compute on the CPU is restated
here from their sources (bitsandbytes 0.50: functional.quantize_4bit with the default backend's
torch formula for the 4-bit codes and the C++ table lookup of csrc/cpu_ops.cpp for double
quantisation's 8-bit codes, create_dynamic_map, dequantize_4bit and dequantize_blockwise,
nn.Linear4bit.forward and autograd's MatMul4Bit; transformers' get_keys_to_not_convert; PEFT's
lora.bnb.Linear4bit.forward and its adapters' dtype). Written: four_bit_model.pt,
four_bit_reads_weight.pt (a forward using a layer's weight itself) and
four_bit_cases.json (per case: each 4-bit layer's state-dict entries, the output before training,
the losses of the steps, the adapters after them, and the adapters PEFT's replace_lora_weights_loftq
gives the targeted 4-bit layers).

Run with Debian's python3-torch: python3 export_four_bit_cases.py OUTPUT_DIR
"""
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bnb_restated import dequantize_4bit, quantize_4bit
from peft_restated import linear_pair, tensor
from quantized_mlp import QuantMlp, keys_not_converted, skipped

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

CASES = [
    {"quant_type": "nf4", "double_quant": False, "compute": "float32", "model": "float32", "skip": None,
     "targets": ["fc1", "fc2"], "r": 4, "lora_alpha": 8.0},
    {"quant_type": "fp4", "double_quant": True, "compute": "bfloat16", "model": "float32", "skip": [],
     "targets": ["fc1", "fc3"], "r": 2, "lora_alpha": 4.0},
    {"quant_type": "nf4", "double_quant": True, "compute": "bfloat16", "model": "bfloat16", "skip": ["fc2"],
     "targets": ["fc1"], "r": 3, "lora_alpha": 3.0},
    {"quant_type": "fp4", "double_quant": False, "compute": "float32", "model": "float32", "skip": None,
     "targets": ["fc2"], "r": 2, "lora_alpha": 2.0},
    # QLoRA's recipe: a bfloat16 model, prepare_model_for_kbit_training (the output layer, kept, in
    # float32), LoRA on every layer, trained under bfloat16 autocast as Accelerate's prepared model.
    {"quant_type": "nf4", "double_quant": True, "compute": "bfloat16", "model": "bfloat16", "skip": None,
     "targets": ["fc1", "fc2", "fc3"], "r": 4, "lora_alpha": 16.0, "prepare": True, "autocast": True},
]


class ReadsWeight(nn.Module):
    """A forward that uses fc's weight other than as torch.linear's: no 4-bit layer can stand in."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(x @ self.fc.weight.t())


class MatMul4Bit(torch.autograd.Function):
    """bitsandbytes' MatMul4Bit: the forward dequantises straight to the input's dtype, the backward
    to the weight's own dtype and then the gradient's."""

    @staticmethod
    def forward(ctx, a, layer, bias):
        ctx.layer = layer
        return F.linear(a, dequantize_4bit(layer["state"], layer["offset"], layer["shape"], a.dtype), bias)

    @staticmethod
    def backward(ctx, grad):
        layer = ctx.layer
        weight = dequantize_4bit(layer["state"], layer["offset"], layer["shape"], layer["dtype"])
        return torch.matmul(grad, weight.to(grad.dtype)), None, None


def linear4bit(x, layer, compute):
    """bitsandbytes' Linear4bit.forward with transformers' compute dtype."""
    inp = x.dtype
    x = x.to(compute)
    bias = layer["bias"].to(compute)
    return MatMul4Bit.apply(x, layer, bias).to(inp)


def states_of(layers):
    """Each 4-bit layer's state-dict entries (as float values) and their dtypes."""
    states = {}
    for name, layer in layers.items():
        entries = {name + ".weight": layer["state"]["weight"]}
        for key, value in layer["state"].items():
            if key != "weight":
                entries[name + ".weight." + key] = value
        states[name] = {key: tensor(value.float()) for key, value in entries.items()}
        states[name]["dtypes"] = {key: str(value.dtype).replace("torch.", "") for key, value in entries.items()}
    return states


def loftq_replacement(weight, layer, r):
    """PEFT's replace_lora_weights_loftq for one Linear4bit layer (_loftq_init_new on the CPU): the
    unquantised weight, as its safetensors file holds it, in float32 minus the layer dequantised to
    its quant_state dtype; _low_rank_decomposition's L and R are lora_B and lora_A."""
    dequantized = dequantize_4bit(layer["state"], layer["offset"], layer["shape"], layer["dtype"])
    residual = weight.detach().to(torch.float32) - dequantized
    u, s, vh = torch.linalg.svd(residual, full_matrices=False)
    low = u @ (torch.sqrt(torch.diag(s)[:, 0:r]))
    high = torch.sqrt(torch.diag(s)[0:r, :]) @ vh
    return {"a": tensor(high), "b": tensor(low)}


def run_case(base, config, x, target):
    compute = DTYPES[config["compute"]]
    model_dtype = DTYPES[config["model"]]
    model = QuantMlp()
    model.load_state_dict(base.state_dict())
    model.to(model_dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    keys = keys_not_converted(model) if config["skip"] is None else set(config["skip"])
    layers = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear) or any(skipped(k, name) for k in keys):
            continue
        state, offset = quantize_4bit(module.weight, config["quant_type"], config["double_quant"])
        layers[name] = {"state": state, "offset": offset, "shape": list(module.weight.shape),
                        "dtype": module.weight.dtype, "bias": module.bias.detach().to(compute)}
    loftq = {name: loftq_replacement(dict(model.named_modules())[name].weight, layers[name], config["r"])
             for name in config["targets"] if name in layers}
    if config.get("prepare"):  # prepare_model_for_kbit_training: half precision made float32 (4-bit
        # layers' biases too, which their first forward casts back to the compute dtype)
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and name not in layers:
                module.to(torch.float32)
    torch.manual_seed(77)
    adapters = {}
    scaling = config["lora_alpha"] / config["r"]
    for name, module in model.named_modules():
        if name not in config["targets"]:
            continue
        a, b = linear_pair(module.in_features, module.out_features, config["r"])
        # PEFT moves them to the layer's dtype (a 4-bit layer's compute dtype), then makes half
        # precision float32 again.
        dtype = compute if name in layers else module.weight.dtype
        adapters[name] = [a.detach().to(dtype).float().requires_grad_(True),
                          b.detach().to(dtype).float().requires_grad_(True)]

    def layer_forward(name, module, h):
        out = linear4bit(h, layers[name], compute) if name in layers else module(h)
        if name not in adapters:
            return out
        a, b = adapters[name]
        if name in layers:  # lora.bnb.Linear4bit
            result = out.clone()
            branch = F.linear(F.linear(h.to(a.dtype), a), b) * scaling
            return result + branch.to(result.dtype)
        return (out + F.linear(F.linear(h.to(a.dtype), a), b) * scaling).to(out.dtype)

    def forward(h):
        h = torch.relu(layer_forward("fc1", model.fc1, h))
        h = torch.relu(layer_forward("fc2", model.fc2, h))
        return layer_forward("fc3", model.fc3, h)

    def run(h):  # as Accelerate's prepared model: under autocast, the outputs in float32
        if not config.get("autocast"):
            return forward(h)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward(h).float()

    xs = x.to(model_dtype)
    with torch.no_grad():
        before = run(xs)
    params = [p for name in adapters for p in adapters[name]]
    opt = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(run(xs).float(), target)  # in float32 (torch 1.13 has no bfloat16 MSE)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    states = states_of(layers)
    trained = {name: {"a": tensor(a), "b": tensor(b)} for name, (a, b) in adapters.items()}
    # merge_and_unload: a 4-bit layer's weight dequantised to its dtype, PEFT's get_delta_weight
    # (B @ A) * scaling added (the sum in float32 by type promotion) and quantised again; a float
    # layer's weight += delta.
    with torch.no_grad():
        for name, (a, b) in adapters.items():
            delta = (b @ a) * scaling
            if name in layers:
                layer = layers[name]
                w = dequantize_4bit(layer["state"], layer["offset"], layer["shape"], layer["dtype"]) + delta
                layer["state"], layer["offset"] = quantize_4bit(w, config["quant_type"], config["double_quant"])
                layer["dtype"] = w.dtype
            else:
                dict(model.named_modules())[name].weight += delta
        adapters.clear()
        merged = run(xs)
    return {"config": config, "layers": list(layers), "states": states, "before": tensor(before.float()),
            "loftq": loftq,
            "merged_states": states_of(layers), "merged": tensor(merged.float()),
            "losses": losses,
            "adapters": trained}


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(404)
    base = QuantMlp()
    torch.jit.script(base).save(str(out / "four_bit_model.pt"))
    torch.jit.script(ReadsWeight()).save(str(out / "four_bit_reads_weight.pt"))
    x = torch.sin(torch.arange(2 * 3 * 128, dtype=torch.float32) * 0.13).reshape(2, 3, 128)
    target = torch.cos(torch.arange(2 * 3 * 7, dtype=torch.float32) * 0.5).reshape(2, 3, 7)
    cases = [run_case(base, config, x, target) for config in CASES]
    (out / "four_bit_cases.json").write_text(json.dumps({"cases": cases, "input": tensor(x), "target": tensor(target)}))


if __name__ == "__main__":
    main(sys.argv[1])
