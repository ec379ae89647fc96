"""The Python side of GpuSaveModel.SafetensorsLoadIntoTheSameModuleWithEqualOutputs.

    safetensors_model.py export DIR          writes DIR/model.pt: Net, initialised with seed 0, as TorchScript
    safetensors_model.py check DIR STEPS     loads DIR/saved/model.safetensors (acc_save_model's) with
                                             safetensors.torch.load_file into a fresh Net (strict), and
                                             compares its outputs on DIR/io.safetensors's "x" with "y"

Exits 77 (the test is skipped) when python lacks torch or safetensors.
"""
import sys

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    print(f"SKIPPED: python lacks a package this test needs ({e})")
    sys.exit(77)


class Net(torch.nn.Module):
    """Parameters and buffers of several kinds: nested names, a float buffer, an int64 buffer."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.BatchNorm1d(24), torch.nn.ReLU())
        self.head = torch.nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def export(directory: str) -> None:
    torch.manual_seed(0)
    torch.jit.script(Net()).save(f"{directory}/model.pt")
    print(f"exported {directory}/model.pt with torch {torch.__version__}")


def fail(message: str) -> None:
    print(f"FAILED: {message}")
    sys.exit(1)


def check(directory: str, steps: int) -> None:
    state = load_file(f"{directory}/saved/model.safetensors")
    io = load_file(f"{directory}/io.safetensors")
    torch.manual_seed(1)  # another initialisation: equal outputs come from the loaded weights only
    fresh = Net()
    expected_names = sorted(fresh.state_dict().keys())
    if sorted(state.keys()) != expected_names:
        fail(f"names in model.safetensors {sorted(state.keys())} != the module's {expected_names}")
    for name, tensor in state.items():
        want = fresh.state_dict()[name]
        if tensor.dtype != want.dtype or tensor.shape != want.shape:
            fail(f"{name}: {tensor.dtype} {tuple(tensor.shape)}, the module has {want.dtype} {tuple(want.shape)}")
    fresh.load_state_dict(state, strict=True)
    fresh.eval()

    # The saved weights are the trained ones: they differ from the export's initial weights, and the
    # BatchNorm counted one batch per training step.
    torch.manual_seed(0)
    initial = Net().state_dict()
    if all(torch.equal(state[n], initial[n]) for n in state if state[n].is_floating_point()):
        fail("model.safetensors holds the initial weights, not the trained ones")
    tracked = int(state["encoder.1.num_batches_tracked"])
    if tracked != steps:
        fail(f"encoder.1.num_batches_tracked is {tracked}, the test trained {steps} steps")

    with torch.no_grad():
        out = fresh(io["x"].float())
    want = io["y"]
    if out.shape != want.shape:
        fail(f"outputs of shape {tuple(out.shape)}, the test wrote {tuple(want.shape)}")
    difference = (out - want).abs().max().item()
    print(f"{len(state)} tensors loaded strictly; largest output difference from the GPU's: {difference:.3g}")
    # fp32 on the CPU against fp32 on the GPU: equal up to rounding.
    if not torch.allclose(out, want, rtol=1e-4, atol=1e-5):
        fail(f"outputs differ from the ones the library computed (largest difference {difference})")
    print("ok")


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
