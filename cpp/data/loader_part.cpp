#include "data/loader_part.h"

#include "checkpoint/save_identity.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/files.h"

namespace acc {
namespace {
using nlohmann::json;

json optional_seed(const std::optional<uint64_t>& seed) { return seed ? json(*seed) : json(nullptr); }

std::optional<uint64_t> read_optional_seed(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return json_field<uint64_t>(j, key, path);
}

// Generator states as hexadecimal text (a CPU generator's is 5 KB).
std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    text.push_back(digits[b >> 4]);
    text.push_back(digits[b & 15]);
  }
  return text;
}

// `what` names the value in errors, e.g. "loader 0's generator_state".
std::vector<uint8_t> from_hex(const std::string& text, const std::string& what, const std::string& path) {
  auto digit = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    fail(Status::Io, "checkpoint file '", path, "': ", what, " is not hexadecimal");
  };
  if (text.size() % 2 != 0) fail(Status::Io, "checkpoint file '", path, "': ", what, " has an odd length");
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  return bytes;
}

// A generator state saved under `key` (none: empty).
std::vector<uint8_t> read_state_bytes(const json& j, const char* key, size_t loader, const std::string& path) {
  if (!j.contains(key)) return {};
  return from_hex(json_field<std::string>(j, key, path), "loader " + std::to_string(loader) + "'s " + key, path);
}

std::vector<std::vector<uint8_t>> read_worker_states(const json& j, size_t loader, const std::string& path) {
  if (!j.contains("worker_states")) return {};
  const json& texts = j["worker_states"];
  const std::string what = "loader " + std::to_string(loader) + "'s worker_states";
  if (!texts.is_array()) fail(Status::Io, "checkpoint file '", path, "': ", what, " is not a list");
  std::vector<std::vector<uint8_t>> states;
  for (size_t w = 0; w < texts.size(); ++w) {
    const std::string item = what + "[" + std::to_string(w) + "]";
    if (!texts[w].is_string()) fail(Status::Io, "checkpoint file '", path, "': ", item, " is not a string");
    states.push_back(from_hex(texts[w].get<std::string>(), item, path));
  }
  return states;
}

// Each loader's entry records the save's id (see save_identity.h): a process's loader positions copied
// in from another save of the same job would resume a data order that no process ever held.
void check_entry_save_id(const json& entry, const std::string& expected, const std::string& path) {
  if (expected.empty()) return;
  Metadata recorded;
  if (entry.contains(kSaveIdKey)) recorded[kSaveIdKey] = json_field<std::string>(entry, kSaveIdKey, path);
  check_save_id(recorded, expected, path);
}

std::vector<LoaderState> read_loader_states(const std::string& path, const std::string& save_id) {
  const json all = read_json(path);
  if (!all.is_array()) fail(Status::Io, "checkpoint file '", path, "' is not a list of loader states");
  std::vector<LoaderState> states;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i].is_object()) fail(Status::Io, "checkpoint file '", path, "': loader ", i, " is not an object");
    check_entry_save_id(all[i], save_id, path);
    LoaderState s;
    s.epoch = json_field_at_least<int64_t>(all[i], "epoch", path, 0);
    s.position = json_field_at_least<int64_t>(all[i], "position", path, 0);
    s.epoch_seed = read_optional_seed(all[i], "epoch_seed", path);
    s.seed = read_optional_seed(all[i], "seed", path);
    s.generator_state = read_state_bytes(all[i], "generator_state", i, path);
    s.iterator_seed = read_optional_seed(all[i], "iterator_seed", path);
    s.worker_states = read_worker_states(all[i], i, path);
    s.next_batch_random_state = read_state_bytes(all[i], "next_batch_random_state", i, path);
    s.first_batch_random_state = read_state_bytes(all[i], "first_batch_random_state", i, path);
    if (all[i].contains("unread_skip")) s.unread_skip = json_field_at_least<int64_t>(all[i], "unread_skip", path, 0);
    if (all[i].contains("layout")) {
      const json& layout = all[i]["layout"];
      if (!layout.is_object())
        fail(Status::Io, "checkpoint file '", path, "': loader ", i, "'s layout is not an object");
      s.layout = LoaderState::Layout{json_field_at_least<int64_t>(layout, "batches", path, -1),
                                     json_field_at_least<int64_t>(layout, "batch_size", path, -1),
                                     json_field_at_least<int64_t>(layout, "samples", path, -1)};
    }
    states.push_back(s);
  }
  return states;
}

class LoaderStatesPart final : public CheckpointPart {
 public:
  LoaderStatesPart(int64_t rank, std::vector<std::shared_ptr<DataLoader>> loaders)
      : rank_(rank), loaders_(std::move(loaders)) {}

  std::string file() const override { return "dataloader_state_" + std::to_string(rank_) + ".json"; }
  bool per_process() const override { return true; }
  void save(const std::string& path) const override {
    json all = json::array();
    for (const auto& loader : loaders_) {
      const LoaderState s = loader->state();
      json entry = {{"epoch", s.epoch}, {"position", s.position}, {"epoch_seed", optional_seed(s.epoch_seed)},
                    {"seed", optional_seed(s.seed)}, {kSaveIdKey, save_id()}};
      if (!s.generator_state.empty()) entry["generator_state"] = to_hex(s.generator_state);
      if (s.iterator_seed) entry["iterator_seed"] = *s.iterator_seed;
      if (!s.worker_states.empty()) {
        json states = json::array();
        for (const auto& bytes : s.worker_states) states.push_back(to_hex(bytes));
        entry["worker_states"] = states;
      }
      if (!s.next_batch_random_state.empty()) entry["next_batch_random_state"] = to_hex(s.next_batch_random_state);
      if (!s.first_batch_random_state.empty()) entry["first_batch_random_state"] = to_hex(s.first_batch_random_state);
      if (s.unread_skip > 0) entry["unread_skip"] = s.unread_skip;
      entry["layout"] = {{"batches", loader->length()},
                         {"batch_size", loader->total_batch_size()},
                         {"samples", loader->total_dataset_length()}};
      all.push_back(entry);
    }
    write_file(path, all.dump(2));
  }
  StagedLoad load(const std::string& path) const override {
    const auto states = read_loader_states(path, save_id());
    if (states.size() != loaders_.size())
      fail(Status::InvalidArgument, "checkpoint file '", path, "' holds ", states.size(), " loader states, ",
           loaders_.size(), " loaders are prepared");
    for (size_t i = 0; i < loaders_.size(); ++i) checked_by_file(path, [&] { loaders_[i]->check_state(states[i]); });
    return {[loaders = loaders_, states] {
              for (size_t i = 0; i < loaders.size(); ++i) loaders[i]->load_state(states[i]);
            },
            {},
            {}};
  }

 private:
  int64_t rank_;
  std::vector<std::shared_ptr<DataLoader>> loaders_;
};

}  // namespace

std::unique_ptr<CheckpointPart> loader_states_part(int64_t rank, std::vector<std::shared_ptr<DataLoader>> loaders) {
  return std::make_unique<LoaderStatesPart>(rank, std::move(loaders));
}

}  // namespace acc
