#include "parallel/flat_layout.h"

#include <algorithm>

#include "common/error.h"

namespace acc {
namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

int64_t flat_slice(int64_t extent, int64_t world) { return round_up((extent + world - 1) / world, kFlatAlignment); }

FlatLayout::FlatLayout(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>& units,
                       int64_t world, int64_t rank)
    : unit_of_(params.size(), SIZE_MAX), world_(world), rank_(rank) {
  auto close = [&](FlatUnit& unit) {
    if (unit.params.empty()) return;
    unit.world = world;
    unit.slice = flat_slice(unit.numel, world);
    unit.shard_offset = shard_numel_;
    shard_numel_ += unit.slice;
    const int64_t mine_begin = rank * unit.slice, mine_end = mine_begin + unit.slice;
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const int64_t begin = std::max(unit.offsets[k], mine_begin);
      const int64_t end = std::min(unit.offsets[k] + params[unit.params[k]].numel(), mine_end);
      if (begin < end)
        pieces_.push_back({unit.params[k], units_.size(), k, begin - unit.offsets[k], end - begin,
                           unit.shard_offset + begin - mine_begin});
      unit_of_[unit.params[k]] = units_.size();
    }
    units_.push_back(std::move(unit));
    unit = FlatUnit{};
  };
  for (const auto& indices : units) {
    FlatUnit unit;
    for (size_t i : indices) {
      require(i < params.size(), "sharding: parameter index ", i, " out of range");
      if (!unit.params.empty() && params[i].scalar_type() != unit.dtype) close(unit);
      if (unit.params.empty()) unit.dtype = params[i].scalar_type();
      unit.params.push_back(i);
      unit.offsets.push_back(round_up(unit.numel, kFlatAlignment));
      unit.numel = unit.offsets.back() + params[i].numel();
    }
    close(unit);
  }
  for (size_t i = 0; i < params.size(); ++i)
    require(unit_of_[i] != SIZE_MAX, "sharding: parameter ", i, " belongs to no unit");
}

}  // namespace acc
