#include "checkpoint/python_random_states.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "common/random.h"

namespace acc {
namespace {

constexpr size_t kWords = 624;

// The Mersenne Twister's init_genrand, as CPython's and NumPy's.
std::array<uint32_t, kWords> init_genrand(uint32_t seed) {
  std::array<uint32_t, kWords> mt{};
  mt[0] = seed;
  for (uint32_t i = 1; i < kWords; ++i) mt[i] = 1812433253U * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
  return mt;
}

}  // namespace

std::array<uint32_t, 624> python_random_seeded(uint64_t seed) {
  // random.seed(n) keys init_by_array with n's 32-bit words, least significant first (0: one word).
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(seed));
    seed >>= 32;
  } while (seed != 0);
  auto mt = init_genrand(19650218U);
  size_t i = 1, j = 0;
  for (size_t k = std::max(kWords, key.size()); k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
    if (++i >= kWords) {
      mt[0] = mt[kWords - 1];
      i = 1;
    }
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = kWords - 1; k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    if (++i >= kWords) {
      mt[0] = mt[kWords - 1];
      i = 1;
    }
  }
  mt[0] = 0x80000000U;
  return mt;
}

std::array<uint32_t, 624> numpy_random_seeded(uint32_t seed) { return init_genrand(seed); }

c10::IValue python_random_states(int64_t step) {
  const uint64_t seed = global_cpu_generator().current_seed();
  // random.getstate(): (3, the 624 words and the position 624, gauss_next None).
  std::vector<c10::IValue> words;
  for (uint32_t w : python_random_seeded(seed)) words.emplace_back(static_cast<int64_t>(w));
  words.emplace_back(static_cast<int64_t>(kWords));
  // np.random.get_state(): ('MT19937', key, pos, has_gauss, cached_gaussian); set_state takes the key
  // as a list (an ndarray would need NumPy's pickle globals).
  std::vector<c10::IValue> key;
  for (uint32_t w : numpy_random_seeded(static_cast<uint32_t>(seed))) key.emplace_back(static_cast<int64_t>(w));
  std::vector<c10::IValue> cuda_states;
  for (auto& [name, generator] : default_generators())
    if (name != "cpu") cuda_states.emplace_back(generator.get_state());
  return python_dict({
      {"step", step},
      {"random_state", python_tuple({int64_t{3}, python_tuple(std::move(words)), c10::IValue()})},
      {"numpy_random_seed", python_tuple({std::string("MT19937"), python_list(std::move(key)),
                                          static_cast<int64_t>(kWords), int64_t{0}, 0.0})},
      {"torch_manual_seed", global_random_state()},
      {"torch_cuda_manual_seed", python_list(std::move(cuda_states))},
  });
}

PythonRandomStates read_python_random_states(const TorchSavedFile& file) {
  const PickleNode& root = file.root();
  PythonRandomStates states;
  states.step = file.integer(file.field(root, "step", "the states"), "step");
  if (states.step < 0) fail(Status::Io, "checkpoint file '", file.path(), "': 'step' is ", states.step, ", not >= 0");
  states.generators.emplace_back("cpu",
                                 file.tensor(file.field(root, "torch_manual_seed", "the states"), "torch_manual_seed"));
  if (const PickleNode* cuda = root.find("torch_cuda_manual_seed")) {
    const auto& devices = file.sequence(*cuda, "torch_cuda_manual_seed");
    for (size_t i = 0; i < devices.size(); ++i)
      states.generators.emplace_back("cuda_" + std::to_string(i),
                                     file.tensor(*devices[i], concat("torch_cuda_manual_seed[", i, "]")));
  }
  return states;
}

}  // namespace acc
