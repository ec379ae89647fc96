#include "common/random.h"

#include <pthread.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <mutex>
#include <new>
#include <utility>

#include "common/device.h"
#include "common/error.h"
#include "common/thread_state.h"

namespace acc {
namespace {
// The generator WorkerGeneratorScope put in place on this thread (undefined: none).
// libtorch makes its default CPU generator on first use, as a function's static: made then by a
// program's first draw, it would be destroyed before the program's own exit handlers registered
// earlier run, and a draw in one of them would use it after. Made when the library loads, it
// outlives them.
const bool g_default_generator_made = at::detail::getDefaultCPUGenerator().defined();

// A child forked while another thread draws or seeds finds the generator's lock held by a thread it
// does not have, and would hang on its first draw (a new model's initialisation included): the
// child's copy of the lock is made anew. (Not taken across the fork instead: a program that holds
// two copies of this code, the static core and the shared library, would take it twice and hang.)
void renew_default_generator_lock_in_child() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  new (&generator.mutex()) std::mutex();  // the generator's own (a copy of the Generator shares its impl)
}
const bool g_default_generator_forks_safely =
    ::pthread_atfork(nullptr, nullptr, renew_default_generator_lock_in_child) == 0;

struct WorkerGeneratorTag;
at::Generator& worker_generator_in_use() { return thread_state<at::Generator, WorkerGeneratorTag>(); }
}  // namespace

WorkerGeneratorScope::WorkerGeneratorScope(at::Generator generator)
    : previous_(std::exchange(worker_generator_in_use(), std::move(generator))) {}

WorkerGeneratorScope::~WorkerGeneratorScope() { worker_generator_in_use() = std::move(previous_); }

at::Generator global_cpu_generator() {
  return worker_generator_in_use().defined() ? worker_generator_in_use() : at::detail::getDefaultCPUGenerator();
}

void seed_gpus(uint64_t seed) {
  if (cuda_available()) torch::cuda::manual_seed_all(seed);
}

void set_seed(uint64_t seed) {
  if (worker_generator_in_use().defined()) {
    std::lock_guard<std::mutex> lock(worker_generator_in_use().mutex());
    worker_generator_in_use().set_current_seed(seed);
    return;
  }
  torch::manual_seed(seed);
  seed_gpus(seed);
}

void set_seed(uint64_t seed, bool device_specific, int64_t process_index, bool deterministic) {
  if (device_specific) {
    require(process_index >= 0 && seed <= UINT64_MAX - static_cast<uint64_t>(process_index), "seed ", seed,
            " + process index ", process_index, " is past 2^64 - 1, the largest seed torch takes");
    seed += static_cast<uint64_t>(process_index);
  }
  set_seed(seed);
  if (deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

at::Tensor global_random_state() {
  auto generator = global_cpu_generator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_global_random_state(const at::Tensor& state) {
  auto generator = global_cpu_generator();
  const int64_t expected = generator.get_state().numel();
  require(state.scalar_type() == at::kByte && state.dim() == 1 && state.numel() == expected,
          "a random state is a 1-D uint8 tensor of ", expected, " bytes (as acc_random_get_state gives), got ",
          state.scalar_type(), " ", state.sizes());
  try {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state.to(at::kCPU).contiguous());
  } catch (const c10::Error& e) {
    fail(Status::InvalidArgument, "not a random state of torch's CPU generator: ", e.what_without_backtrace());
  }
}

std::vector<std::pair<std::string, at::Generator>> default_generators() {
  std::vector<std::pair<std::string, at::Generator>> all = {{"cpu", at::detail::getDefaultCPUGenerator()}};
  for (int64_t i = 0; cuda_available() && i < cuda_device_count(); ++i)
    all.emplace_back("cuda_" + std::to_string(i),
                     at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i))));
  return all;
}

at::Generator seeded_generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

at::Tensor generator_state_tensor(const std::vector<uint8_t>& bytes) {
  return at::tensor(at::ArrayRef<uint8_t>(bytes), at::kByte);
}

std::vector<uint8_t> generator_state_bytes(const at::Tensor& state) {
  const at::Tensor bytes = state.contiguous();
  return {bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel()};
}

void check_cpu_generator_state(const std::vector<uint8_t>& bytes, const std::string& what) {
  at::Generator scratch = seeded_generator(0);
  const int64_t expected = scratch.get_state().numel();
  require(static_cast<int64_t>(bytes.size()) == expected, what, " has ", bytes.size(), " bytes, a CPU generator's has ",
          expected);
  try {
    scratch.set_state(generator_state_tensor(bytes));
  } catch (const c10::Error& e) {
    fail(Status::InvalidArgument, what, " is not a CPU generator's: ", e.what_without_backtrace());
  }
}

uint64_t draw_seed() { return draw_seed(global_cpu_generator()); }

uint64_t draw_seed(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  // ATen's int64 random_(): a 64-bit draw modulo 2^63.
  return generator.get<at::CPUGeneratorImpl>()->random64() & 0x7fffffffffffffffull;
}

uint64_t draw_iterator_base_seed(const at::Generator& loader_generator) {
  return loader_generator.defined() ? draw_seed(loader_generator) : draw_seed();
}

at::Generator worker_generator(uint64_t base_seed, size_t worker) {
  // Python adds without bound; base seeds are below 2^63, so the sum fits torch's uint64 seed.
  return seeded_generator(base_seed + static_cast<uint64_t>(worker));
}

}  // namespace acc
