// `accelerate merge-weights` (merge_model_shards) puts a stage 3 SHARDED_STATE_DICT checkpoint
// back together from its layout metadata alone. Shards written before parameters and slices were
// aligned to kFlatAlignment (parameters back to back, slices of ceil(extent / N)) must still merge,
// as the README promises; a layout that is neither is refused naming the file.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "parallel/flat_layout.h"
#include "parallel/merge_shards.h"
#include "parallel/sharded_checkpoint_parts.h"

namespace {

namespace fs = std::filesystem;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset;
};

// Writes the shards of `processes` processes of one unit holding `params` (cut into slices of
// `slice` elements) plus a replicated buffer, as a stage 3 save does; returns the full values.
acc::NamedTensors write_shards(const fs::path& dir, const std::vector<Param>& params, int64_t slice,
                               int64_t processes) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const at::Tensor flat = at::zeros({slice * processes});
  acc::NamedTensors full;
  nlohmann::json listed = nlohmann::json::array(), order = nlohmann::json::array();
  for (const Param& p : params) {
    const at::Tensor values = at::randn(p.shape);
    flat.narrow(0, p.offset, values.numel()).copy_(values.flatten());
    full.emplace_back(p.name, values);
    listed.push_back({p.name, p.shape, p.offset});
    order.push_back(p.name);
  }
  const at::Tensor buffer = at::arange(3, at::kLong);
  full.emplace_back("running", buffer);
  order.push_back("running");
  const nlohmann::json layout = {{"units", {{{"slice", slice}, {"params", listed}}}}, {"order", order}};
  for (int64_t r = 0; r < processes; ++r) {
    acc::NamedTensors shard{{"unit.0", flat.narrow(0, r * slice, slice).clone()}};
    shard.emplace_back("running", buffer);
    acc::save_safetensors((dir / acc::shard_name("model", 0, r)).string(), shard,
                          {{"format", "pt"},
                           {"zero_stage", "3"},
                           {"num_processes", std::to_string(processes)},
                           {"process_index", std::to_string(r)},
                           {"layout", layout.dump()}});
  }
  return full;
}

void expect_merged(const fs::path& dir, const acc::NamedTensors& full) {
  const acc::NamedTensors merged = acc::merge_model_shards(dir.string(), 0);
  ASSERT_EQ(merged.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(merged[i].first, full[i].first);
    EXPECT_TRUE(merged[i].second.equal(full[i].second)) << full[i].first;
  }
}

const fs::path kDir = fs::temp_directory_path() / "acc_test_merge_layouts";

TEST(MergeWeights, MergesTheAlignedLayout) {
  // "a" (15 elements) at 0, "b" (7) at the next multiple of 64; 71 elements in slices of 64.
  const int64_t slice = acc::flat_slice(64 + 7, 2);
  ASSERT_EQ(slice % acc::kFlatAlignment, 0);
  expect_merged(kDir, write_shards(kDir, {{"a", {3, 5}, 0}, {"b", {7}, 64}}, slice, 2));
}

TEST(MergeWeights, MergesTheLayoutWrittenBeforeAlignment) {
  // Back to back: "b" right after "a", 22 elements in slices of ceil(22 / 3) = 8.
  expect_merged(kDir, write_shards(kDir, {{"a", {3, 5}, 0}, {"b", {7}, 15}}, 8, 3));
}

TEST(MergeWeights, RefusesSlicesOfNeitherLayout) {
  // 22 elements in slices of 12: more padding than either rule gives.
  write_shards(kDir, {{"a", {3, 5}, 0}, {"b", {7}, 15}}, 12, 2);
  try {
    acc::merge_model_shards(kDir.string(), 0);
    FAIL() << "merged a unit of 24 elements whose parameters end at 22";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::Io);
    EXPECT_NE(std::string(e.what()).find("holds 24 elements, its parameters only 22"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(acc::shard_name("model", 0, 0)), std::string::npos) << e.what();
  }
  fs::remove_all(kDir);
}

}  // namespace
