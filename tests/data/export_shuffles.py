"""Writes the shuffled orders a prepared data loader must reproduce, computed by PyTorch itself.

Accelerate's prepare_data_loader gives a shuffling loader on several processes (without
use_seedable_sampler) a sampler generator seeded with one draw from torch's global generator, and
at the start of every epoch sets every process's generator to process 0's state. So every epoch's
order is that of PyTorch's own RandomSampler over process 0's generator, iterated to its end.

Run with Debian's python3-torch: python3 export_shuffles.py OUTPUT_DIR
"""
import json
import sys
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler

SEED = 1234      # process 0's torch.manual_seed (acc_set_seed) before prepare
SAMPLES = 24
EPOCHS = 3
WORKER_SAMPLES = 9  # 5 batches of 2: 3 workers get 2, 2 and 1
GENERATOR_SEED = 2024  # DataLoader(generator=torch.Generator().manual_seed(GENERATOR_SEED))


def main(out: Path) -> None:
    torch.manual_seed(SEED)
    generator = torch.Generator()
    generator.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))  # prepare's draw
    sampler = RandomSampler(range(SAMPLES), generator=generator)
    orders = [list(sampler) for _ in range(EPOCHS)]
    # A loader with a generator of its own (DataLoader(generator=g)): Accelerate keeps g as the
    # sampler's, unseeded by it, and synchronizes it; each epoch's iterator draws its base seed from g
    # before the sampler's order.
    generator = torch.Generator()
    generator.manual_seed(GENERATOR_SEED)
    whole = DataLoader(range(SAMPLES), batch_size=SAMPLES, shuffle=True, generator=generator)
    generator_orders = [[i for batch in whole for i in batch.tolist()] for _ in range(EPOCHS)]
    # Dispatched (dispatch_batches), Accelerate drops generator= from the DataLoader process 0 reads
    # through and keeps it in the sampler: the base seed comes from the global generator, the order
    # from g alone.
    generator = torch.Generator()
    generator.manual_seed(GENERATOR_SEED)
    dispatched = DataLoader(range(SAMPLES), batch_size=SAMPLES, sampler=RandomSampler(range(SAMPLES), generator=generator))
    dispatched_orders = [[i for batch in dispatched for i in batch.tolist()] for _ in range(EPOCHS)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "synchronized_shuffle.json").write_text(
        json.dumps({"seed": SEED, "samples": SAMPLES, "orders": orders, "generator_seed": GENERATOR_SEED,
                    "generator_orders": generator_orders, "dispatched_generator_orders": dispatched_orders}))

    # Plain DataLoaders after torch.manual_seed: each epoch's iterator draws its _base_seed from the
    # global generator, then the sampler draws its own seed; a later loader's order shows where the
    # global stream stands.
    torch.manual_seed(SEED)
    first = DataLoader(range(SAMPLES), batch_size=5, shuffle=True)
    epochs = [[i for batch in first for i in batch.tolist()] for _ in range(2)]
    second = DataLoader(range(SAMPLES), batch_size=SAMPLES, shuffle=True)
    later = [i for batch in second for i in batch.tolist()]
    # The global generator itself: its state right after the seed, and what rand / randn draw next.
    torch.manual_seed(SEED)
    state = torch.get_rng_state()
    uniform = torch.rand(5)
    normal = torch.randn(2, 3)
    (out / "random_stream.json").write_text(json.dumps({
        "seed": SEED, "state": state.tolist(), "rand": [float(v).hex() for v in uniform.tolist()],
        "randn": [float(v).hex() for v in normal.flatten().tolist()]}))

    (out / "loader_stream.json").write_text(
        json.dumps({"seed": SEED, "samples": SAMPLES, "epochs": epochs, "later": later}))
    export_worker_draws(out)
    export_loader_generator(out)
    export_prepared_look_ahead(out)
    export_early_ends(out)
    export_zipped(out)
    export_stream_draws(out)


class Drawing(Dataset):
    """Sample i is i followed by two numbers drawn from torch's generator, wherever the sample is
    made: the main process with num_workers 0, else a worker process seeded base_seed + worker id."""

    def __len__(self):
        return WORKER_SAMPLES

    def __getitem__(self, i):
        return torch.cat([torch.tensor([float(i)]), torch.rand(2)])


def export_worker_draws(out: Path) -> None:
    # Per num_workers: every batch of two epochs (as float hex), then what the global generator
    # draws next (the main stream: each epoch took only its base seed from it).
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # more workers than cores
    cases = {}
    for workers in (0, 2, 3):
        torch.manual_seed(SEED)
        loader = DataLoader(Drawing(), batch_size=2, num_workers=workers)
        epochs = [[[float(v).hex() for v in batch.flatten().tolist()] for batch in loader] for _ in range(2)]
        after = [float(v).hex() for v in torch.rand(3).tolist()]
        cases[str(workers)] = {"epochs": epochs, "after": after}
    (out / "worker_draws.json").write_text(
        json.dumps({"seed": SEED, "samples": WORKER_SAMPLES, "batch_size": 2, "cases": cases}))


def export_loader_generator(out: Path) -> None:
    # DataLoader(generator=g): each epoch's base seed (hence the workers' seeds) and a shuffle's order
    # come from g, not from the global generator. Per num_workers (and shuffle): three epochs of
    # batches, then what the global generator draws next.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cases, dispatched = {}, {}
    for workers in (0, 2):
        for shuffle in (False, True):
            torch.manual_seed(SEED)
            generator = torch.Generator()
            generator.manual_seed(GENERATOR_SEED)
            loader = DataLoader(Drawing(), batch_size=2, shuffle=shuffle, num_workers=workers, generator=generator)
            epochs = [[[float(v).hex() for v in batch.flatten().tolist()] for batch in loader] for _ in range(3)]
            after = [float(v).hex() for v in torch.rand(3).tolist()]
            cases[f"{workers} {int(shuffle)}"] = {"workers": workers, "shuffle": shuffle, "epochs": epochs,
                                                  "after": after}
            # Prepared with dispatch_batches (one process too), Accelerate drops generator= from the
            # DataLoader it reads through; the sampler keeps it: base seeds from the global generator.
            torch.manual_seed(SEED)
            generator = torch.Generator()
            generator.manual_seed(GENERATOR_SEED)
            sampler = RandomSampler(range(WORKER_SAMPLES), generator=generator) if shuffle else None
            loader = DataLoader(Drawing(), batch_size=2, sampler=sampler, num_workers=workers)
            epochs = [[[float(v).hex() for v in batch.flatten().tolist()] for batch in one_ahead(loader)]
                      for _ in range(3)]
            after = [float(v).hex() for v in torch.rand(3).tolist()]
            dispatched[f"{workers} {int(shuffle)}"] = {"workers": workers, "shuffle": shuffle, "epochs": epochs,
                                                       "after": after}
    (out / "loader_generator.json").write_text(json.dumps(
        {"seed": SEED, "generator_seed": GENERATOR_SEED, "samples": WORKER_SAMPLES, "batch_size": 2,
         "cases": cases, "dispatched": dispatched}))


def one_ahead(loader):
    """How Accelerate's prepared loader (DataLoaderShard) iterates the loader it wraps: each batch is
    fetched before the one before it is handed out, so that the last batch is known to be last."""
    iterator = iter(loader)
    current = next(iterator, None)
    if current is None:
        return
    for upcoming in iterator:
        yield current
        current = upcoming
    yield current


def export_prepared_look_ahead(out: Path) -> None:
    # A prepared loader on one process, without workers, over the drawing dataset, and a training
    # step that draws after each batch (dropout's draw): the dataset's draws for batch i + 1 come
    # before the step's on batch i. Per shuffle: two epochs of batches and step draws, then what the
    # global generator draws next.
    cases = {}
    for shuffle in (False, True):
        torch.manual_seed(SEED)
        loader = DataLoader(Drawing(), batch_size=2, shuffle=shuffle)
        epochs, steps = [], []
        for _ in range(2):
            batches = []
            for batch in one_ahead(loader):
                batches.append([float(v).hex() for v in batch.flatten().tolist()])
                steps.append(float(torch.rand(1).item()).hex())
            epochs.append(batches)
        after = [float(v).hex() for v in torch.rand(3).tolist()]
        cases[str(int(shuffle))] = {"shuffle": shuffle, "epochs": epochs, "steps": steps, "after": after}
    (out / "prepared_look_ahead.json").write_text(
        json.dumps({"seed": SEED, "samples": WORKER_SAMPLES, "batch_size": 2, "cases": cases}))


def export_early_ends(out: Path) -> None:
    # A shuffle from the loader's own generator: its sampler, once its permutation runs out, draws
    # one more (randperm(n)[:0]) when its batch sampler asks past the last full batch. An epoch left
    # after k batches takes that draw or not depending on how far the iterator had asked (workers ask
    # prefetch_factor * num_workers ahead, a prepared loader one ahead), and the next epoch's order
    # shows which. Per case: the next epoch's order after leaving the first after k batches.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cases = []
    for samples in (10, 9):  # 5 batches of 2, the last full or short
        for workers in (0, 2):
            for prepared in (False, True):
                for k in range(1, 6):
                    generator = torch.Generator()
                    generator.manual_seed(GENERATOR_SEED)
                    prefetch = {"prefetch_factor": 2} if workers else {}  # torch refuses it without workers
                    loader = DataLoader(range(samples), batch_size=2, shuffle=True, num_workers=workers,
                                        generator=generator, **prefetch)
                    batches = one_ahead(loader) if prepared else iter(loader)
                    for _ in range(k):
                        next(batches)
                    del batches
                    order = [i for batch in loader for i in batch.tolist()]
                    cases.append({"samples": samples, "workers": workers, "prepared": prepared, "left_after": k,
                                  "next_epoch": order})
    (out / "early_ends.json").write_text(json.dumps({"generator_seed": GENERATOR_SEED, "cases": cases}))


def export_zipped(out: Path) -> None:
    # Two loaders read in step (zip): each iterator draws its base seed when it is made, so both draw
    # before either's first batch; an unseeded sampler draws its own seed at its iterator's first
    # batch, or, with workers, when the iterator is made (its workers are given indices at once).
    # Per case: both loaders' orders in two epochs, then a later loader's order (where the global
    # stream stands).
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cases = []
    for workers in ((0, 0), (2, 0), (0, 2)):
        torch.manual_seed(SEED)
        loaders = [DataLoader(range(SAMPLES), batch_size=6, shuffle=True, num_workers=w) for w in workers]
        epochs = []
        for _ in range(2):
            orders = [[], []]
            for first, second in zip(*loaders):
                orders[0] += first.tolist()
                orders[1] += second.tolist()
            epochs.append(orders)
        later = [i for batch in DataLoader(range(SAMPLES), batch_size=SAMPLES, shuffle=True) for i in batch.tolist()]
        cases.append({"workers": list(workers), "epochs": epochs, "later": later})
    (out / "zipped.json").write_text(json.dumps({"seed": SEED, "samples": SAMPLES, "batch_size": 6, "cases": cases}))


class DrawingStream(IterableDataset):
    """The Drawing dataset's samples as a stream: each drawn when the stream is read."""

    def __iter__(self):
        for i in range(WORKER_SAMPLES):
            yield Drawing()[i]


def export_stream_draws(out: Path) -> None:
    # A stream that draws from torch's generator, read without workers, and a training step that
    # draws after each batch: PyTorch's own loader reads batch i + 1 after the step on batch i,
    # Accelerate's prepared loader (one_ahead) before it. Per case (prepared or not): two epochs of
    # batches and step draws, then what the global generator draws next.
    cases = {}
    for prepared in (False, True):
        torch.manual_seed(SEED)
        loader = DataLoader(DrawingStream(), batch_size=2)
        epochs, steps = [], []
        for _ in range(2):
            batches = []
            for batch in (one_ahead(loader) if prepared else loader):
                batches.append([float(v).hex() for v in batch.flatten().tolist()])
                steps.append(float(torch.rand(1).item()).hex())
            epochs.append(batches)
        after = [float(v).hex() for v in torch.rand(3).tolist()]
        cases[str(int(prepared))] = {"epochs": epochs, "steps": steps, "after": after}
    (out / "stream_draws.json").write_text(
        json.dumps({"seed": SEED, "samples": WORKER_SAMPLES, "batch_size": 2, "cases": cases}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
