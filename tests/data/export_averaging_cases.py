"""Averages PyTorch's AveragedModel (torch.optim.swa_utils) keeps, for tests/capi/test_averaging.cpp to
reproduce bit for bit: a TorchScript model (Linear, BatchNorm1d with its int64 num_batches_tracked,
Linear, and a float64 buffer; fc1's bias frozen) is given a sequence of states, and after each,
update_parameters runs; the averaged module's state is recorded after every update, for SWA and EMA,
with and without use_buffers. The same for diffusers' EMAModel (restated below: diffusers is not in
Debian), with its decay's default warm-up and its use_ema_warmup one. Values are written as
float.hex() strings (exact); int64 ones as numbers. "update_bn": swa_utils.update_bn over a
DataLoader (batches of 4 of 10 samples) on an nn.Sequential that a layer spec builds alike (dropout
before a BatchNorm1d, and a second one without affine and with momentum 0.3), in eval mode before:
its state after, a draw of torch.rand after it (the global generator's use), and its state after one
more training forward (the momentum given back).

Before 2.1 PyTorch has no get_ema_multi_avg_fn: EMA cases use the arithmetic it does tensor by
tensor (lerp for floating tensors, avg * decay + value * (1 - decay) otherwise), as ours does there.
Before 2.0 AveragedModel left the buffers as it copied them when made (pytorch#84053, fixed in 2.0):
ours keeps them in step with the model as 2.x does, and so does this script there, by hand.

Run with Debian's python3-torch: python3 export_averaging_cases.py OUTPUT_DIR [DEVICE]. On a CUDA
DEVICE the averages live there, where PyTorch 2.x averages SWA with its foreach lerp.
"""
import json
import sys
from pathlib import Path

import torch
from torch.optim import swa_utils

UPDATES = 5
FROZEN = ["fc1.bias"]
CASES = [{}, {"use_buffers": True}, {"strategy": "ema", "decay": 0.9},
         {"strategy": "ema", "decay": 0.75, "use_buffers": True},
         {"strategy": "diffusers_ema", "decay": 0.9},
         {"strategy": "diffusers_ema", "decay": 0.95, "min_decay": 0.1, "update_after_step": 1, "use_ema_warmup": True,
          "inv_gamma": 2.0, "power": 0.75}]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.fc2 = torch.nn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2, dtype=torch.float64))

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x)))) * self.scale


def encode(t):
    t = t.detach().cpu()
    values = t.flatten().tolist()
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "values": values if t.dtype == torch.int64 else [float(v).hex() for v in values]}


def states(model):
    """UPDATES successive states: every floating tensor moved by noise, num_batches_tracked counted on."""
    g = torch.Generator().manual_seed(3)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    out = []
    for _ in range(UPDATES):
        for k, v in state.items():
            if v.is_floating_point():
                state[k] = v + torch.randn(v.shape, generator=g, dtype=v.dtype)
            else:
                state[k] = v + 3
        out.append({k: v.clone() for k, v in state.items()})
    return out


class DiffusersEma:
    """diffusers' EMAModel (diffusers/training_utils.py, foreach False, its default), restated: a
    shadow copy of the parameters, stepped after each optimizer step with a decay that warms up."""

    def __init__(self, parameters, decay=0.9999, min_decay=0.0, update_after_step=0, use_ema_warmup=False,
                 inv_gamma=1.0, power=2 / 3, **_):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay, self.min_decay, self.update_after_step = decay, min_decay, update_after_step
        self.use_ema_warmup, self.inv_gamma, self.power = use_ema_warmup, inv_gamma, power
        self.optimization_step = 0

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - self.update_after_step - 1)
        if step <= 0:
            return 0.0
        if self.use_ema_warmup:
            cur_decay_value = 1 - (1 + step / self.inv_gamma) ** -self.power
        else:
            cur_decay_value = (1 + step) / (10 + step)
        cur_decay_value = min(cur_decay_value, self.decay)
        return max(cur_decay_value, self.min_decay)

    @torch.no_grad()
    def step(self, parameters):
        self.optimization_step += 1
        one_minus_decay = 1 - self.get_decay(self.optimization_step)
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                s_param.sub_(one_minus_decay * (s_param - param))
            else:
                s_param.copy_(param)


def diffusers_updates(model, sequence, case):
    """EMAModel's shadow parameters after each step, with the model's buffers (ours keeps them)."""
    ema = DiffusersEma(model.parameters(), **case)
    updates = []
    for state in sequence:
        model.load_state_dict(state)
        ema.step(model.parameters())
        averages = {k: encode(v) for k, v in model.state_dict().items()}
        for (name, _), shadow in zip(model.named_parameters(), ema.shadow_params):
            averages[name] = encode(shadow)
        updates.append({"n_averaged": ema.optimization_step, "averages": averages})
    return updates


def averaging(case):
    if case.get("strategy") != "ema":
        return {}
    decay = case["decay"]
    if hasattr(swa_utils, "get_ema_multi_avg_fn"):
        return {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(decay)}
    return {"avg_fn": lambda avg, value, n: torch.lerp(avg, value, 1 - decay) if avg.is_floating_point()
            else avg * decay + value * (1 - decay)}


BN_SPEC = [{"type": "linear", "in_features": 3, "out_features": 4}, {"type": "dropout", "p": 0.3},
           {"type": "batchnorm1d", "num_features": 4}, {"type": "relu"},
           {"type": "linear", "in_features": 4, "out_features": 2},
           {"type": "batchnorm1d", "num_features": 2, "momentum": 0.3, "affine": False}]


def update_bn_case():
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.3), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2), torch.nn.BatchNorm1d(2, momentum=0.3, affine=False))
    x, y = torch.randn(10, 3), torch.randn(10, 2)
    with torch.no_grad():  # statistics that update_bn must reset
        model[2].running_mean.fill_(5.0)
        model[5].num_batches_tracked.fill_(9)
    initial = {k: encode(v) for k, v in model.state_dict().items()}
    model.eval()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    torch.manual_seed(11)
    swa_utils.update_bn(loader, model)
    after = {k: encode(v) for k, v in model.state_dict().items()}
    training = model.training
    draw = encode(torch.rand(3))
    model.train()
    model(x[:4])
    return {"spec": BN_SPEC, "initial": initial, "x": encode(x), "y": encode(y), "seed": 11, "batch_size": 4,
            "after": after, "training_after": training, "rand_after": draw,
            "after_train_forward": {k: encode(v) for k, v in model.state_dict().items()}}


def main(out_dir, device="cpu"):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Net()
    torch.jit.script(model).save(str(out / "averaging_model.pt"))
    sequence = states(model)
    model.to(device)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in FROZEN)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    cases = []
    for case in CASES:
        model.load_state_dict(initial)  # each case starts from the saved model, as ours does
        if case.get("strategy") == "diffusers_ema":
            cases.append({"options": case, "updates": diffusers_updates(model, sequence, case)})
            continue
        averaged = swa_utils.AveragedModel(model, use_buffers=case.get("use_buffers", False), **averaging(case))
        updates = []
        for state in sequence:
            model.load_state_dict(state)
            try:
                averaged.update_parameters(model)
            except RuntimeError as error:
                # PyTorch 2.11 on CUDA: its foreach SWA update divides the integer buffers too
                # (BatchNorm's num_batches_tracked, with use_buffers) and refuses.
                updates = str(error).split(".")[0]
                break
            if not case.get("use_buffers") and int(torch.__version__.split(".")[0]) < 2:
                for mine, theirs in zip(averaged.module.buffers(), model.buffers()):
                    mine.copy_(theirs)
            updates.append({"n_averaged": int(averaged.n_averaged),
                            "averages": {k: encode(v) for k, v in averaged.module.state_dict().items()}})
        cases.append({"options": case, "pytorch_refused": updates} if isinstance(updates, str)
                     else {"options": case, "updates": updates})
    data = {"torch": torch.__version__, "device": device, "frozen": FROZEN,
            "states": [{k: encode(v) for k, v in s.items()} for s in sequence], "cases": cases,
            "update_bn": update_bn_case()}
    (out / "averaging_cases.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(*sys.argv[1:])
