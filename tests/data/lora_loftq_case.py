"""PEFT's LoftQ (get_peft_model with init_lora_weights "loftq" and a LoftQConfig) restated for
tests/capi/test_lora_loftq.cpp and tests/cpp/test_loftq.cpp: the "loftq" entry of lora_cases.json,
the model lora_loftq_model.pt (the bfloat16 cases take it in bfloat16, model.to(torch.bfloat16)) and
lora_loftq_model_extreme.pt, whose fc2 exceeds float16's range and whose fc3 holds a NaN.

Neither PEFT nor bitsandbytes is packaged for Debian, so PEFT's loftq_init and
_low_rank_decomposition (peft/utils/loftq_utils.py) are restated here from their definitions, with
bitsandbytes' quantisation as its PyTorch implementation computes it (bitsandbytes/backends/default:
quantize_4bit and dequantize_4bit for NF4 with Params4bit's blocks of 64; Int8Params, which quantises
a float16 copy, int8_vectorwise_quant and int8_vectorwise_dequant).
"""
import torch
from torch import nn

from bnb_restated import NF4, nf4_round_trip
from peft_restated import tensor

CASES = [
    {"targets": ["fc1", "fc2", "fc3"], "r": 2, "lora_alpha": 4.0, "bits": 4, "iter": 1, "model": "float32"},
    {"targets": ["fc1", "fc3"], "r": 3, "lora_alpha": 3.0, "bits": 4, "iter": 3, "model": "float32",
     "rank_pattern": {"fc3": 1}},
    {"targets": ["fc1", "fc2"], "r": 2, "lora_alpha": 2.0, "bits": 8, "iter": 1, "model": "float32"},
    {"targets": ["fc2", "fc3"], "r": 4, "lora_alpha": 8.0, "bits": 8, "iter": 2, "model": "float32"},
    {"targets": ["fc1", "fc2"], "r": 2, "lora_alpha": 4.0, "bits": 4, "iter": 2, "model": "bfloat16"},
    {"targets": ["fc1", "fc2", "fc3"], "r": 2, "lora_alpha": 6.0, "bits": 4, "iter": 1, "model": "float32",
     "use_dora": True},
]


class LoftqMlp(nn.Module):
    """fc1's weight is 40 blocks of 64, fc2's 24, fc3's one and a shorter one (120 values)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(40, 64)
        self.fc2 = nn.Linear(64, 24)
        self.fc3 = nn.Linear(24, 5)
        with torch.no_grad():
            self.fc1.weight.view(-1)[64:128].zero_()  # a block of zeros (its absmax clamped)
            self.fc2.weight[3] *= 40.0  # a row far larger than the others

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def int8_round_trip(a):
    """Int8Params' quantisation (a float16 copy, int8_vectorwise_quant) and int8_vectorwise_dequant."""
    half = a.contiguous().to(torch.float16)
    row_stats = torch.max(half.abs(), dim=1).values.float()
    q = torch.round(half * (127.0 / row_stats.unsqueeze(-1))).to(torch.int8)
    return q * row_stats.view(-1, 1) * 7.874015718698502e-3


def low_rank_decomposition(weight, reduced_rank):
    u, s, vh = torch.linalg.svd(weight, full_matrices=False)
    left = u @ (torch.sqrt(torch.diag(s)[:, 0:reduced_rank]))
    right = torch.sqrt(torch.diag(s)[0:reduced_rank, :]) @ vh
    return left, right


def loftq_init(weight, num_bits, reduced_rank, num_iter):
    dtype = weight.dtype
    weight = weight.to(dtype=torch.float32)
    res = weight.clone()
    for i in range(num_iter):
        dequantized = nf4_round_trip(res) if num_bits == 4 else int8_round_trip(res)
        res = weight - dequantized
        left, right = low_rank_decomposition(res, reduced_rank)
        if i + 1 == num_iter:
            break
        res = weight - torch.mm(left, right)
    return dequantized.to(dtype), right, left


def make_model(dtype):
    torch.manual_seed(201)
    model = LoftqMlp()
    return model.to(torch.bfloat16) if dtype == "bfloat16" else model


def run_case(config, seed):
    model = make_model(config["model"])
    modules = dict(model.named_modules())
    torch.manual_seed(seed)
    result = {}
    with torch.no_grad():
        for n in config["targets"]:
            layer = modules[n]
            r = config.get("rank_pattern", {}).get(n, config["r"])
            # update_layer: nn.Linear's adapters drawn, then loftq_init replaces them and the weight.
            nn.Linear(layer.in_features, r, bias=False)
            nn.Linear(r, layer.out_features, bias=False)
            qweight, a, b = loftq_init(layer.weight, config["bits"], r, config["iter"])
            # The adapters moved to the layer's dtype, then made float32 again (autocast_adapter_dtype).
            a, b = a.to(layer.weight.dtype).float(), b.to(layer.weight.dtype).float()
            layer.weight.copy_(qweight)
            result[n] = {"lora_A": tensor(a), "lora_B": tensor(b), "weight": tensor(qweight.float())}
            if config.get("use_dora"):  # DoRA's magnitude from the quantised weight
                scaling = config["lora_alpha"] / r
                result[n]["magnitude"] = tensor(torch.linalg.norm(qweight + scaling * (b @ a), dim=1))
    return {"config": config, "seed": seed, "layers": result, "next_draw": tensor(torch.rand(3))}


def loftq_case(out):
    torch.jit.script(make_model("float32")).save(str(out / "lora_loftq_model.pt"))
    extreme = make_model("float32")
    with torch.no_grad():
        extreme.fc2.weight[0] = 1e5
        extreme.fc3.weight[0, 0] = float("nan")
    torch.jit.script(extreme).save(str(out / "lora_loftq_model_extreme.pt"))
    # The bitsandbytes round trips on their own: 63 blocks of 64 and a shorter one, magnitudes from
    # 1e-3 to 1e2, a block of zeros, and a first block of 1 and the NF4 buckets' edges themselves.
    g = torch.Generator().manual_seed(202)
    probe = torch.randn(63, 65, generator=g) * torch.logspace(-3, 2, 65)
    edges = (NF4[:-1] + NF4[1:]) / 2
    probe[0] = 0.0
    probe[0, :31] = torch.cat([torch.ones(1), edges, -edges])
    probe[5] = 0.0
    return {"cases": [run_case(config, 203 + i) for i, config in enumerate(CASES)],
            "probe": tensor(probe), "probe_nf4": tensor(nf4_round_trip(probe)),
            "probe_int8": tensor(int8_round_trip(probe))}
