#include "common/numpy_random_state.h"

#include <sstream>

#include "common/error.h"

namespace acc {

int64_t NumpyRandomState::randint(uint64_t high) {
  require(high > 0 && high <= (uint64_t{1} << 32), "randint: high must be in [1, 2**32], got ", high);
  const uint64_t range = high - 1;  // numpy draws in the closed interval [0, high - 1]
  if (range == 0) return 0;          // numpy takes no draw then
  // The smallest all-ones mask covering the range; a draw above the range is thrown away.
  uint64_t mask = range;
  for (int shift = 1; shift < 64; shift <<= 1) mask |= mask >> shift;
  for (;;) {
    const uint64_t draw = static_cast<uint64_t>(engine_()) & mask;
    if (draw <= range) return static_cast<int64_t>(draw);
  }
}

std::string NumpyRandomState::state_text() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

void NumpyRandomState::set_state_text(const std::string& text) {
  // Every number a 32-bit word (the stream would take larger ones, or -1, and go on off numpy's path).
  std::istringstream words(text);
  std::string word;
  size_t count = 0;
  while (words >> word) {
    ++count;
    if (word.size() > 10 || word.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(word) > 0xFFFFFFFFull)
      fail(Status::InvalidArgument, "not the state of a Mersenne Twister: '", word.substr(0, 20), "' is no 32-bit word");
  }
  std::istringstream in(text);
  std::mt19937 engine;
  in >> engine;
  std::string rest;
  if (count < std::mt19937::state_size || in.fail() || (in >> rest, !rest.empty()))
    fail(Status::InvalidArgument, "not the state of a Mersenne Twister (624 words and a position)");
  engine_ = engine;
}

}  // namespace acc
