"""Outputs of PyTorch's own nn.MultiheadAttention (self and cross), nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer (and a small GPT-style stack and a small encoder-decoder over them) in
eval mode, with their weights and inputs, for tests/capi/test_transformer.cpp to load into
layer-spec models by name and reproduce. Each case holds the spec, the state dict, the inputs (the
model's forward arguments in order: padding masks are bool or float tensors) and the output; tensors
are {"shape": [...], "values": [...], "dtype": ...} in row-major order, NaN written as null (a row
whose keys are all masked is NaN in PyTorch).

Run with Debian's python3-torch: python3 export_transformer_cases.py OUTPUT_DIR
"""
import json
import math
import sys
from pathlib import Path

import torch
from torch import nn


def tensor(t):
    dtype = {torch.int64: "int64", torch.bool: "bool"}.get(t.dtype, "float32")
    values = [None if isinstance(v, float) and math.isnan(v) else v for v in t.detach().flatten().tolist()]
    return {"shape": list(t.shape), "values": values, "dtype": dtype}


def causal_mask(t):
    return torch.triu(torch.full((t, t), float("-inf")), 1)


def right_padding(b, n):
    """[b, n] bool, true at padded keys: row i keeps n - i keys (row 0 none padded)."""
    return torch.arange(n)[None, :] >= (n - torch.arange(b))[:, None]


def perturbed(module):
    # Biases and norm weights start at 0/1: move them so that a misplaced one shows.
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return module


def mha_case(batch_first, causal, bias, t=5, b=3, e=8, heads=2):
    m = perturbed(nn.MultiheadAttention(e, heads, bias=bias, batch_first=batch_first)).eval()
    x = torch.randn(b, t, e) if batch_first else torch.randn(t, b, e)
    # With grad enabled PyTorch takes its reference path (1.13's fused eval path fails without biases).
    y = m(x, x, x, attn_mask=causal_mask(t) if causal else None, need_weights=False)[0]
    spec = {"type": "multihead_attention", "embed_dim": e, "num_heads": heads, "bias": bias,
            "batch_first": batch_first, "causal": causal}
    return {"name": f"mha batch_first={batch_first} causal={causal} bias={bias}", "spec": [spec],
            "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()}, "inputs": [tensor(x)],
            "output": tensor(y)}


def cross_mha_case(batch_first, bias, t=5, s=4, b=3, e=8, heads=2):
    m = perturbed(nn.MultiheadAttention(e, heads, bias=bias, batch_first=batch_first)).eval()
    x = torch.randn(b, t, e) if batch_first else torch.randn(t, b, e)
    memory = torch.randn(b, s, e) if batch_first else torch.randn(s, b, e)
    y = m(x, memory, memory, need_weights=False)[0]
    spec = {"type": "multihead_attention", "embed_dim": e, "num_heads": heads, "bias": bias,
            "batch_first": batch_first, "key_value": {"input": 1}}
    return {"name": f"cross mha batch_first={batch_first} bias={bias}", "spec": [spec],
            "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()},
            "inputs": [tensor(x), tensor(memory)], "output": tensor(y)}


def padded_mha_case(batch_first, causal, cross, float_mask=False, unbatched=False, all_masked=False,
                    t=5, s=4, b=3, e=8, heads=2):
    """nn.MultiheadAttention with a key_padding_mask (the model's last input)."""
    m = perturbed(nn.MultiheadAttention(e, heads, batch_first=batch_first)).eval()
    def sequence(n):
        if unbatched:
            return torch.randn(n, e)
        return torch.randn(b, n, e) if batch_first else torch.randn(n, b, e)
    n = s if cross else t
    x = sequence(t)
    kv = sequence(s) if cross else x
    mask = torch.randn(b, n) if float_mask else right_padding(b, n)
    if all_masked:
        mask[1] = True  # batch element 1 attends to nothing: NaN before torch 2.5, zeros from 2.5
    if unbatched:
        mask = mask[-1]
    if float_mask and causal:
        # 1.13 refuses a float key_padding_mask beside a float attn_mask; 2.x adds them, as we do.
        merged = causal_mask(t)[None] + mask[:, None, :]
        y = m(x, kv, kv, attn_mask=merged.repeat_interleave(heads, 0), need_weights=False)[0]
    else:
        y = m(x, kv, kv, key_padding_mask=mask, attn_mask=causal_mask(t) if causal else None, need_weights=False)[0]
    spec = {"type": "multihead_attention", "embed_dim": e, "num_heads": heads, "batch_first": batch_first,
            "causal": causal, "key_padding_mask": {"input": 2 if cross else 1}}
    if cross:
        spec["key_value"] = {"input": 1}
    return {"name": f"padded mha batch_first={batch_first} causal={causal} cross={cross} float={float_mask} "
                    f"unbatched={unbatched} all_masked={all_masked}",
            "spec": [spec], "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()},
            "inputs": [tensor(x)] + ([tensor(kv)] if cross else []) + [tensor(mask)], "output": tensor(y)}


def encoder_case(activation, norm_first, batch_first, causal, padded=False, float_mask=False, t=5, b=3, d=8, heads=2,
                 ff=16):
    m = perturbed(nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation=activation,
                                             batch_first=batch_first, norm_first=norm_first)).eval()
    x = torch.randn(b, t, d) if batch_first else torch.randn(t, b, d)
    mask = (torch.randn(b, t) if float_mask else right_padding(b, t)) if padded else None
    y = m(x, src_mask=causal_mask(t) if causal else None, src_key_padding_mask=mask)
    spec = {"type": "transformer_encoder_layer", "d_model": d, "nhead": heads, "dim_feedforward": ff,
            "activation": activation, "batch_first": batch_first, "norm_first": norm_first, "causal": causal}
    if padded:
        spec["src_key_padding_mask"] = {"input": 1}
    return {"name": f"encoder {activation} norm_first={norm_first} batch_first={batch_first} causal={causal} "
                    f"padded={padded} float={float_mask}",
            "spec": [spec], "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()},
            "inputs": [tensor(x)] + ([tensor(mask)] if padded else []), "output": tensor(y)}


def decoder_case(activation, norm_first, batch_first, causal, unbatched=False, padded=False, t=5, s=4, b=3, d=8,
                 heads=2, ff=16):
    m = perturbed(nn.TransformerDecoderLayer(d, heads, ff, dropout=0.1, activation=activation,
                                             batch_first=batch_first, norm_first=norm_first)).eval()
    def sequence(n):
        if unbatched:
            return torch.randn(n, d)
        return torch.randn(b, n, d) if batch_first else torch.randn(n, b, d)
    x, memory = sequence(t), sequence(s)
    masks = [right_padding(b, t), right_padding(b, s).flip(0)] if padded else [None, None]
    if padded and unbatched:
        masks = [mask[-1] for mask in masks]
    y = m(x, memory, tgt_mask=causal_mask(t) if causal else None, tgt_key_padding_mask=masks[0],
          memory_key_padding_mask=masks[1])
    spec = {"type": "transformer_decoder_layer", "d_model": d, "nhead": heads, "dim_feedforward": ff,
            "activation": activation, "batch_first": batch_first, "norm_first": norm_first, "causal": causal}
    if padded:
        spec.update({"tgt_key_padding_mask": {"input": 2}, "memory_key_padding_mask": {"input": 3}})
    return {"name": f"decoder {activation} norm_first={norm_first} batch_first={batch_first} causal={causal} "
                    f"unbatched={unbatched} padded={padded}",
            "spec": [spec], "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()},
            "inputs": [tensor(x), tensor(memory)] + ([tensor(mask) for mask in masks] if padded else []),
            "output": tensor(y)}


class TinyGpt(nn.Module):
    """embedding -> learned positions -> 2 pre-norm causal blocks -> layer norm -> tied head,
    with attribute names that make its state dict the spec model's ("0.weight", "2.self_attn...")."""

    def __init__(self, vocab, d, heads, ff, positions):
        super().__init__()
        self.layers = nn.ModuleDict({
            "0": nn.Embedding(vocab, d),
            "2": nn.TransformerEncoderLayer(d, heads, ff, activation="gelu", batch_first=True, norm_first=True),
            "3": nn.TransformerEncoderLayer(d, heads, ff, activation="gelu", batch_first=True, norm_first=True),
            "4": nn.LayerNorm(d),
        })
        self.positions = nn.Parameter(torch.randn(positions, d))

    def forward(self, ids):
        t = ids.shape[1]
        h = self.layers["0"](ids) + self.positions[:t]
        for block in ("2", "3"):
            h = self.layers[block](h, src_mask=causal_mask(t))
        return self.layers["4"](h) @ self.layers["0"].weight.T

    def flat_state(self):
        state = dict(self.layers.state_dict())
        state["1.weight"] = self.positions
        return state


def gpt_case(vocab=16, d=8, heads=2, ff=16, positions=12):
    m = perturbed(TinyGpt(vocab, d, heads, ff, positions)).eval()
    ids = torch.randint(0, vocab, (2, 7))
    y = m(ids)
    block = {"type": "transformer_encoder_layer", "d_model": d, "nhead": heads, "dim_feedforward": ff,
             "activation": "gelu", "batch_first": True, "norm_first": True, "causal": True}
    spec = [{"type": "embedding", "num_embeddings": vocab, "embedding_dim": d},
            {"type": "positional_embedding", "num_embeddings": positions, "embedding_dim": d},
            block, block, {"type": "layernorm", "normalized_shape": d}, {"type": "tied_linear", "tie_to": 0}]
    return {"name": "tiny gpt", "spec": spec, "state": {k: tensor(v) for k, v in m.flat_state().items()},
            "inputs": [tensor(ids)], "output": tensor(y)}


class TinySeq2Seq(nn.Module):
    """source embedding -> encoder layer -> target embedding -> 2 causal decoder layers over the
    encoder's output -> linear, named as the spec model's layers ("0.weight", "3.multihead_attn...")."""

    def __init__(self, vocab, d, heads, ff):
        super().__init__()
        decoder = lambda: nn.TransformerDecoderLayer(d, heads, ff, batch_first=True, norm_first=True)
        self.layers = nn.ModuleDict({
            "0": nn.Embedding(vocab, d),
            "1": nn.TransformerEncoderLayer(d, heads, ff, batch_first=True),
            "2": nn.Embedding(vocab, d),
            "3": decoder(),
            "4": decoder(),
            "5": nn.Linear(d, vocab),
        })

    def forward(self, source, target):
        memory = self.layers["1"](self.layers["0"](source))
        h = self.layers["2"](target)
        for block in ("3", "4"):
            h = self.layers[block](h, memory, tgt_mask=causal_mask(target.shape[1]))
        return self.layers["5"](h)


def seq2seq_case(vocab=11, d=8, heads=2, ff=16):
    m = perturbed(TinySeq2Seq(vocab, d, heads, ff)).eval()
    source, target = torch.randint(0, vocab, (2, 6)), torch.randint(0, vocab, (2, 5))
    y = m(source, target)
    decoder = {"type": "transformer_decoder_layer", "d_model": d, "nhead": heads, "dim_feedforward": ff,
               "batch_first": True, "norm_first": True, "causal": True, "memory": {"layer": 1}}
    spec = [{"type": "embedding", "num_embeddings": vocab, "embedding_dim": d},
            {"type": "transformer_encoder_layer", "d_model": d, "nhead": heads, "dim_feedforward": ff,
             "batch_first": True},
            {"type": "embedding", "num_embeddings": vocab, "embedding_dim": d, "from": {"input": 1}},
            decoder, decoder, {"type": "linear", "in_features": d, "out_features": vocab}]
    return {"name": "tiny encoder-decoder", "spec": spec,
            "state": {k: tensor(v) for k, v in m.layers.state_dict().items()},
            "inputs": [tensor(source), tensor(target)], "output": tensor(y)}


def sinusoidal_case(d=6, t=9):
    # The formula as "Attention Is All You Need" (and PyTorch's tutorial) writes it.
    position = torch.arange(t, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(t, d)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    x = torch.randn(2, t, d)
    return {"name": "sinusoidal", "spec": [{"type": "sinusoidal_positional_encoding", "embedding_dim": d}],
            "state": {}, "inputs": [tensor(x)], "output": tensor(x + pe)}


def initialisation_case(decoder, seed=7, d=16, heads=4, ff=32, bias=True):
    # A fresh layer's weights after torch.manual_seed(seed): the spec model draws the same numbers.
    torch.manual_seed(seed)
    m = (nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer)(d, heads, ff)
    if not bias:
        m = biasless(m, seed)
    kind = "transformer_decoder_layer" if decoder else "transformer_encoder_layer"
    spec = {"type": kind, "d_model": d, "nhead": heads, "dim_feedforward": ff}
    if not bias:
        spec["bias"] = False
    return {"name": kind + ("" if bias else " bias=False"), "seed": seed, "spec": [spec],
            "state": {"0." + k: tensor(v) for k, v in m.state_dict().items()}}


def plain_initialisation_case(seed=11):
    # The plain layers' draws too (conv2d, batchnorm2d, linear, layernorm, embedding), built in order.
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 16),
                      nn.LayerNorm(16), nn.Linear(16, 3), nn.Embedding(5, 3))
    spec = [{"type": "conv2d", "in_channels": 1, "out_channels": 4, "kernel_size": 3},
            {"type": "batchnorm2d", "num_features": 4}, {"type": "relu"}, {"type": "flatten"},
            {"type": "linear", "in_features": 144, "out_features": 16}, {"type": "layernorm", "normalized_shape": 16},
            {"type": "linear", "in_features": 16, "out_features": 3},
            {"type": "embedding", "num_embeddings": 5, "embedding_dim": 3}]
    return {"name": "plain layers", "seed": seed, "spec": spec,
            "state": {k: tensor(v) for k, v in m.named_parameters()}}


class LayerNormWithoutBias(nn.Module):
    """PyTorch 2.1's nn.LayerNorm(bias=False): the weight alone (restated for older torch)."""

    def __init__(self, shape, eps=1e-5):
        super().__init__()
        self.shape, self.eps = tuple(shape), eps
        self.weight = nn.Parameter(torch.ones(shape))

    def forward(self, x):
        return nn.functional.layer_norm(x, self.shape, self.weight, None, self.eps)


def biasless(layer, seed=None):
    """PyTorch 2.1's Transformer{En,De}coderLayer(bias=False), restated for older torch: attentions,
    linear layers and norms without biases, built in the layer's order (after torch.manual_seed(seed)
    where given, the draws of a fresh layer)."""
    attention = layer.self_attn
    d, heads, p = attention.embed_dim, attention.num_heads, attention.dropout
    if seed is not None:
        torch.manual_seed(seed)
    def mha():
        return nn.MultiheadAttention(d, heads, dropout=p, bias=False, batch_first=attention.batch_first)
    layer.self_attn = mha()
    if hasattr(layer, "multihead_attn"):
        layer.multihead_attn = mha()
    ff = layer.linear1.out_features
    layer.linear1, layer.linear2 = nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)
    for name in ("norm1", "norm2", "norm3"):
        if hasattr(layer, name):
            setattr(layer, name, LayerNormWithoutBias([d], getattr(layer, name).eps))
    return layer


class TiedHead(nn.Module):
    """A head computing with its embedding's weight and a bias of its own, which it draws as
    nn.Linear draws a bias (the embedding's width the fan-in): where it stands among the layers."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = [embedding]  # (not a submodule: the weight is listed once, as the embedding's)
        self.bias = nn.Parameter(torch.empty(embedding.num_embeddings))
        bound = 1 / embedding.embedding_dim ** 0.5
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return nn.functional.linear(x, self.embedding[0].weight, self.bias)


def tied_initialisation_case(seed=13):
    # A tied head with a bias, a layer after it: the bias is drawn at the head's place.
    torch.manual_seed(seed)
    embedding = nn.Embedding(10, 4)
    m = nn.Sequential(embedding, TiedHead(embedding), nn.Linear(10, 3))
    spec = [{"type": "embedding", "num_embeddings": 10, "embedding_dim": 4},
            {"type": "tied_linear", "tie_to": 0, "bias": True},
            {"type": "linear", "in_features": 10, "out_features": 3}]
    return {"name": "tied head with a bias", "seed": seed, "spec": spec,
            "state": {k: tensor(v) for k, v in m.named_parameters()}}


def gradient_case(name, module, spec, inputs, run):
    """The layer in training (dropout 0; attention without its weights, as transformer layers call
    it, which PyTorch 2.x runs through scaled_dot_product_attention): its output and each parameter's
    gradient of the MSE to a
    random target, which the spec model reproduces bit for bit (its products sum their rows in
    PyTorch's order: sequence-first inside attention, the input's layout around it)."""
    module = perturbed(module).train()
    y = run(module)
    target = torch.randn_like(y)
    torch.nn.functional.mse_loss(y, target).backward()
    return {"name": "train " + name, "spec": [spec], "state": {"0." + k: tensor(v) for k, v in module.state_dict().items()},
            "inputs": [tensor(x) for x in inputs], "output": tensor(y), "target": tensor(target),
            "grads": {"0." + k: tensor(p.grad) for k, p in module.named_parameters()}}


def gradient_cases(t=5, s=4, b=3, e=8, heads=2, ff=16):
    def sequence(n, batch_first, unbatched=False):
        if unbatched:
            return torch.randn(n, e)
        return torch.randn(b, n, e) if batch_first else torch.randn(n, b, e)
    cases = []
    for batch_first, causal in [(False, False), (True, True)]:
        x = sequence(t, batch_first)
        spec = {"type": "multihead_attention", "embed_dim": e, "num_heads": heads, "batch_first": batch_first,
                "causal": causal}
        cases.append(gradient_case(f"mha batch_first={batch_first} causal={causal}",
                                   nn.MultiheadAttention(e, heads, batch_first=batch_first), spec, [x],
                                   lambda m: m(x, x, x, attn_mask=causal_mask(t) if causal else None,
                                                       need_weights=False)[0]))
    x, memory, mask = sequence(t, True), sequence(s, True), right_padding(b, s)
    spec = {"type": "multihead_attention", "embed_dim": e, "num_heads": heads, "batch_first": True,
            "key_value": {"input": 1}, "key_padding_mask": {"input": 2}}
    cases.append(gradient_case("padded cross mha batch_first=True", nn.MultiheadAttention(e, heads, batch_first=True),
                               spec, [x, memory, mask], lambda m: m(x, memory, memory, key_padding_mask=mask, need_weights=False)[0]))
    for activation, norm_first, batch_first, causal, unbatched in [("relu", False, False, False, False),
                                                                   ("gelu", True, True, True, False),
                                                                   ("relu", False, True, False, True),
                                                                   # (the input's gradient reaches norm1: PyTorch
                                                                   # projects an unbatched q, k, v apart)
                                                                   ("relu", True, False, False, True)]:
        x = sequence(t, batch_first, unbatched)
        spec = {"type": "transformer_encoder_layer", "d_model": e, "nhead": heads, "dim_feedforward": ff,
                "dropout": 0.0, "activation": activation, "batch_first": batch_first, "norm_first": norm_first,
                "causal": causal}
        layer = nn.TransformerEncoderLayer(e, heads, ff, dropout=0.0, activation=activation, batch_first=batch_first,
                                           norm_first=norm_first)
        cases.append(gradient_case(f"encoder {activation} norm_first={norm_first} batch_first={batch_first} "
                                   f"causal={causal} unbatched={unbatched}", layer, spec, [x],
                                   lambda m: m(x, src_mask=causal_mask(t) if causal else None)))
    for batch_first in (True, False):
        x, memory = sequence(t, batch_first), sequence(s, batch_first)
        masks = [right_padding(b, t), right_padding(b, s).flip(0)]
        spec = {"type": "transformer_decoder_layer", "d_model": e, "nhead": heads, "dim_feedforward": ff,
                "dropout": 0.0, "batch_first": batch_first, "causal": True,
                "tgt_key_padding_mask": {"input": 2}, "memory_key_padding_mask": {"input": 3}}
        layer = nn.TransformerDecoderLayer(e, heads, ff, dropout=0.0, batch_first=batch_first)
        cases.append(gradient_case(f"padded causal decoder batch_first={batch_first}", layer, spec,
                                   [x, memory] + masks,
                                   lambda m: m(x, memory, tgt_mask=causal_mask(t), tgt_key_padding_mask=masks[0],
                                               memory_key_padding_mask=masks[1])))
    # PyTorch 2.1's bias=False: no attention, linear or norm bias.
    x, memory = sequence(t, True), sequence(s, True)
    spec = {"type": "transformer_encoder_layer", "d_model": e, "nhead": heads, "dim_feedforward": ff,
            "dropout": 0.0, "batch_first": True, "norm_first": True, "causal": True, "bias": False}
    layer = biasless(nn.TransformerEncoderLayer(e, heads, ff, dropout=0.0, batch_first=True, norm_first=True))
    cases.append(gradient_case("causal encoder bias=False", layer, spec, [x],
                               lambda m: m(x, src_mask=causal_mask(t))))
    spec = {"type": "transformer_decoder_layer", "d_model": e, "nhead": heads, "dim_feedforward": ff,
            "dropout": 0.0, "batch_first": True, "bias": False}
    layer = biasless(nn.TransformerDecoderLayer(e, heads, ff, dropout=0.0, batch_first=True))
    cases.append(gradient_case("decoder bias=False", layer, spec, [x, memory], lambda m: m(x, memory)))
    x, memory = sequence(t, False, True), sequence(s, False, True)
    spec = {"type": "transformer_decoder_layer", "d_model": e, "nhead": heads, "dim_feedforward": ff,
            "dropout": 0.0, "norm_first": True, "causal": True}
    layer = nn.TransformerDecoderLayer(e, heads, ff, dropout=0.0, norm_first=True)
    cases.append(gradient_case("unbatched causal decoder norm_first=True", layer, spec, [x, memory],
                               lambda m: m(x, memory, tgt_mask=causal_mask(t))))
    # A linear layer on 3-D input: Python's F.linear fuses the bias into one product (at::linear).
    x = torch.randn(2, 3, 3072)
    cases.append(gradient_case("linear 3-D input", nn.Linear(3072, 4),
                               {"type": "linear", "in_features": 3072, "out_features": 4}, [x], lambda m: m(x)))
    # Paddings PyTorch names: "same" (an even kernel pads one more after) and "valid".
    x = torch.randn(2, 2, 7, 6)
    cases.append(gradient_case("conv2d padding same", nn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2)),
                               {"type": "conv2d", "in_channels": 2, "out_channels": 3, "kernel_size": [4, 3],
                                "padding": "same", "dilation": [1, 2]}, [x], lambda m: m(x)))
    cases.append(gradient_case("conv2d padding valid", nn.Conv2d(2, 3, 3, padding="valid"),
                               {"type": "conv2d", "in_channels": 2, "out_channels": 3, "kernel_size": 3,
                                "padding": "valid"}, [x], lambda m: m(x)))
    # A layer norm without its bias (PyTorch 2.1's bias=False).
    x3 = torch.randn(2, 3, 6)
    cases.append(gradient_case("layernorm bias=False", LayerNormWithoutBias([3, 6]),
                               {"type": "layernorm", "normalized_shape": [3, 6], "bias": False}, [x3], lambda m: m(x3)))
    # The other padding modes: F.pad first, then the convolution without padding.
    for mode, padding, kernel in [("reflect", [1, 2], [3, 3]), ("replicate", 1, [3, 2]), ("circular", "same", [4, 3])]:
        cases.append(gradient_case(f"conv2d padding_mode {mode}",
                                   nn.Conv2d(2, 3, kernel, padding=padding, padding_mode=mode),
                                   {"type": "conv2d", "in_channels": 2, "out_channels": 3, "kernel_size": kernel,
                                    "padding": padding, "padding_mode": mode}, [x], lambda m: m(x)))
    return cases


def main(out_dir):
    torch.manual_seed(0)
    cases = [mha_case(False, False, True), mha_case(True, True, True), mha_case(True, False, False),
             mha_case(False, True, True)]
    for activation, norm_first, batch_first, causal in [("relu", False, False, False), ("gelu", True, True, True),
                                                        ("relu", True, False, True), ("gelu", False, True, False)]:
        cases.append(encoder_case(activation, norm_first, batch_first, causal))
    cases += [cross_mha_case(True, True), cross_mha_case(False, False)]
    for activation, norm_first, batch_first, causal in [("relu", False, False, True), ("gelu", True, True, True),
                                                        ("relu", True, False, False), ("gelu", False, True, False)]:
        cases.append(decoder_case(activation, norm_first, batch_first, causal))
    cases.append(decoder_case("relu", True, True, True, unbatched=True))
    # Padding masks (issue 19): self and cross, bool and float, with and without the causal mask.
    for batch_first, causal, cross, float_mask in [(True, False, False, False), (False, True, False, False),
                                                   (True, False, True, False), (False, False, True, False),
                                                   (True, False, False, True), (False, True, False, True)]:
        cases.append(padded_mha_case(batch_first, causal, cross, float_mask))
    cases.append(padded_mha_case(False, True, False, unbatched=True))
    cases.append(padded_mha_case(True, False, False, all_masked=True))
    for activation, norm_first, batch_first, causal, float_mask in [("relu", False, False, False, False),
                                                                    ("gelu", True, True, True, False),
                                                                    ("relu", True, True, False, True)]:
        cases.append(encoder_case(activation, norm_first, batch_first, causal, padded=True, float_mask=float_mask))
    for activation, norm_first, batch_first, causal in [("relu", False, False, True), ("gelu", True, True, False)]:
        cases.append(decoder_case(activation, norm_first, batch_first, causal, padded=True))
    cases.append(decoder_case("relu", False, True, True, unbatched=True, padded=True))
    cases.append(gpt_case())
    cases.append(seq2seq_case())
    cases.append(sinusoidal_case())
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    initialisations = [initialisation_case(False), initialisation_case(True), plain_initialisation_case(),
                       tied_initialisation_case(), initialisation_case(True, bias=False)]
    (Path(out_dir) / "transformer_cases.json").write_text(
        json.dumps({"torch": torch.__version__, "cases": cases, "initialisations": initialisations,
                    "gradient_cases": gradient_cases()}))


if __name__ == "__main__":
    main(sys.argv[1])
