"""LLM.int8 base models restated for tests/capi/test_eight_bit.cpp: transformers' load_in_8bit
(BitsAndBytesConfig) on a scripted MLP, then PEFT's LoRA on the 8-bit layers, trained a few AdamW
steps, evaluated and merged.

Neither bitsandbytes nor PEFT is packaged for Debian, so what they compute on the CPU is restated
here from their sources (bitsandbytes 0.50: Int8Params' quantisation in float16,
nn.Linear8bitLt.forward, bnb.matmul choosing MatMul8bitFp in training mode on the CPU and
MatMul8bitLt otherwise, int8_mixed_scaled_mm's outlier columns; transformers'
get_keys_to_not_convert; PEFT's lora.bnb.Linear8bitLt forward and merge, its adapters left in
float32). Written: eight_bit_model.pt and eight_bit_cases.json (per case: each 8-bit layer's
state-dict entries, the evaluation output before adapters, the training losses, the adapters after
them, the evaluation output with them, and after merging).

Run with Debian's python3-torch: python3 export_eight_bit_cases.py OUTPUT_DIR
"""
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bnb_restated import int8_dequantize, int8_rows, int8_scaled_mm
from peft_restated import linear_pair, tensor
from quantized_mlp import QuantMlp, keys_not_converted, skipped

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# threshold None: transformers' default llm_int8_threshold, 6.0.
CASES = [
    {"threshold": None, "model": "float32", "skip": None, "targets": ["fc1", "fc2"], "r": 4, "lora_alpha": 8.0},
    {"threshold": 0.0, "model": "float32", "skip": [], "targets": ["fc1", "fc3"], "r": 2, "lora_alpha": 4.0},
    {"threshold": 1.5, "model": "bfloat16", "skip": ["fc2"], "targets": ["fc1"], "r": 3, "lora_alpha": 3.0},
    # The recipe of 8-bit LoRA: a bfloat16 model, prepare_model_for_kbit_training, LoRA on every
    # layer, trained under bfloat16 autocast as Accelerate's prepared model.
    {"threshold": None, "model": "bfloat16", "skip": None, "targets": ["fc1", "fc2", "fc3"], "r": 4,
     "lora_alpha": 16.0, "prepare": True, "autocast": True},
    # Trained in evaluation mode: through the int8 product's backward (MatMul8bitLt), as on CUDA.
    {"threshold": 6.0, "model": "float32", "skip": None, "targets": ["fc1", "fc2"], "r": 2, "lora_alpha": 4.0,
     "train_in_eval": True},
]


class MatMul8bitFp(torch.autograd.Function):
    """Training on the CPU: the weight dequantised to the input's dtype, both ways."""

    @staticmethod
    def forward(ctx, a, layer, bias):
        ctx.layer, ctx.dtype, ctx.shape = layer, a.dtype, a.shape
        return F.linear(a, weight_in(layer, a.dtype), bias)

    @staticmethod
    def backward(ctx, grad):
        rows = grad.reshape(-1, grad.shape[-1])
        return torch.matmul(rows.to(ctx.dtype), weight_in(ctx.layer, ctx.dtype)).view(ctx.shape), None, None


def weight_in(layer, dtype):
    return layer["codes"].to(dtype).mul_(layer["maxima"].unsqueeze(1).mul(1.0 / 127.0))


def int8_product(x, layer, bias, threshold):
    """MatMul8bitLt.forward: the input quantised too (its outlier columns in floating point)."""
    a = x.reshape(-1, x.shape[-1])
    codes, maxima, columns = int8_rows(a.to(torch.float16), threshold)
    out = int8_scaled_mm(codes, layer["codes"], maxima, layer["maxima"], bias, a.dtype)
    if columns is not None and columns.numel():
        weight_columns = int8_dequantize(layer["codes"][:, columns].contiguous(), layer["maxima"])
        out = out.addmm(a[:, columns].contiguous(), weight_columns.to(a.dtype).t())
    return out.reshape(*x.shape[:-1], layer["codes"].shape[0])


class MatMul8bitLt(torch.autograd.Function):
    """Evaluation mode (and CUDA): the int8 product; backward as MatMul8bitFp's."""

    @staticmethod
    def forward(ctx, a, layer, bias, threshold):
        ctx.layer, ctx.dtype, ctx.shape = layer, a.dtype, a.shape
        return int8_product(a, layer, bias, threshold)

    @staticmethod
    def backward(ctx, grad):
        rows = grad.reshape(-1, grad.shape[-1])
        return torch.matmul(rows.to(ctx.dtype), weight_in(ctx.layer, ctx.dtype)).view(ctx.shape), None, None, None


def linear8bit(x, layer, training, threshold):
    """Linear8bitLt.forward: its bias cast to the input's dtype for good, then bnb.matmul."""
    if layer["bias"].dtype != x.dtype:
        layer["bias"] = layer["bias"].to(x.dtype)
    if training:
        return MatMul8bitFp.apply(x, layer, layer["bias"])
    return MatMul8bitLt.apply(x, layer, layer["bias"], threshold)


def quantize(weight):
    """Int8Params._quantize: the weight in float16, then int8_vectorwise_quant."""
    codes, maxima, _ = int8_rows(weight.detach().contiguous().to(torch.float16))
    return codes, maxima


def states_of(layers):
    """Each 8-bit layer's state-dict entries (as float values) and their dtypes."""
    states = {}
    for name, layer in layers.items():
        entries = {name + ".weight": layer["codes"], name + ".SCB": layer["maxima"],
                   name + ".weight_format": torch.tensor(0, dtype=torch.uint8)}
        states[name] = {key: tensor(value.float()) for key, value in entries.items()}
        states[name]["dtypes"] = {key: str(value.dtype).replace("torch.", "") for key, value in entries.items()}
    return states


def run_case(base, config, x, target):
    threshold = 6.0 if config["threshold"] is None else config["threshold"]
    model = QuantMlp()
    model.load_state_dict(base.state_dict())
    model.to(DTYPES[config["model"]])
    for p in model.parameters():
        p.requires_grad_(False)
    keys = keys_not_converted(model) if config["skip"] is None else set(config["skip"])
    layers = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear) or any(skipped(k, name) for k in keys):
            continue
        codes, maxima = quantize(module.weight)
        layers[name] = {"codes": codes, "maxima": maxima, "bias": module.bias.detach().clone()}
    states = states_of(layers)
    if config.get("prepare"):  # prepare_model_for_kbit_training: half precision made float32
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                if name in layers:
                    layers[name]["bias"] = layers[name]["bias"].float()
                else:
                    module.to(torch.float32)
    adapters = {}
    scaling = config["lora_alpha"] / config["r"]
    training = [False]

    def layer_forward(name, module, h):
        if name in layers:
            out = linear8bit(h, layers[name], training[0], threshold)
        else:
            out = module(h)
        if name not in adapters:
            return out
        a, b = adapters[name]
        branch = F.linear(F.linear(h.to(a.dtype), a), b) * scaling
        if name in layers:  # lora.bnb.Linear8bitLt: the branch cast to the result's dtype, then added
            return out + branch.to(out.dtype)
        return (out + branch).to(out.dtype)

    def forward(h):
        h = torch.relu(layer_forward("fc1", model.fc1, h))
        h = torch.relu(layer_forward("fc2", model.fc2, h))
        return layer_forward("fc3", model.fc3, h)

    def run(h):  # as Accelerate's prepared model: under autocast, the outputs in float32
        if not config.get("autocast"):
            return forward(h)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward(h).float()

    xs = x.to(DTYPES[config["model"]])
    with torch.no_grad():  # evaluation mode: the int8 product
        evaluated = run(xs)
    torch.manual_seed(77)
    for name, module in model.named_modules():
        if name not in config["targets"]:
            continue
        a, b = linear_pair(module.in_features, module.out_features, config["r"])
        # PEFT moves them to a float layer's dtype (an int8 weight's is left alone), then makes half
        # precision float32 again.
        dtype = torch.float32 if name in layers else module.weight.dtype
        adapters[name] = [a.detach().to(dtype).float().requires_grad_(True),
                          b.detach().to(dtype).float().requires_grad_(True)]
    params = [p for name in adapters for p in adapters[name]]
    opt = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    training[0] = not config.get("train_in_eval", False)
    for _ in range(3):
        loss = F.mse_loss(run(xs).float(), target)  # in float32 (torch 1.13 has no bfloat16 MSE)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    training[0] = False
    trained = {name: {"a": tensor(a), "b": tensor(b)} for name, (a, b) in adapters.items()}
    with torch.no_grad():
        adapted = run(xs)
        # merge_and_unload: an 8-bit layer's weight dequantised (float32), PEFT's get_delta_weight
        # (B @ A) * scaling added and quantised again as Int8Params; a float layer's weight += delta.
        for name, (a, b) in adapters.items():
            delta = (b @ a) * scaling
            if name in layers:
                layer = layers[name]
                merged_weight = int8_dequantize(layer["codes"], layer["maxima"]).to(delta.dtype) + delta
                layer["codes"], layer["maxima"] = quantize(merged_weight)
            else:
                dict(model.named_modules())[name].weight += delta
        adapters.clear()
        merged = run(xs)
    return {"config": config, "layers": list(layers), "states": states, "evaluated": tensor(evaluated.float()),
            "losses": losses, "adapters": trained, "adapted": tensor(adapted.float()),
            "merged_states": states_of(layers), "merged": tensor(merged.float())}


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(808)
    base = QuantMlp()
    torch.jit.script(base).save(str(out / "eight_bit_model.pt"))
    x = torch.sin(torch.arange(2 * 3 * 128, dtype=torch.float32) * 0.13).reshape(2, 3, 128)
    x[..., 7] *= 8.0  # a column past the default threshold in some rows
    x[0, 1, 40] = -9.5  # and a single large value
    target = torch.cos(torch.arange(2 * 3 * 7, dtype=torch.float32) * 0.5).reshape(2, 3, 7)
    cases = [run_case(base, config, x, target) for config in CASES]
    (out / "eight_bit_cases.json").write_text(
        json.dumps({"cases": cases, "input": tensor(x), "target": tensor(target)}))


if __name__ == "__main__":
    main(sys.argv[1])
