// Data sharding against Accelerate's own answers (../shared/conformance, recorded from Accelerate
// v1.14.0): every case of the kinds implemented so far must match exactly.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "data/sampler.h"
#include "data/sharding.h"

namespace {

using nlohmann::json;
using Batches = std::vector<std::vector<int64_t>>;

json load_cases(const std::string& file) {
  const char* dir = std::getenv("ACC_CONFORMANCE_DIR");
  if (!dir) return json();
  gzFile f = gzopen((std::string(dir) + "/" + file).c_str(), "rb");
  if (!f) return json();
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  gzclose(f);
  return json::parse(text);
}

const json& shard_cases() {
  static const json cases = load_cases("shard_cases.json.gz");
  return cases;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST(Conformance, BatchSamplerShard) {
  const json& doc = shard_cases();
  if (doc.is_null()) GTEST_SKIP() << "ACC_CONFORMANCE_DIR/shard_cases.json.gz not found";
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    if (c["kind"] != "batch_sampler_shard") continue;
    const auto& p = c["params"];
    const int64_t n = p["n"], b = p["batch_size"], procs = p["num_processes"];
    const bool drop_last = p["drop_last"], even = p["even_batches"], split = p["split_batches"];
    if (c.contains("error")) {  // Accelerate refused: so do we
      EXPECT_THROW(acc::check_sharding(b, procs, split), acc::Error) << p.dump();
      continue;
    }
    const Batches all = acc::make_batches(iota(n), b, drop_last);
    for (int64_t r = 0; r < procs; ++r) {
      const Batches expected = c["per_process"][r].get<Batches>();
      const Batches ours = split ? acc::split_batches(all, b, drop_last, procs, r, even)
                                 : acc::shard_batches(all, b, drop_last, procs, r, even);
      ASSERT_EQ(ours, expected) << p.dump() << " rank " << r;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

TEST(Conformance, SeededShufflePermutationsAndShards) {
  const json& doc = shard_cases();
  if (doc.is_null()) GTEST_SKIP() << "ACC_CONFORMANCE_DIR/shard_cases.json.gz not found";
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    if (c["kind"] != "seeded_shuffle" || c.contains("error")) continue;  // refusals: with split_batches
    const auto& p = c["params"];
    const int64_t n = p["n"], b = p["batch_size"], procs = p["num_processes"];
    const bool drop_last = p["drop_last"], even = p["even_batches"];
    for (const auto& e : c["epochs"]) {
      const auto order = acc::epoch_order(n, true, p["seed"].get<uint64_t>(), e["epoch"].get<int64_t>());
      ASSERT_EQ(order, e["permutation"].get<std::vector<int64_t>>()) << p.dump() << " epoch " << e["epoch"];
      // A prepared loader shards only on more than one process.
      const Batches all = acc::make_batches(order, b, drop_last);
      const bool split = p["split_batches"];
      for (int64_t r = 0; r < procs; ++r)
        ASSERT_EQ(procs == 1 ? all
                  : split    ? acc::split_batches(all, b, drop_last, procs, r, even)
                             : acc::shard_batches(all, b, drop_last, procs, r, even),
                  e["per_process"][r].get<Batches>())
            << p.dump() << " epoch " << e["epoch"] << " rank " << r;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}
