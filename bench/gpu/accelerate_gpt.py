#!/usr/bin/env python3
"""Variant (c) of the GPU benchmark: Python Accelerate trains the same TorchScript decoder on the same
token batches as bench_gpu's (a) and (b), with the same loop and the same timing.

    accelerate_gpt.py --model gpt.pt --tokens tokens.bin --batch 8 --context 1024 \\
        [--precision bf16|fp16|fp32] [--steps 30] [--warmup 5] [--device cuda|cpu] [--json FILE]

tokens.bin is what `bench_gpu --tokens-out` wrote: int64 [batches, batch, context + 1], raw. Inputs
are the first `context` tokens of a batch, targets the next-token shift flattened to [batch*context]
(the model returns logits [batch*context, vocab]).

The loop: Accelerator(mixed_precision=...), torch.jit.load onto the accelerator's device,
torch.optim.AdamW(lr 3e-4, weight_decay 0.01, PyTorch's defaults otherwise), accelerator.prepare,
then per step model(x), F.cross_entropy, accelerator.backward, optimizer.step, optimizer.zero_grad,
with torch.cuda.synchronize() after each step. Peak memory: torch.cuda.max_memory_allocated /
max_memory_reserved since the reset before the model was loaded.

--without-accelerate runs the same loop with plain PyTorch (torch.autocast, and a GradScaler for
fp16) instead of Accelerate: a check of this script where Accelerate is not installed (the CPU smoke
test), not a benchmark variant.

Exit status: 0 done, 1 failed, 3 Accelerate is not importable. The JSON is written in every case.
"""
import argparse
import json
import math
import statistics
import sys
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--context", type=int, required=True)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32", "no"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--foreach", default="default", choices=["default", "on", "off"],
                    help="AdamW's foreach: PyTorch's choice (multi-tensor kernels on the GPU), or forced")
    ap.add_argument("--json")
    ap.add_argument("--without-accelerate", action="store_true")
    return ap.parse_args()


class PlainStandIn:
    """What the loop needs of an Accelerator, in plain PyTorch (for --without-accelerate)."""

    def __init__(self, torch, mixed_precision, cpu):
        self.torch = torch
        self.device = torch.device("cpu" if cpu else "cuda")
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed_precision)
        self.scaler = None
        if mixed_precision == "fp16":
            amp = getattr(torch, "amp", None)
            self.scaler = amp.GradScaler("cuda") if hasattr(amp, "GradScaler") else torch.cuda.amp.GradScaler()

    def prepare(self, model, opt):
        if self.dtype is not None:  # autocast around forward, fp32 outputs: what Accelerate does
            inner, torch, device_type, dtype = model.forward, self.torch, self.device.type, self.dtype

            def forward(*args):
                with torch.autocast(device_type=device_type, dtype=dtype):
                    out = inner(*args)
                return out.float()

            model.forward = forward
        return model, opt

    def backward(self, loss):
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def optimizer_step(self, opt):
        """Steps; returns whether the step was skipped (fp16 overflow)."""
        if self.scaler is None:
            opt.step()
            return False
        before = self.scaler.get_scale()
        self.scaler.step(opt)
        self.scaler.update()
        return self.scaler.get_scale() < before


def main():
    args = parse_args()
    precision = "fp32" if args.precision == "no" else args.precision
    result = {"bench": "accelerate_gpt", "variant": "c", "name": "(c) Python Accelerate", "ok": False,
              "precision": precision, "device": args.device, "batch": args.batch, "context": args.context,
              "steps": args.steps, "warmup": args.warmup, "lr": args.lr, "weight_decay": args.weight_decay,
              "model": args.model, "without_accelerate": args.without_accelerate, "foreach": args.foreach}
    if args.foreach != "default":
        result["name"] += f" (AdamW foreach={args.foreach})"
    status = 1

    def write():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
                f.write("\n")

    try:
        import torch
        import torch.nn.functional as F
        result["torch"] = torch.__version__
        if args.without_accelerate:
            result["name"] = "plain PyTorch stand-in (a check of the script, not Accelerate)"
            accelerator = PlainStandIn(torch, precision if precision != "fp32" else "no", args.device == "cpu")
        else:
            try:
                import accelerate
                from accelerate import Accelerator
            except Exception as e:  # noqa: BLE001 - any import failure means: not available
                result["error"] = f"Python Accelerate is not importable by {sys.executable}: {type(e).__name__}: {e}"
                print(f"accelerate_gpt: {result['error']}", file=sys.stderr)
                write()
                return 3
            result["accelerate"] = accelerate.__version__
            accelerator = Accelerator(mixed_precision=precision if precision != "fp32" else "no",
                                      cpu=args.device == "cpu")
        device = accelerator.device
        cuda = device.type == "cuda"
        if args.device == "cuda" and not cuda:
            raise RuntimeError(f"asked for cuda but the accelerator's device is {device}")
        result["device"] = str(device)
        if cuda:
            result["device_name"] = torch.cuda.get_device_name(device)

        with open(args.tokens, "rb") as f:
            raw = f.read()
        per_batch = args.batch * (args.context + 1) * 8
        if not raw or len(raw) % per_batch:
            raise RuntimeError(f"{args.tokens}: {len(raw)} bytes is not a whole number of [{args.batch}, "
                               f"{args.context + 1}] int64 batches")
        tokens = torch.frombuffer(bytearray(raw), dtype=torch.int64).view(-1, args.batch, args.context + 1)
        result["token_batches"] = tokens.size(0)
        tokens_per_step = args.batch * args.context
        result["tokens_per_step"] = tokens_per_step

        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        setup_start = time.perf_counter()
        model = torch.jit.load(args.model, map_location=device)
        model.train()
        foreach = {"default": None, "on": True, "off": False}[args.foreach]
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, foreach=foreach)
        model, opt = accelerator.prepare(model, opt)
        batches = [(t[:, :args.context].contiguous().to(device), t[:, 1:].reshape(-1).contiguous().to(device))
                   for t in tokens]
        result["parameters"] = sum(p.numel() for p in model.parameters())

        def sync():
            if cuda:
                torch.cuda.synchronize(device)

        sync()
        result["setup_s"] = time.perf_counter() - setup_start

        step_ms = []
        first_loss = None
        skipped = 0
        loss = None
        for i in range(args.warmup + args.steps):
            x, y = batches[i % len(batches)]
            start = time.perf_counter()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            del logits  # as (a) and (b) do: the fp32 logits are not kept through backward
            accelerator.backward(loss)
            if args.without_accelerate:
                skipped += accelerator.optimizer_step(opt)
            else:
                opt.step()  # the prepared optimizer: GradScaler.step and update under fp16
                skipped += bool(getattr(opt, "step_was_skipped", False))
            opt.zero_grad(set_to_none=True)
            sync()
            if i >= args.warmup:
                step_ms.append((time.perf_counter() - start) * 1000.0)
            if i == 0:
                first_loss = loss.item()

        ms = statistics.median(step_ms)
        result.update({
            "ms_per_step": ms,
            "ms_mean": statistics.fmean(step_ms) if hasattr(statistics, "fmean") else sum(step_ms) / len(step_ms),
            "ms_min": min(step_ms),
            "tokens_per_s": tokens_per_step / (ms / 1000.0),
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else -1,
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device) if cuda else -1,
            "first_loss": first_loss,
            "last_loss": loss.item(),
            "skipped_steps": skipped,
            "step_ms": step_ms,
            "ok": True,
        })
        gib = (lambda b: b / 2**30 if b >= 0 else math.nan)
        print(f"accelerate_gpt: {result['name']}, {precision}, {device}, batch {args.batch} x context {args.context}: "
              f"{ms:.2f} ms/step (mean {result['ms_mean']:.2f}), {result['tokens_per_s']:.0f} tokens/s, peak "
              f"{gib(result['peak_allocated_bytes']):.2f} GiB allocated / {gib(result['peak_reserved_bytes']):.2f} GiB "
              f"reserved, loss {first_loss:.4f} -> {result['last_loss']:.4f}"
              + (f", {skipped} skipped steps" if skipped else ""))
        status = 0
    except Exception as e:  # noqa: BLE001 - the failure goes into the JSON
        result["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
        print(f"accelerate_gpt: error: {result['error']}", file=sys.stderr)
        status = 1
    write()
    return status


if __name__ == "__main__":
    sys.exit(main())
