"""acc_load_state on Python Accelerate checkpoint folders with one file damaged or tampered with: a
seeded campaign of mutations of torch.save's files (the pickle's bytes and opcodes, its numbers and
strings, the archive's records) and of well-formed files that say the wrong thing (shapes, dtypes,
parameter indices, counts). Every load must return (no crash, no hang); a refused one must name the
file it refused and leave the run exactly where it was: the next step's rate, loss and weights are
those of a step from the state before the load. Files that say the wrong thing must be refused.

    mutated_python_checkpoints.py BUILD_DIR WORK_DIR [CASES_PER_FILE]
"""
import collections
import ctypes
import os
import pickletools
import random
import shutil
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resume_from_python import run_python  # noqa: E402
from resume_in_python import Mlp, c_step, c_weights, prepare_c  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sidebyside"))
import acc_ctypes as api  # noqa: E402

TORCH_FILES = ("optimizer.bin", "scheduler.bin", "random_states_0.pkl", "pytorch_model.bin")
INT_OPS = {"BININT", "BININT1", "BININT2", "LONG1", "LONG4"}
STRING_OPS = {"BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "BINSTRING", "SHORT_BINSTRING"}
BOUNDARY_INTS = [0, 1, -1, 7, 2**31 - 1, -2**31, 2**32, 2**62, 2**63 - 1, -2**63, 2**64, 10**30]
ODD_STRINGS = ["", "state", "param_groups", "torch.HalfStorage", "torch.DoubleStorage", "torch.LongStorage",
               "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter", "collections.OrderedDict",
               "storage", "cpu", "cuda:0", "0", "1", "999", "../../etc/passwd", "x" * 5000, "\u00e9\u4e2d"]


# The archive: records in and out -------------------------------------------------------------------

def read_records(path):
    with zipfile.ZipFile(path) as z:
        return [(name, z.read(name)) for name in z.namelist()]


def write_records(path, records):
    """A zip as torch.save writes it (stored, every record's CRC right): the damage is in what the
    records say, so the archive's own checks pass."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            z.writestr(name, data)


def pickle_name(records):
    return next(name for name, _ in records if name.endswith("/data.pkl"))


def with_record(records, name, data):
    return [(n, data if n == name else d) for n, d in records]


# Mutations of the pickle's bytes ----------------------------------------------------------------------

def ops_of(data):
    """(opcode name, argument, start, end) of each op: end is the next op's start."""
    ops = list(pickletools.genops(data))
    out = []
    for i, (op, arg, pos) in enumerate(ops):
        out.append((op.name, arg, pos, ops[i + 1][2] if i + 1 < len(ops) else len(data)))
    return out


def encode_int(value):
    if value == 0:
        return b"\x8a\x00"
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def encode_string(text):
    raw = text.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def flip_bytes(data, rng, most):
    """data with 1 to `most` bytes at random places changed."""
    out = bytearray(data)
    for _ in range(rng.randint(1, most)):
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def mutate_pickle(data, rng):
    ops = ops_of(data)
    kind = rng.choice(["flip", "flip", "truncate", "truncate_stop", "insert", "delete", "int", "int", "string",
                       "string", "swap", "duplicate", "drop_op"])
    at = rng.randrange(len(data))
    if kind == "flip":
        return kind, flip_bytes(data, rng, 3)
    if kind == "truncate":
        return kind, data[:at]
    if kind == "truncate_stop":
        return kind, data[:at] + b"."
    if kind == "insert":
        junk = bytes([rng.choice(b"()0125NJKM\x8a\x8bGXT\x8cBC)t\x85\x86\x87]l}dasu\x93Rb\x81\x92Qqrhj\x94\x88\x89.")])
        junk += bytes(rng.randrange(256) for _ in range(rng.randint(0, 4)))
        return kind, data[:at] + junk + data[at:]
    if kind == "delete":
        return kind, data[:at] + data[at + rng.randint(1, 16):]
    if kind in ("int", "string"):
        wanted = INT_OPS if kind == "int" else STRING_OPS
        candidates = [op for op in ops if op[0] in wanted]
        if not candidates:
            return "flip", data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]
        _, _, start, end = rng.choice(candidates)
        if kind == "int":
            value = rng.choice(BOUNDARY_INTS + [rng.randint(-1000, 1000)])
            return f"int {value}", data[:start] + encode_int(value) + data[end:]
        text = rng.choice(ODD_STRINGS + [op[1] for op in candidates])
        return f"string {text[:40]!r}", data[:start] + encode_string(text) + data[end:]
    body = ops[1:-1] if len(ops) > 2 else ops  # PROTO and STOP stay in place
    _, _, start, end = rng.choice(body)
    if kind == "swap":
        _, _, start2, end2 = rng.choice(body)
        if start2 < start:
            start, end, start2, end2 = start2, end2, start, end
        if end > start2:
            return kind, data
        return kind, data[:start] + data[start2:end2] + data[end:start2] + data[start:end] + data[end2:]
    if kind == "duplicate":
        return kind, data[:end] + data[start:end] + data[end:]
    return kind, data[:start] + data[end:]  # drop_op


def mutate_archive(records, rng):
    """A change to the records around the pickle."""
    storages = [name for name, _ in records if "/data/" in name]
    kind = rng.choice(["storage_short", "storage_long", "storage_empty", "storage_missing", "big_endian",
                       "no_pickle", "extra_storage"])
    if kind.startswith("storage") and not storages:
        kind = "no_pickle"
    if kind == "storage_short":
        name = rng.choice(storages)
        data = dict(records)[name]
        return kind, with_record(records, name, data[:rng.randrange(max(len(data), 1))])
    if kind == "storage_long":
        name = rng.choice(storages)
        return kind, with_record(records, name, dict(records)[name] + b"\0" * rng.choice([1, 4, 8, 4096]))
    if kind == "storage_empty":
        return kind, with_record(records, rng.choice(storages), b"")
    if kind == "storage_missing":
        name = rng.choice(storages)
        return kind, [(n, d) for n, d in records if n != name]
    prefix = pickle_name(records)[:-len("data.pkl")]
    if kind == "big_endian":
        return kind, [(n, d) for n, d in records if not n.endswith("/byteorder")] + [(prefix + "byteorder", b"big")]
    if kind == "no_pickle":
        return kind, [(n, d) for n, d in records if not n.endswith("/data.pkl")]
    return kind, records + [(prefix + "data/9999", b"\1" * 64)]


def mutate_bytes(data, rng):
    """Damage the archive itself (its CRCs and headers must catch it)."""
    kind = rng.choice(["file_flip", "file_truncate", "file_empty"])
    if kind == "file_empty":
        return kind, b""
    if kind == "file_truncate":
        return kind, data[:rng.randrange(len(data))]
    return kind, flip_bytes(data, rng, 4)


# Well-formed files that say the wrong thing -------------------------------------------------------------

class Replace:
    """What a case saves instead of the file's object."""

    def __init__(self, value):
        self.value = value


def wrong_files(folder):
    """(file, description, write(path), reason) of torch.save files every reader must refuse."""
    def first_state(opt):
        return opt["state"][next(iter(opt["state"]))]

    # (A negative rate, or an infinite moment, is loaded as torch loads it: schedules end a
    # few ulp below 0, and a diverged run's state is the user's to resume.)
    cases = [  # (file, what is wrong, the change, what the refusal must say)
        ("optimizer.bin", "a moment of another shape",
         lambda o: first_state(o).update(exp_avg=torch.zeros(3, 3)),
         "has shape [3, 3] but [16, 8] was expected"),
        ("optimizer.bin", "a moment that is a list",
         lambda o: first_state(o).update(exp_avg=[1.0, 2.0]),
         "must be a tensor, not a list"),
        ("optimizer.bin", "a group naming a parameter twice",
         lambda o: o["param_groups"][0]["params"].__setitem__(1, o["param_groups"][0]["params"][0]),
         "params lists parameter 0 a second time"),
        ("optimizer.bin", "a group naming a parameter that is not there",
         lambda o: o["param_groups"][0]["params"].__setitem__(0, 1000),
         "holds state for parameters that none of its groups lists"),
        ("optimizer.bin", "a group with one parameter less",
         lambda o: o["param_groups"][0]["params"].pop(),
         "parameter group 0 holds 3 parameters, but the optimizer's has 4"),
        ("optimizer.bin", "two groups where one is prepared",
         lambda o: o["param_groups"].append(dict(o["param_groups"][0], params=[])),
         "holds 2 parameter groups, but the optimizer has 1"),
        ("optimizer.bin", "a learning rate that is a string",
         lambda o: o["param_groups"][0].update(lr="0.1"),
         "'param_groups[0].lr' must be a number"),
        ("optimizer.bin", "betas of three",
         lambda o: o["param_groups"][0].update(betas=(0.9, 0.99, 0.5)),
         "'param_groups[0].betas' must be a pair"),
        ("optimizer.bin", "an unknown hyper-parameter",
         lambda o: o["param_groups"][0].update(momentum_decay=3.0),
         "'param_groups[0].momentum_decay' is not a hyper-parameter of the adam optimizer"),
        ("optimizer.bin", "state for a parameter no group lists",
         lambda o: o["state"].__setitem__(77, dict(first_state(o))),
         "holds state for parameters that none of its groups lists"),
        ("optimizer.bin", "a step that is a tensor of two",
         lambda o: first_state(o).update(step=torch.tensor([1.0, 2.0])),
         "step' has shape [2]"),
        ("optimizer.bin", "no param_groups",
         lambda o: o.pop("param_groups"),
         "has no 'param_groups'"),
        ("optimizer.bin", "a list instead of the state dict",
         lambda o: Replace([o]),
         "'the state dict' must be a dict, not a list"),
        ("optimizer.bin", "a learning rate that is not a number",
         lambda o: o["param_groups"][0].update(lr=float("nan")),
         "'lr' must be a number"),
        ("optimizer.bin", "a beta above 1",
         lambda o: o["param_groups"][0].update(betas=(1.5, 0.999)),
         "'beta1' is 1.5, outside [0, 1)"),
        ("optimizer.bin", "a negative eps",
         lambda o: o["param_groups"][0].update(eps=-1e-8),
         "'eps' is -1e-08, outside [0, inf]"),
        ("optimizer.bin", "a negative step count",
         lambda o: first_state(o).update(step=torch.tensor(-3.0)),
         "'net.0.weight.step' is -3, not a whole number >= 0"),
        ("scheduler.bin", "last_epoch as a string",
         lambda s: s.update(last_epoch="3"),
         "'last_epoch' must be an int, not a string"),
        ("scheduler.bin", "a negative last_epoch",
         lambda s: s.update(last_epoch=-5),
         "needs a step >= 0, got -5"),
        ("scheduler.bin", "a base rate that is not a number",
         lambda s: s.update(base_lrs=[float("nan")]),
         "base learning rates must be finite, got nan"),
        ("scheduler.bin", "base_lrs of two for one group",
         lambda s: s.update(base_lrs=[0.1, 0.2]),
         "has 2 parameter groups, but the optimizer has 1"),
        ("scheduler.bin", "a tensor instead of the state dict",
         lambda s: Replace(torch.zeros(2)),
         "'the state dict' must be a dict"),
        ("random_states_0.pkl", "a negative step",
         lambda r: r.update(step=-1),
         "'step' is -1, not >= 0"),
        ("random_states_0.pkl", "a generator state of the wrong size",
         lambda r: r.update(torch_manual_seed=torch.zeros(16, dtype=torch.uint8)),
         "the cpu generator state has the wrong size or type"),
        ("random_states_0.pkl", "a generator state in float32",
         lambda r: r.update(torch_manual_seed=r["torch_manual_seed"].float()),
         "the cpu generator state has the wrong size or type"),
        ("random_states_0.pkl", "a step that is a string",
         lambda r: r.update(step="1"),
         "'step' must be an int, not a string"),
        ("random_states_0.pkl", "no torch state",
         lambda r: r.pop("torch_manual_seed"),
         "has no 'torch_manual_seed'"),
        ("pytorch_model.bin", "a weight of another shape",
         lambda m: m.__setitem__(next(iter(m)), torch.zeros(2, 2)),
         "'net.0.weight' has shape [2, 2] but the model's has [16, 8]"),
        ("pytorch_model.bin", "a weight missing",
         lambda m: m.pop(next(iter(m))),
         "missing keys: net.0.weight"),
        ("pytorch_model.bin", "a weight more",
         lambda m: m.__setitem__("net.9.weight", torch.zeros(2)),
         "unexpected keys: net.9.weight"),
        ("pytorch_model.bin", "a weight that is a number",
         lambda m: m.__setitem__(next(iter(m)), 1.5),
         "'net.0.weight' must be a tensor, not a float"),
    ]
    return changed_files(folder, cases)



# The run ------------------------------------------------------------------------------------------------

class Trial:
    """A prepared C run that can be put back into one known state (a checkpoint of ours) and asked
    whether it is still there (one step from it gives the reference step)."""

    def __init__(self, lib, model_path, work, optimizer, schedule):
        self.lib = lib
        self.acc, self.model, self.opt, self.sched = prepare_c(lib, model_path, optimizer, schedule, {})
        self.known = os.path.join(work, f"known_state_{schedule}")
        shutil.rmtree(self.known, ignore_errors=True)
        lib.acc_set_seed(ctypes.c_uint64(11))
        for step in range(2):
            c_step(lib, self.acc, self.model, self.opt, self.sched, step)
        lib.acc_save_state(self.acc, self.known.encode(), None)
        self.reference = self.step_from_known()

    def step_from_known(self):
        self.lib.acc_load_state(self.acc, self.known.encode(), None)
        return self.step()

    def step(self):
        rate, loss = c_step(self.lib, self.acc, self.model, self.opt, self.sched, 2)
        return rate, loss, c_weights(self.lib, self.model)

    def unchanged(self):
        rate, loss, weights = self.step()
        ref_rate, ref_loss, ref_weights = self.reference
        return rate == ref_rate and loss == ref_loss and all(torch.equal(weights[n], ref_weights[n]) for n in weights)

    def load(self, folder):
        """The status and message of acc_load_state(folder), from the known state."""
        self.lib.acc_load_state(self.acc, self.known.encode(), None)
        status = self.lib.lib.acc_load_state(self.acc, folder.encode(), None)
        return status, self.lib.lib.acc_last_error_message().decode() if status else ""


def changed_files(folder, cases):
    """(file, what, a writer of the folder's file as `change` leaves it, the refusal's reason) for
    each (file, what, change, reason) of `cases`; `change` edits the loaded object in place or
    returns a Replace."""
    def saving(name, change):
        def write(path):
            # The test's own files (NumPy's state in random_states_0.pkl): torch 2.6's weights_only default refuses them.
            obj = torch.load(os.path.join(folder, name), weights_only=False)
            replaced = change(obj)
            torch.save(replaced.value if isinstance(replaced, Replace) else obj, path)
        return write
    return [(name, what, saving(name, change), reason) for name, what, change, reason in cases]


def scheduler_files(folder, cases):
    """changed_files of scheduler.bin, for (what, change, reason) cases."""
    return changed_files(folder, [("scheduler.bin",) + case for case in cases])


def composite_wrong_files(folder):
    """A sequence's or chain's scheduler.bin that says the wrong thing about its parts."""
    sequence = lambda s: s["_schedulers"][0]  # noqa: E731  (the chain's first part: a sequence)
    cases = [
        ("a part fewer", lambda s: s["_schedulers"].pop(), "'the state dict._schedulers' is 1 schedulers"),
        ("a part at another step", lambda s: sequence(s)["_schedulers"][0].__setitem__("last_epoch", 0),
         "'the state dict._schedulers[0]._schedulers[0].last_epoch' is 0"),
        ("another milestone", lambda s: sequence(s).__setitem__("_milestones", [3]), "_milestones' is [3]"),
        ("a part that is a number", lambda s: s["_schedulers"].__setitem__(1, 7), "_schedulers[1]"),
        ("no parts", lambda s: s.__setitem__("_schedulers", []), "_schedulers"),
    ]
    return scheduler_files(folder, cases)


def multistep_wrong_files(folder):
    """A MultiStepLR's scheduler.bin with settings other than the program's, or milestones that are no
    Counter of steps, or one claiming a step a billion times."""
    cases = [
        ("another gamma", lambda s: s.__setitem__("gamma", 0.25), "'gamma' is 0.25"),
        ("other milestones", lambda s: s.__setitem__("milestones", collections.Counter([2, 6])),
         "'milestones' is [2, 6]"),
        ("milestones as a list", lambda s: s.__setitem__("milestones", [2, 5]), "milestones"),
        ("a milestone a billion times", lambda s: s.__setitem__("milestones", collections.Counter({2: 10**9})),
         "milestones"),
    ]
    return scheduler_files(folder, cases)


def campaign(lib, model_path, work, optimizer, schedule, files, cases_per_file, seed, wrong, verbose):
    """Mutations of `files` of a folder PyTorch saved after 5 steps of `optimizer` and `schedule`,
    then the `wrong(folder)` files; the failures."""
    original = os.path.join(work, f"python_original_{schedule}")
    shutil.rmtree(original, ignore_errors=True)
    run_python(model_path, original, optimizer, schedule, 5, safe_serialization=False)
    trial = Trial(lib, model_path, work, optimizer, schedule)
    assert trial.load(original) == (0, ""), "the untouched folder must load"
    trial.step()

    case_folder = os.path.join(work, "python_mutated")
    failures, counts = [], {"refused": 0, "loaded": 0}

    def check(file_name, what, write, must_refuse, reason=None):
        shutil.rmtree(case_folder, ignore_errors=True)
        shutil.copytree(original, case_folder)
        write(os.path.join(case_folder, file_name))
        print(f"{file_name}: {what}", flush=True)  # the last line names the case if the process dies
        status, message = trial.load(case_folder)
        if status == 0:
            counts["loaded"] += 1
            if must_refuse:
                failures.append(f"{file_name}: {what}: loaded")
            return
        counts["refused"] += 1
        if verbose:
            print("  ", message)
        if reason and reason not in message:
            failures.append(f"{file_name}: {what}: refused without saying '{reason}': {message}")
        if file_name not in message:
            failures.append(f"{file_name}: {what}: the message does not name the file: {message}")
        if not trial.unchanged():
            failures.append(f"{file_name}: {what}: refused ({message}) but the run changed")

    rng = random.Random(seed)
    for file_name in files:
        path = os.path.join(original, file_name)
        records = read_records(path)
        with open(path, "rb") as f:
            whole = f.read()
        pkl = pickle_name(records)
        for case in range(cases_per_file):
            choice = rng.random()
            if choice < 0.75:
                what, data = mutate_pickle(dict(records)[pkl], rng)
                mutated = with_record(records, pkl, data)
                check(file_name, f"pickle {case} {what}", lambda p: write_records(p, mutated), False)
            elif choice < 0.9:
                what, mutated = mutate_archive(records, rng)
                # A record nothing refers to is ignored, as torch.load ignores it.
                check(file_name, f"archive {case} {what}", lambda p: write_records(p, mutated),
                      what != "extra_storage")
            else:
                what, data = mutate_bytes(whole, rng)

                def write(p, data=data):
                    with open(p, "wb") as f:
                        f.write(data)
                # A flipped byte may fall in a field no reader uses (a timestamp, an extra field).
                check(file_name, f"bytes {case} {what}", write, what != "file_flip")
    for file_name, what, write, reason in wrong(original):
        check(file_name, what, write, True, reason)
    print(f"{schedule}: {counts['refused']} refused, {counts['loaded']} loaded (mutations that changed nothing read)")
    return failures


def main(build, work, cases_per_file, verbose):
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model_path = os.path.join(work, "mlp.pt")
    torch.jit.script(Mlp()).save(model_path)
    lib = api.load(build)
    failures = campaign(lib, model_path, work, "adam", "step", TORCH_FILES, cases_per_file, 20261202, wrong_files,
                        verbose)
    # A sequence leading a chain: the parts' states nested in scheduler.bin.
    failures += campaign(lib, model_path, work, "adamw", "sequence_chained_exponential", ("scheduler.bin",),
                         cases_per_file, 20261203, composite_wrong_files, verbose)
    # MultiStepLR: its settings and its Counter of milestones (few mutations: the file is small).
    failures += campaign(lib, model_path, work, "sgd", "multistep", ("scheduler.bin",), min(cases_per_file, 40),
                         20261207, multistep_wrong_files, verbose)
    for failure in failures:
        print("FAILED", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300,
                  os.environ.get("ACC_VERBOSE") == "1"))
