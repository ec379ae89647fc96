// numpy.random.RandomState as PyTorch's PowerSGD keeps it (np.random.RandomState(random_seed), then
// randint(1_000_000_000) for every seed it hands torch.manual_seed): MT19937 seeded by numpy's legacy
// integer seeding (init_genrand), and randint's masked rejection of 32-bit draws. Only that draw is
// built; its state is saved as text in checkpoints.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace acc {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed = 0) : engine_(seed) {}

  // RandomState.randint(high): an integer in [0, high), 0 < high <= 2**32.
  int64_t randint(uint64_t high);

  // The generator's state, and one read back (InvalidArgument when `text` is not such a state).
  std::string state_text() const;
  void set_state_text(const std::string& text);

 private:
  std::mt19937 engine_;  // numpy's MT19937: the same recurrence, seeding and tempering
};

}  // namespace acc
