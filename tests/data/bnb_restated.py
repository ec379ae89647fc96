"""bitsandbytes' 4-bit and LLM.int8 storage as its 0.50 release computes it on the CPU, restated in
torch for the fixtures (neither bitsandbytes nor PEFT is packaged for Debian): functional.quantize_4bit
with the default backend's formula for the 4-bit codes (NF4 and FP4, blocks of 64), the C++ table
lookup of csrc/cpu_ops.cpp for double quantisation's 8-bit codes over create_dynamic_map, and
dequantize_4bit / dequantize_blockwise; the default backend's int8_vectorwise_quant,
int8_vectorwise_dequant and int8_scaled_mm (its int32 product exact, as the CUDA and AVX-512
kernels compute it). Used by export_four_bit_cases.py, export_eight_bit_cases.py and
lora_loftq_case.py.
"""
import json
import math

import torch
import torch.nn.functional as F

NF4 = torch.tensor([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=torch.float32)
FP4 = torch.tensor([0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3], dtype=torch.float32)
FP4 = FP4 / FP4.abs().max()
BLOCK = 64
NESTED_BLOCK = 256


def code_of(quant_type):
    return NF4 if quant_type == "nf4" else FP4


def create_dynamic_map(signed=True):
    """create_dynamic_map(signed): for i in 0..6 the midpoints of linspace(0.1, 1, 2^i + 1) times
    +-10^(i-6) (unsigned: of 2^(i+1) + 1 points, positive only), then 0 and 1, sorted."""
    data = []
    for i in range(7):
        boundaries = torch.linspace(0.1, 1, (2 ** i if signed else 2 ** (i + 1)) + 1, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-6 + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-6 + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def quantize_blockwise_cpu(values, code):
    """csrc/cpu_ops.cpp quantize_cpu_impl: a 65536-point grid over [-1, 1], each point the first
    code whose midpoint with the next is not below it; values over their block's maximum."""
    grid = torch.tensor(-1.0, dtype=torch.float32) + (torch.arange(65536, dtype=torch.float32) * 2.0) / 65535.0
    midpoints = 0.5 * (code[:-1] + code[1:])
    lut = torch.searchsorted(midpoints, grid, right=False)
    n = values.numel()
    blocks = (n + NESTED_BLOCK - 1) // NESTED_BLOCK
    codes = torch.zeros(n, dtype=torch.uint8)
    absmax = torch.zeros(blocks, dtype=torch.float32)
    for b in range(blocks):
        part = values[b * NESTED_BLOCK:(b + 1) * NESTED_BLOCK]
        largest = part.abs().max()
        absmax[b] = largest
        if largest.item() == 0.0:
            continue
        inverse = torch.tensor(1.0, dtype=torch.float32) / largest
        v = torch.clamp(part * inverse, -1.0, 1.0)
        index = ((((v + 1.0) * 0.5) * 65535.0) + 0.5).to(torch.int64)
        codes[b * NESTED_BLOCK:(b + 1) * NESTED_BLOCK] = lut[index].to(torch.uint8)
    return codes, absmax


def quantize_4bit(weight, quant_type, nested):
    """bitsandbytes' quantize_4bit (blocksize 64, default backend) and QuantState.as_dict(packed=True)."""
    code = code_of(quant_type)
    flat = weight.reshape(-1).float()
    n = flat.numel()
    rem = n % BLOCK
    full = n - rem
    whole = flat[:full].reshape(-1, BLOCK)
    absmax = whole.abs().max(dim=-1)[0]
    scaled = torch.clamp(whole * (1.0 / absmax.clamp(min=1e-38).view(-1, 1)), -1, 1).reshape(-1)
    if rem:
        am = flat[full:].abs().max().clamp(min=1e-38)
        absmax = torch.cat([absmax, am.unsqueeze(0)])
        scaled = torch.cat([scaled, torch.clamp(flat[full:] / am, -1, 1)])
    if scaled.numel() % 2:
        scaled = F.pad(scaled, (0, 1))
    order = torch.argsort(code)
    bounds = (code[order[:-1]] + code[order[1:]]) / 2
    q = torch.bucketize(scaled, bounds, out_int32=True)
    if quant_type != "nf4":
        q = order[q.long()]
    q8 = q.to(torch.uint8)
    state = {"weight": ((q8[::2] << 4) | q8[1::2]).unsqueeze(1), "absmax": absmax, "quant_map": code.clone()}
    text = {"quant_type": quant_type, "blocksize": BLOCK, "dtype": str(weight.dtype).strip("torch."),
            "shape": list(weight.shape)}
    if nested:
        offset = absmax.mean()
        dynamic = create_dynamic_map()
        codes, maxima = quantize_blockwise_cpu(absmax - offset, dynamic)
        state.update({"absmax": codes, "nested_absmax": maxima, "nested_quant_map": dynamic.clone()})
        text.update({"nested_blocksize": NESTED_BLOCK, "nested_dtype": "float32", "nested_offset": offset.item()})
    state["quant_state.bitsandbytes__" + quant_type] = torch.tensor(list(json.dumps(text).encode("utf-8")),
                                                                     dtype=torch.uint8)
    return state, offset if nested else None


def dequantize_4bit(state, offset, shape, dtype):
    absmax = state["absmax"]
    if "nested_absmax" in state:
        values = state["nested_quant_map"][absmax.long()]
        n = values.numel()
        padded = F.pad(values, (0, state["nested_absmax"].numel() * NESTED_BLOCK - n))
        absmax = (padded.view(-1, NESTED_BLOCK) * state["nested_absmax"].view(-1, 1)).reshape(-1)[:n] + offset
    packed = state["weight"].reshape(-1).long()
    nibbles = torch.stack([packed >> 4, packed & 15], 1).reshape(-1)
    count = 1
    for size in shape:
        count *= size
    values = state["quant_map"][nibbles[:count]]
    return (values * absmax.repeat_interleave(BLOCK)[:count]).to(dtype).view(shape)




def nf4_round_trip(a):
    """quantize_4bit then dequantize_4bit (nf4, blocksize 64): the float32 values the codes stand for."""
    state, _ = quantize_4bit(a, "nf4", False)
    return dequantize_4bit(state, None, list(a.shape), torch.float32)


def int8_rows(matrix, threshold=0.0):
    """int8_vectorwise_quant of a 2-D float16 matrix: (codes, row maxima, outlier columns or None).
    With a threshold, values at least that large leave their rows' maxima and their columns are
    zeroed in the codes (where there is more than one row)."""
    a = matrix.clone()
    columns = None
    if threshold > 0.0:
        large = a.abs() >= threshold
        columns = torch.argwhere(large.any(dim=0)).view(-1) if large.any() else torch.empty(0, dtype=torch.int64)
        a[large] = 0
    maxima = torch.max(a.abs(), dim=1).values.float()
    codes = torch.round(a * (127.0 / maxima.unsqueeze(-1))).to(torch.int8)
    if a.shape[0] > 1 and columns is not None:
        codes[:, columns] = 0
    return codes, maxima, columns


def int8_dequantize(codes, maxima):
    return codes * maxima.view(-1, 1) * 7.874015718698502e-3


def int8_scaled_mm(a_codes, b_codes, a_maxima, b_maxima, bias, dtype):
    """int8_linear_matmul (exact int32) then int8_mm_dequant."""
    product = torch.matmul(a_codes.double(), b_codes.double().t()).to(torch.int32)
    out = product * (a_maxima.reshape(-1).unsqueeze(-1) * b_maxima.reshape(-1).unsqueeze(0)) * 6.200124e-05
    if bias is not None:
        out += bias
    return out.to(dtype)


def dequantize_blockwise_cpu(codes, absmax, code):
    """csrc/cpu_ops.cpp's 8-bit dequantisation: each code's value times its block's maximum."""
    flat = codes.reshape(-1).long()
    return (code[flat] * absmax.repeat_interleave(NESTED_BLOCK)[:flat.numel()]).view(codes.shape)


class Blockwise8bit(torch.optim.Optimizer):
    """bitsandbytes' Optimizer8bit on the CPU: per parameter 8-bit blockwise moments where it has
    at least min_8bit_size elements (a group's, else the optimizer's), float32 ones with the 32-bit
    rule otherwise; `moments` 2 (Optimizer2State: the second on the unsigned code) or 1; `halves` 2
    where state1 holds two moments, (2, *shape), each half with its own row of maxima (AdEMAMix).
    On a CUDA device the arithmetic runs there and the quantisation by the CPU library's rule, as
    ours (bitsandbytes' fused CUDA kernels compute otherwise)."""

    moments = 2
    halves = 1

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group)

    def _update(self, p, group):
        state = self.state[p]
        indices = ["1", "2"][:self.moments]
        first_shape = (2, *p.shape) if self.halves == 2 else p.shape
        if not state:
            state["step"] = 0
            eight_bit = p.numel() >= group["min_8bit_size"]
            dtype = torch.uint8 if eight_bit else torch.float32
            state["state1"] = torch.zeros(first_shape, dtype=dtype, device=p.device)
            if self.moments == 2:
                state["state2"] = torch.zeros_like(p, dtype=dtype)
            if eight_bit:
                blocks = (p.numel() + NESTED_BLOCK - 1) // NESTED_BLOCK
                for index in indices:
                    state["qmap" + index] = create_dynamic_map(index == "1").to(p.device)
                    rows = (2, blocks) if index == "1" and self.halves == 2 else (blocks,)
                    state["absmax" + index] = torch.zeros(rows, dtype=torch.float32, device=p.device)
        state["step"] += 1
        g = p.grad.float() * 1.0
        p32 = p.data.float()
        if state["state1"].dtype == torch.float32:
            self._rule(p32, g, [state["state" + i] for i in indices], state["step"], group, False)
        else:
            moments = []
            for i in indices:
                codes, absmax, qmap = state["state" + i], state["absmax" + i], state["qmap" + i]
                if absmax.ndim == 2:
                    moments.append(torch.stack([dequantize_blockwise_cpu(codes[h], absmax[h], qmap)
                                                for h in range(2)]))
                else:
                    moments.append(dequantize_blockwise_cpu(codes, absmax, qmap))
            self._rule(p32, g, moments, state["step"], group, True)
            for moment, index in zip(moments, indices):  # the library's CPU quantiser, wherever p is
                codes, absmax, qmap = state["state" + index], state["absmax" + index], state["qmap" + index]
                parts = [(moment[h], codes[h], absmax[h]) for h in range(2)] if absmax.ndim == 2 \
                    else [(moment, codes, absmax)]
                for values, codes_out, absmax_out in parts:
                    got, maxima = quantize_blockwise_cpu(values.reshape(-1).cpu(), qmap.cpu())
                    codes_out.copy_(got.view(codes_out.shape))
                    absmax_out.copy_(maxima)
        p.data.copy_(p32)


class Adam8bit(Blockwise8bit):
    """bnb.optim.Adam8bit / AdamW8bit (Optimizer2State "adam"): decoupled weight decay in both."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, min_8bit_size=4096):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        m, v = moments
        beta1, beta2 = group["betas"]
        lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
        correction1 = 1.0 - beta1 ** step
        correction2 = math.sqrt(1.0 - beta2 ** step)
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        if not eight_bit:  # _optimizer_update_32bit_cpu
            step_size = -lr * correction2 / correction1
            if decay > 0.0:
                p32.mul_(1.0 - lr * decay)
            p32.add_(m / (v.sqrt() + eps * correction2), alpha=step_size)
        else:  # _optimizer_update_8bit_blockwise_cpu
            denom = (v.sqrt() / correction2).add_(eps)
            if decay > 0.0:
                p32.mul_(1.0 - lr * decay)
            p32.addcdiv_(m, denom, value=-lr / correction1)


class Lion8bit(Blockwise8bit):
    """bnb.optim.Lion8bit (Optimizer1State "lion")."""

    moments = 1

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, min_8bit_size=4096):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay, min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        (m,) = moments
        beta1, beta2 = group["betas"]
        lr, decay = group["lr"], group["weight_decay"]
        if decay > 0.0:
            p32.mul_(1.0 - lr * decay)
        if eight_bit:
            direction = torch.sign(m.mul(beta1) + g.mul(1.0 - beta1))
        else:
            direction = m.mul(beta1).add(g, alpha=1.0 - beta1).sign()
        p32.add_(direction, alpha=-lr)
        m.mul_(beta2).add_(g, alpha=1.0 - beta2)


class AdEMAMix8bit(Blockwise8bit):
    """bnb.optim.AdEMAMix8bit ("ademamix"): state1 holds m1 and m2; alpha and beta3 warm up over
    t_alpha and t_beta3 steps where those are set (AdEMAMix.update_step)."""

    halves = 2

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999, 0.9999), alpha=5.0, t_alpha=None, t_beta3=None,
                 eps=1e-8, weight_decay=1e-2, min_8bit_size=4096):
        super().__init__(params, dict(lr=lr, betas=betas, alpha=alpha, t_alpha=t_alpha, t_beta3=t_beta3, eps=eps,
                                      weight_decay=weight_decay, min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        m1_m2, nu = moments
        m1, m2 = m1_m2[0], m1_m2[1]
        beta1, beta2, beta3 = group["betas"]
        alpha, t_alpha, t_beta3 = group["alpha"], group["t_alpha"], group["t_beta3"]
        lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
        if t_alpha:
            alpha = min(step * alpha / t_alpha, alpha)
        if t_beta3:
            ln_beta1, ln_beta3 = math.log(beta1), math.log(beta3)
            step_scale = step / t_beta3
            beta3 = min(math.exp((ln_beta1 * ln_beta3) / (((1 - step_scale) * ln_beta3) + (step_scale * ln_beta1))),
                        beta3)
        m1.mul_(beta1).add_(g, alpha=1.0 - beta1)
        m2.mul_(beta3).add_(g, alpha=1.0 - beta3)
        nu.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        correction1 = 1.0 - beta1 ** step
        correction2 = math.sqrt(1.0 - beta2 ** step)
        if eight_bit:  # _optimizer_update_8bit_blockwise_cpu
            update = (m1 / correction1 + alpha * m2) / (nu.sqrt() / correction2 + eps)
            if decay > 0.0:
                p32.mul_(1.0 - lr * decay)
            p32.add_(update, alpha=-lr)
        else:  # _optimizer_update_32bit_cpu
            if decay > 0.0:
                p32.mul_(1.0 - lr * decay)
            mixed_momentum = (m1 / correction1) + (alpha * m2)
            adaptive_term = (nu.sqrt() / correction2) + eps
            p32.add_(mixed_momentum / adaptive_term, alpha=-lr)


class OneState8bit(Blockwise8bit):
    """Optimizer1State's rules that add the weight decay to the gradient: the 8-bit one always
    (grad.add_(p, alpha=weight_decay)), the 32-bit one where it is above 0."""

    moments = 1

    @staticmethod
    def _decayed(p32, g, decay, eight_bit):
        if eight_bit:
            return g.add_(p32, alpha=decay)
        return g.add(p32, alpha=decay) if decay > 0.0 else g


class SGD8bit(OneState8bit):
    """bnb.optim.SGD8bit ("momentum"): betas (momentum, dampening); the rule reads momentum only."""

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, min_8bit_size=4096):
        if momentum == 0:
            raise NotImplementedError("SGD without momentum is not supported!")
        super().__init__(params, dict(lr=lr, betas=(momentum, dampening), eps=0.0, weight_decay=weight_decay,
                                      min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        (m,) = moments
        g = self._decayed(p32, g, group["weight_decay"], eight_bit)
        if step == 1:
            m.copy_(g)
        else:
            m.mul_(group["betas"][0]).add_(g)
        p32.add_(m, alpha=-group["lr"])


class RMSprop8bit(OneState8bit):
    """bnb.optim.RMSprop8bit ("rmsprop"): betas (alpha, momentum); the rule reads alpha only."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, min_8bit_size=4096):
        super().__init__(params, dict(lr=lr, betas=(alpha, 0), eps=eps, weight_decay=weight_decay,
                                      min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        (m,) = moments
        alpha, lr, eps = group["betas"][0], group["lr"], group["eps"]
        g = self._decayed(p32, g, group["weight_decay"], eight_bit)
        m.mul_(alpha).addcmul_(g, g, value=1.0 - alpha)
        if eight_bit:
            p32.addcdiv_(g, m.sqrt().add_(eps), value=-lr)
        else:
            p32.add_(g / (m.sqrt() + eps), alpha=-lr)


class Adagrad8bit(OneState8bit):
    """bnb.optim.Adagrad8bit ("adagrad"): betas (0, 0)."""

    def __init__(self, params, lr=1e-2, weight_decay=0, eps=1e-10, min_8bit_size=4096):
        super().__init__(params, dict(lr=lr, betas=(0.0, 0.0), eps=eps, weight_decay=weight_decay,
                                      min_8bit_size=min_8bit_size))

    def _rule(self, p32, g, moments, step, group, eight_bit):
        (m,) = moments
        lr, eps = group["lr"], group["eps"]
        g = self._decayed(p32, g, group["weight_decay"], eight_bit)
        m.addcmul_(g, g, value=1.0)
        if eight_bit:
            p32.addcdiv_(g, m.sqrt().add_(eps), value=-lr)
        else:
            p32.add_(g / (m.sqrt() + eps), alpha=-lr)
