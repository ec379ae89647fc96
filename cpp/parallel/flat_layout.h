// How sharded data parallelism lays out the trainable parameters: groups of consecutive parameters
// (units) are each flattened into one vector, padded to a multiple of the number of processes, and
// split evenly: process r owns the r-th contiguous slice of every unit. The slices a process owns,
// unit after unit, make its shard.
//
// Each parameter starts, and each slice is cut, at a multiple of kFlatAlignment elements, so every
// piece of a parameter begins at such a multiple within the parameter. PyTorch's vectorised CPU
// kernels round a tensor's vector body and its last few elements differently (the fused optimizer
// rules do), so an optimizer stepping the pieces gives the bits it gives the whole parameter only
// if no element crosses from one to the other.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace acc {

// Wider than any CPU vector of PyTorch's (64 bytes of int8) and a multiple of its parallel loops'
// 64-byte task units.
constexpr int64_t kFlatAlignment = 64;

// Each process's share of a unit whose parameters end at `extent`: ceil(extent / world), rounded up
// to kFlatAlignment.
int64_t flat_slice(int64_t extent, int64_t world);

struct FlatUnit {
  std::vector<size_t> params;    // indices into the trainable parameters, ascending
  std::vector<int64_t> offsets;  // where each starts in the unit's vector (a multiple of kFlatAlignment)
  int64_t numel = 0;             // where the last parameter ends (the padding between them included)
  int64_t slice = 0;             // each process's share: ceil(numel / processes), to kFlatAlignment
  int64_t shard_offset = 0;      // where this process's slice starts in its shard
  int64_t world = 1;
  at::ScalarType dtype = at::kFloat;
  int64_t padded() const { return slice * world; }  // the vector's length
  int64_t my_begin(int64_t rank) const { return rank * slice; }
};

// The part of one parameter a process owns.
struct FlatPiece {
  size_t param;        // index into the trainable parameters
  size_t unit;
  size_t slot;         // the parameter's place in its unit (FlatUnit::params, offsets)
  int64_t begin;       // first element owned, in the flattened parameter
  int64_t length;
  int64_t shard_pos;   // where it lies in the process's shard
};

class FlatLayout {
 public:
  // `units`: indices of consecutive parameters; a unit whose parameters differ in dtype is split.
  FlatLayout(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>& units, int64_t world,
             int64_t rank);

  const std::vector<FlatUnit>& units() const { return units_; }
  const std::vector<FlatPiece>& pieces() const { return pieces_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  // The unit each parameter belongs to.
  size_t unit_of(size_t param) const { return unit_of_[param]; }

 private:
  std::vector<FlatUnit> units_;
  std::vector<FlatPiece> pieces_;
  std::vector<size_t> unit_of_;
  int64_t shard_numel_ = 0;
  int64_t world_, rank_;
};

}  // namespace acc
