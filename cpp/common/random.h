// torch's random number generators as the library uses them: seeding, the global generator's state,
// seeded generators, and draws taken exactly where PyTorch takes them (so that the random stream
// stays in step with Python's).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace acc {

// A data loader's worker thread draws from a generator of its own, as a PyTorch DataLoader worker
// process draws from its own default generator (seeded base_seed + worker id): while a
// WorkerGeneratorScope lives, that generator is this thread's global CPU generator for every function
// here (seeding, states, draws) and for the C API's draws.
class WorkerGeneratorScope {
 public:
  explicit WorkerGeneratorScope(at::Generator generator);
  ~WorkerGeneratorScope();
  WorkerGeneratorScope(const WorkerGeneratorScope&) = delete;
  WorkerGeneratorScope& operator=(const WorkerGeneratorScope&) = delete;

 private:
  at::Generator previous_;
};
// torch's global CPU generator as this thread sees it: a loader worker's own, else the default one.
at::Generator global_cpu_generator();

// Seeds torch's CPU generator and every GPU's (acc_set_seed, the accelerator's seed option); on a
// loader's worker thread, only that worker's generator (torch.manual_seed in a worker process).
void set_seed(uint64_t seed);
// Seeds every GPU's generator only: what torch.manual_seed does to them where a caller restores the
// CPU's afterwards (fork_rng(devices=[]), as PyTorch's PowerSGD hook seeds its projections).
void seed_gpus(uint64_t seed);
// Accelerate's set_seed(seed, device_specific, deterministic): device_specific adds `process_index`;
// deterministic turns torch's deterministic algorithms on (and leaves them on).
void set_seed(uint64_t seed, bool device_specific, int64_t process_index, bool deterministic);

// torch.get_rng_state() / torch.set_rng_state(): the global CPU generator's state as a uint8
// tensor. A state of another dtype, shape or size is InvalidArgument and changes nothing.
at::Tensor global_random_state();
void set_global_random_state(const at::Tensor& state);

// The global CPU generator's state, put back when the scope ends unless kept: what a refused
// operation that may have drawn already leaves behind (nothing changed, the random stream included).
class RandomStreamRestorer {
 public:
  RandomStreamRestorer() : state_(global_random_state()) {}
  ~RandomStreamRestorer() {
    if (!keep_) set_global_random_state(state_);
  }
  RandomStreamRestorer(const RandomStreamRestorer&) = delete;
  RandomStreamRestorer& operator=(const RandomStreamRestorer&) = delete;
  void keep() { keep_ = true; }

 private:
  at::Tensor state_;
  bool keep_ = false;
};

// The default generators a checkpoint saves: "cpu", then "cuda_<i>" for each GPU.
std::vector<std::pair<std::string, at::Generator>> default_generators();

// A CPU generator seeded as torch.Generator().manual_seed(seed).
at::Generator seeded_generator(uint64_t seed);
// Whether `bytes` is a state torch's CPU generator takes (tried on a scratch generator): an
// InvalidArgument error naming `what` if not.
void check_cpu_generator_state(const std::vector<uint8_t>& bytes, const std::string& what);
// A CPU generator's state as a uint8 tensor, for set_state, and back (get_state's tensor as bytes).
at::Tensor generator_state_tensor(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> generator_state_bytes(const at::Tensor& state);
// A seed drawn from torch's global generator as Python's torch.empty((), dtype=int64).random_(),
// or from `generator` as random_(generator=generator).
uint64_t draw_seed();
uint64_t draw_seed(at::Generator generator);
// What creating a torch DataLoader iterator takes from torch's global generator: one draw, its
// _base_seed (random_() of an int64 on loader.generator, None for every loader we model). Every
// loader calls it when an epoch starts, before its sampler draws, so that dropout and unseeded
// shuffles afterwards see the random stream Python's would. Worker w of that epoch draws from a
// generator seeded base_seed + w (worker_generator).
// `loader_generator` is the loader's own (DataLoader(generator=...)); undefined: torch's global one.
uint64_t draw_iterator_base_seed(const at::Generator& loader_generator);
// The generator of a loader's worker `worker` in an epoch whose iterator drew `base_seed`:
// torch.manual_seed(base_seed + worker), as PyTorch's worker loop seeds its process.
at::Generator worker_generator(uint64_t base_seed, size_t worker);

}  // namespace acc
