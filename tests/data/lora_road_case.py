"""PEFT's RoAd restated (peft/tuners/road/layer.py and model.py; PEFT is not packaged for Debian), for
tests/capi/test_road.cpp. Each targeted nn.Linear, in named_modules() order, holds road_theta and
road_alpha (out / 2 each for variant road_1, out for road_2, 2 out for road_4): zeros and ones, or with
init_weights False nn.init.normal_(theta, 0, 0.5) then normal_(alpha, 1, 0.5) from the global
generator. Its forward takes the base layer's output (bias included) in theta's dtype, viewed as groups
of group_size whose halves pair up, and returns y * first + rotate_half(y) * second in the output's
dtype (first = alpha cos theta, second = alpha sin theta as _prepare_cols spreads them); disabled, the
output as it is. Merging multiplies the weight and the bias by _get_delta_weight's rotation matrix.
Written: road_model.pt and three cases ("road_1": group_size 4 on the three layers, drawn, a 3-D input;
"road_4": group_size 4 on fc1 and fc2, drawn; "road_2": group_size 2 on fc1 and head, zeros and ones).
"""
import torch

from lora_miss_case import ThreeLinears
from peft_restated import adamw_mse_losses, eval_and_autocast_outputs, hooked_forward, saved_frozen, seeded_backward, tensor


def sizes(variant, out):
    return {"road_1": out // 2, "road_2": out, "road_4": 2 * out}[variant]


def make_layers(model, targets, config):
    layers = {}
    for name, module in model.named_modules():
        if name not in targets:
            continue
        size = sizes(config["variant"], module.out_features)
        theta, alpha = torch.empty(size), torch.empty(size)
        if config["init_weights"]:
            torch.nn.init.zeros_(theta)
            torch.nn.init.ones_(alpha)
        else:
            torch.nn.init.normal_(theta, mean=0.0, std=0.5)
            torch.nn.init.normal_(alpha, mean=1.0, std=0.5)
        layers[name] = {"theta": theta, "alpha": alpha}
    return layers


def prepare_cols(variant, group_size, theta, alpha):
    if variant == "road_1":
        theta = theta.reshape(-1, group_size // 2).repeat_interleave(2, dim=0).flatten()
        alpha = alpha.reshape(-1, group_size // 2).repeat_interleave(2, dim=0).flatten()
        return alpha * theta.cos(), alpha * theta.sin()
    if variant == "road_2":
        return alpha * theta.cos(), alpha * theta.sin()
    theta = theta.reshape(-1, 2, group_size)
    alpha = alpha.reshape(-1, 2, group_size)
    return (alpha[:, 0, :].flatten() * theta[:, 0, :].cos().flatten(),
            alpha[:, 1, :].flatten() * theta[:, 1, :].sin().flatten())


def apply_road(config, layer, x):
    first, second = prepare_cols(config["variant"], config["group_size"], layer["theta"], layer["alpha"])
    grouped = x.reshape(-1, 2, config["group_size"] // 2)
    rotate_half = torch.stack((-grouped[:, 1, :], grouped[:, 0, :]), dim=1).reshape(x.shape)
    return x * first + rotate_half * second


def rotation(config, layer):
    first, second = prepare_cols(config["variant"], config["group_size"], layer["theta"], layer["alpha"])
    half = config["group_size"] // 2
    r = torch.diag(first)
    size = second.shape[0]
    swapped = second.reshape(-1, 2, half)[:, [1, 0], :].flatten()
    paired = torch.diag(swapped).reshape(-1, 2, half, size)[:, [1, 0], :, :]
    paired[:, 0, :, :] *= -1
    return r + paired.reshape(size, size)


def forward(model, layers, x, training, config):
    def hook(layer):
        def rotate(module, inputs, output):
            dtype = output.dtype
            y = output.to(layer["theta"].dtype) if output.dtype != layer["theta"].dtype else output
            return apply_road(config, layer, y).to(dtype)
        return rotate
    return hooked_forward(model, {n: hook(layer) for n, layer in layers.items()}, x, training)


TRAINED = ("theta", "alpha")


def named(layers):
    return {f"{n}.road_{k}": tensor(layer[k]) for n, layer in layers.items() for k in TRAINED}


def one_case(model, targets, config, g):
    modules = dict(model.named_modules())
    torch.manual_seed(config["seed"])
    chosen = make_layers(model, targets, config)
    next_draw = torch.rand(3)

    def copies():
        return {n: {k: layer[k].detach().clone().requires_grad_() for k in TRAINED} for n, layer in chosen.items()}

    def grads_of(layers):
        return {f"{n}.road_{k}": tensor(layer[k].grad) for n, layer in layers.items() for k in TRAINED}

    x = torch.randn(*config["input_shape"], generator=g)
    target = torch.randn(*config["input_shape"][:-1], 4, generator=g)
    eval_output, autocast_enabled, autocast_disabled = eval_and_autocast_outputs(
        model, lambda: forward(model, chosen, x, False, config), x)
    low = copies()
    autocast_train_output = seeded_backward(lambda: forward(model, low, x, True, config), config["train_seed"], True)
    autocast_grads = grads_of(low)
    trained_now = copies()
    train_output = seeded_backward(lambda: forward(model, trained_now, x, True, config), config["train_seed"])
    grads = grads_of(trained_now)
    merged = {}
    with torch.no_grad():
        for n, layer in chosen.items():
            r = rotation(config, layer)
            merged[n + ".weight"] = tensor(torch.matmul(r, modules[n].weight).contiguous())
            merged[n + ".bias"] = tensor(torch.matmul(r, modules[n].bias).contiguous())
    trained = copies()
    losses = adamw_mse_losses(lambda: forward(model, trained, x, True, config),
                              [layer[k] for layer in trained.values() for k in TRAINED], target, config["train_seed"])
    return dict(config, targets=",".join(targets), next_draw=tensor(next_draw), chosen=named(chosen),
                input=tensor(x), target=tensor(target), eval_output=tensor(eval_output),
                autocast_output=tensor(autocast_enabled.float()),
                autocast_disabled_output=tensor(autocast_disabled.float()),
                autocast_dtypes=[str(autocast_enabled.dtype), str(autocast_disabled.dtype)],
                train_output=tensor(train_output), grads=grads,
                autocast_train_output=tensor(autocast_train_output.float()), autocast_grads=autocast_grads,
                merged=merged, losses=losses, trained=named(trained))


def road_case(out):
    model = saved_frozen(ThreeLinears, 409, out / "road_model.pt")
    g = torch.Generator().manual_seed(419)
    road_1 = {"variant": "road_1", "group_size": 4, "init_weights": False, "seed": 421, "train_seed": 431,
              "input_shape": [5, 3, 6]}
    road_4 = {"variant": "road_4", "group_size": 4, "init_weights": False, "seed": 433, "train_seed": 439,
              "input_shape": [5, 6]}
    road_2 = {"variant": "road_2", "group_size": 2, "init_weights": True, "seed": 443, "train_seed": 449,
              "input_shape": [5, 6]}
    return {"road_1": one_case(model, ["fc1", "fc2", "head"], road_1, g),
            "road_4": one_case(model, ["fc1", "fc2"], road_4, g),
            "road_2": one_case(model, ["fc1", "head"], road_2, g)}
