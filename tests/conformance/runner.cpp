// acc-conformance: computes the data-sharding cases of a vectors file (the format of
// ../shared/conformance/README.md) with this library's data module, from each case's params alone,
// and either checks them against the file's answers or writes our own answers (--emit FILE).
//
//   acc-conformance FILE.json.gz [--emit OUT.json] [--kind KIND]
// Exit code 0 when every checked case matches, 1 otherwise, 2 on usage errors.
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "accelerator/accelerator.h"
#include "common/error.h"
#include "data/map_dataloader.h"
#include "data/iterable_dataloader.h"
#include "data/sharded_dataloader.h"
#include "data/dispatcher.h"
#include "data/sampler.h"
#include "data/sharding.h"

namespace {

using nlohmann::json;
using Batches = std::vector<std::vector<int64_t>>;

std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  gzclose(f);
  return text;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

Batches chunk(const std::vector<int64_t>& elements, int64_t size, bool drop_last) {
  return acc::make_batches(elements, std::max<int64_t>(size, 1), drop_last);
}

// What a prepared map-style loader yields on each process (no sharding on one process).
std::vector<Batches> map_loader(const std::vector<int64_t>& order, int64_t b, bool drop_last, int64_t procs,
                                bool split, bool even) {
  if (procs > 1) acc::check_sharding(b, procs, split);
  const Batches all = acc::make_batches(order, b, drop_last);
  std::vector<Batches> out;
  for (int64_t r = 0; r < procs; ++r)
    out.push_back(procs == 1 ? all
                  : split    ? acc::split_batches(all, b, drop_last, procs, r, even)
                             : acc::shard_batches(all, b, drop_last, procs, r, even));
  return out;
}

// What a prepared iterable loader yields on each process: IterableDatasetShard, then batches of the
// per-process size.
std::vector<Batches> iterable_loader(int64_t n, int64_t b, bool drop_last, int64_t procs, bool split) {
  std::vector<Batches> out;
  for (int64_t r = 0; r < procs; ++r) {
    if (procs == 1) {
      out.push_back(chunk(iota(n), b, drop_last));
      continue;
    }
    const int64_t per = acc::per_process_batch_size(b, procs, split);
    out.push_back(chunk(acc::shard_iterable(n, b, drop_last, procs, r, split), per, drop_last));
  }
  return out;
}

// gather_for_metrics over an epoch of a prepared map loader: per step the processes' batches in
// rank order; on the last step, the remainder of real samples.
json gather_for_metrics(const std::vector<Batches>& per_process, int64_t n, int64_t b, bool drop_last, int64_t procs,
                        bool split, bool even) {
  size_t steps = 0;
  for (const auto& p : per_process) steps = std::max(steps, p.size());
  for (const auto& p : per_process)
    if (p.size() != steps) return json{{"well_defined", false}};
  const int64_t total = acc::total_batch_size(b, procs, split);
  const int64_t remainder = (drop_last || (procs > 1 && !even)) ? -1 : (procs == 1 ? n % b : n % total);
  std::vector<int64_t> kept;
  for (size_t s = 0; s < steps; ++s) {
    std::vector<int64_t> gathered;
    for (const auto& p : per_process) gathered.insert(gathered.end(), p[s].begin(), p[s].end());
    if (s + 1 == steps && remainder > 0 && remainder < static_cast<int64_t>(gathered.size()))
      gathered.resize(static_cast<size_t>(remainder));
    kept.insert(kept.end(), gathered.begin(), gathered.end());
  }
  return json{{"well_defined", true}, {"remainder", remainder}, {"kept", kept}};
}

json counts(const std::vector<Batches>& per_process) {
  json c = json::array();
  for (const auto& p : per_process) c.push_back(p.size());
  return c;
}

// Our answer for one case, from its kind and params only.
json compute(const std::string& kind, const json& p) {
  json ours{{"kind", kind}, {"params", p}};
  try {
    const int64_t n = p.value("n", 0), b = p.value("batch_size", 1), procs = p.value("num_processes", 1);
    const bool drop_last = p.value("drop_last", false), split = p.value("split_batches", false),
               even = p.value("even_batches", true);
    if (kind == "batch_sampler_shard") {
      acc::check_sharding(b, procs, split);
      const Batches all = acc::make_batches(iota(n), b, drop_last);
      std::vector<Batches> per;
      for (int64_t r = 0; r < procs; ++r)
        per.push_back(split ? acc::split_batches(all, b, drop_last, procs, r, even)
                            : acc::shard_batches(all, b, drop_last, procs, r, even));
      ours["per_process"] = per;
      ours["num_batches_per_process"] = counts(per);
    } else if (kind == "iterable_dataset_shard") {
      json per = json::array();
      for (int64_t r = 0; r < procs; ++r) per.push_back(acc::shard_iterable(n, b, drop_last, procs, r, split));
      ours["per_process"] = per;
    } else if (kind == "prepare_data_loader" || kind == "skip_first_batches") {
      const bool iterable = p.value("dataset", "map") == "iterable";
      auto per = iterable ? iterable_loader(n, b, drop_last, procs, split)
                          : map_loader(iota(n), b, drop_last, procs, split, even);
      const int64_t skip = kind == "skip_first_batches" ? p.value("skip", 0) : 0;
      for (auto& batches : per) batches.erase(batches.begin(), batches.begin() + std::min<size_t>(skip, batches.size()));
      ours["per_process"] = per;
      ours["num_batches_per_process"] = counts(per);
      if (!iterable && skip == 0) ours["gather_for_metrics"] = gather_for_metrics(per, n, b, drop_last, procs, split, even);
    } else if (kind == "seeded_shuffle") {
      json epochs = json::array();
      for (int64_t e = 0; e < 3; ++e) {
        const auto order = acc::epoch_order(n, true, p.at("seed").get<uint64_t>(), e);
        epochs.push_back({{"epoch", e}, {"permutation", order}, {"per_process", map_loader(order, b, drop_last, procs, split, even)}});
      }
      ours["epochs"] = epochs;
    } else {
      ours["unsupported"] = true;
    }
  } catch (const acc::Error& e) {
    ours["error"] = e.what();
  }
  return ours;
}

// Differences between Accelerate's answer and ours, as readable lines (empty: the case matches).
std::vector<std::string> compare(const json& theirs, const json& ours) {
  std::vector<std::string> diffs;
  if (ours.contains("unsupported")) return {"kind not implemented"};
  if (theirs.contains("error") || ours.contains("error")) {
    if (theirs.contains("error") != ours.contains("error"))
      diffs.push_back("accelerate: " + theirs.value("error", std::string("no error")) +
                      " / ours: " + ours.value("error", std::string("no error")));
    return diffs;
  }
  if (theirs.contains("per_process") && theirs["per_process"] != ours["per_process"])
    diffs.push_back("per_process: accelerate " + theirs["per_process"].dump() + " / ours " + ours["per_process"].dump());
  if (theirs.contains("epochs"))
    for (size_t e = 0; e < theirs["epochs"].size(); ++e) {
      const auto &t = theirs["epochs"][e], &o = ours["epochs"][e];
      if (t["permutation"] != o["permutation"] || t["per_process"] != o["per_process"])
        diffs.push_back("epoch " + std::to_string(e) + ": accelerate " + t.dump() + " / ours " + o.dump());
    }
  // Accelerate's gather_for_metrics is checked where it is right: well defined, no duplicates kept.
  if (theirs.contains("gather_for_metrics") && ours.contains("gather_for_metrics")) {
    const auto& t = theirs["gather_for_metrics"];
    if (t.value("well_defined", false) && !t.value("kept_has_duplicates", true) && t["kept"] != ours["gather_for_metrics"]["kept"])
      diffs.push_back("gather_for_metrics kept: accelerate " + t["kept"].dump() + " / ours " +
                      ours["gather_for_metrics"].dump());
  }
  return diffs;
}

// ---- dist_data_loader cases: real processes (run under accelerate-launch) ----

// Runs one case on this process with the library's own loaders and gather_for_metrics; returns
// {"per_process_mine": batches, "gathered_per_step": [...]} or {"error": ...}.
json run_dist_case(acc::Accelerator& accelerator, const json& p) {
  const int64_t n = p["n"], b = p["batch_size"], skip = p.value("skip", 0);
  const bool drop_last = p["drop_last"], split = p["split_batches"], even = p["even_batches"];
  const acc::ShardOptions shard{accelerator.num_processes(), accelerator.process_index(), split, even};
  acc::DataLoaderOptions options;
  options.batch_size = b;
  options.drop_last = drop_last;
  options.num_workers = 0;
  std::shared_ptr<acc::DataLoader> loader;
  const bool dispatch = p.value("dispatch_batches", false);
  const acc::ShardOptions shard_or_single = dispatch ? acc::ShardOptions{} : shard;
  try {
    if (p["dataset"] == "iterable") {
      auto cursor = std::make_shared<int64_t>(0);
      auto source = std::make_shared<acc::CallbackIterable>(
          [cursor, n]() -> std::optional<acc::Sample> {
            if (*cursor >= n) return std::nullopt;
            return acc::Sample{at::scalar_tensor((*cursor)++, at::kLong)};
          },
          [cursor](int64_t) { *cursor = 0; }, n);
      loader = std::make_shared<acc::IterableDataLoader>(source, options, shard_or_single);
    } else {
      auto data = std::make_shared<acc::TensorDataset>(std::vector<at::Tensor>{at::arange(n, at::TensorOptions().dtype(at::kLong))});
      loader = dispatch ? std::make_shared<acc::MapDataLoader>(data, options)
                        : std::make_shared<acc::ShardedDataLoader>(data, options, shard);
    }
    if (dispatch) loader = std::make_shared<acc::DispatchingDataLoader>(loader, accelerator.distributed(), split);
    loader->mark_prepared();  // it stands for what prepare_data_loader makes (a prepared stream reads ahead)
  } catch (const acc::Error& e) {
    return json{{"error", e.what()}};
  }
  loader->set_observer(accelerator.gradient_state());
  loader->skip_first_batches(skip);
  json mine = json::array(), gathered = json::array();
  while (auto batch = loader->next()) {
    const at::Tensor values = (*batch)[0].reshape({-1});
    mine.push_back(std::vector<int64_t>(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel()));
    const at::Tensor all = accelerator.gather_for_metrics(values, "conformance gather_for_metrics");
    gathered.push_back(std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel()));
  }
  return json{{"per_process_mine", mine}, {"gathered_per_step", gathered}};
}

int run_dist(const json& doc) {
  acc::Options options(acc::accelerator_option_table());
  options.set("cpu", true);
  options.set("timeout_seconds", int64_t{60});  // a case that desynchronises the processes fails fast
  acc::Accelerator accelerator(options);
  const int64_t world = accelerator.num_processes();
  int passed = 0, failed = 0, accelerate_bugs = 0, shown = 0;
  for (const auto& c : doc["cases"]) {
    const auto& p = c["params"];
    if (p["world_size"].get<int64_t>() != world) continue;
    if (std::getenv("ACC_CONFORMANCE_TRACE")) std::fprintf(stderr, "case %s\n", p.dump().c_str());
    json ours = run_dist_case(accelerator, p);
    // Every process's batches, to rank 0.
    const auto all = accelerator.collectives().gather_object(ours.value("per_process_mine", json::array()).dump(),
                                                             "conformance per_process");
    if (accelerator.process_index() != 0) continue;
    json per_process = json::array();
    for (const auto& text : all) per_process.push_back(json::parse(text));
    std::vector<std::string> diffs;
    // Where Accelerate itself failed (its bugs with skip and dispatch), ours must still keep the real
    // samples once; there is no answer of Accelerate's to compare batches with.
    const bool accelerate_failed = c.contains("error_per_process");
    if (accelerate_failed) ++accelerate_bugs;
    if (ours.contains("error")) diffs.push_back("ours failed: " + ours["error"].get<std::string>());
    else {
      if (!accelerate_failed && per_process != c["per_process"])
        diffs.push_back("per_process: accelerate " + c["per_process"].dump() + " / ours " + per_process.dump());
      // gather_for_metrics must keep exactly the real samples of the batches yielded, each once: the
      // epoch's samples past the skipped rounds (only whole rounds with drop_last). Where Accelerate
      // gets that right, every step must also match its answer.
      const int64_t n = p["n"], b = p["batch_size"], skip = p.value("skip", 0);
      const int64_t total = acc::total_batch_size(b, world, p["split_batches"].get<bool>());
      const int64_t end = p["drop_last"].get<bool>() ? n / total * total : n;
      std::vector<int64_t> expected_kept, kept;
      for (int64_t i = std::min(skip * total, end); i < end; ++i) expected_kept.push_back(i);
      for (const auto& step : ours["gathered_per_step"])
        for (const auto& v : step) kept.push_back(v.get<int64_t>());
      if (kept != expected_kept)
        diffs.push_back("kept: expected each real sample once " + json(expected_kept).dump() + " / ours " +
                        json(kept).dump());
      if (!accelerate_failed && c["kept"].get<std::vector<int64_t>>() == expected_kept &&
          ours["gathered_per_step"] != c["gathered_per_step"])
        diffs.push_back("gathered_per_step: accelerate " + c["gathered_per_step"].dump() + " / ours " +
                        ours["gathered_per_step"].dump());
    }
    (diffs.empty() ? passed : failed)++;
    for (const auto& d : diffs)
      if (shown++ < 10) std::printf("DIFF dist_data_loader %s: %s\n", p.dump().c_str(), d.c_str());
  }
  if (accelerator.process_index() == 0) {
    std::printf("dist_data_loader (world %lld): %d match, %d differ (%d of them where Accelerate itself failed: "
                "checked for each real sample kept once)\n",
                static_cast<long long>(world), passed, failed, accelerate_bugs);
    std::printf("%d passed, %d failed\n", passed, failed);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: acc-conformance FILE.json.gz [--emit OUT.json] [--kind KIND]\n");
    return 2;
  }
  std::string emit, only_kind;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--emit")) emit = argv[i + 1];
    else if (!std::strcmp(argv[i], "--kind")) only_kind = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  json doc;
  try {
    doc = json::parse(read_gz(argv[1]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "acc-conformance: %s\n", e.what());
    return 2;
  }
  if (doc.value("format", "").find("dist-cases") != std::string::npos) {
    if (!std::getenv("WORLD_SIZE")) {
      std::fprintf(stderr, "acc-conformance: %s holds multi-process cases: run it with accelerate-launch\n", argv[1]);
      return 2;
    }
    try {
      return run_dist(doc);
    } catch (const acc::Error& e) {
      std::fprintf(stderr, "acc-conformance: %s\n", e.what());
      return 1;
    }
  }
  std::map<std::string, std::pair<int, int>> tally;  // kind -> (matched, differing)
  json emitted = {{"format", doc.value("format", "")}, {"meta", {{"producer", "accelerate (C++) acc-conformance"}}},
                  {"cases", json::array()}};
  int shown = 0;
  for (const auto& c : doc["cases"]) {
    const std::string kind = c["kind"];
    if (!only_kind.empty() && kind != only_kind) continue;
    const json ours = compute(kind, c["params"]);
    if (!emit.empty()) emitted["cases"].push_back(ours);
    const auto diffs = compare(c, ours);
    auto& t = tally[kind];
    (diffs.empty() ? t.first : t.second)++;
    for (const auto& d : diffs)
      if (shown++ < 10) std::printf("DIFF %s %s: %s\n", kind.c_str(), c["params"].dump().c_str(), d.c_str());
  }
  if (!emit.empty()) std::ofstream(emit) << emitted.dump() << "\n";
  int passed = 0, failed = 0;
  for (const auto& [kind, t] : tally) {
    std::printf("%-24s %5d match, %d differ\n", kind.c_str(), t.first, t.second);
    passed += t.first;
    failed += t.second;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
