#include "checkpoint/state_files.h"

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <filesystem>

#include "common/device.h"
#include "common/json_input.h"

namespace acc {
using nlohmann::json;

std::string indexed_name(const std::string& stem, size_t i, const std::string& extension) {
  return i == 0 ? stem + extension : stem + "_" + std::to_string(i) + extension;
}

std::string join_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

std::string read_file(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) fail(Status::Io, "checkpoint file '", path, "' is missing or unreadable");
  return std::move(*bytes);
}

json read_json(const std::string& path) {
  return parse_json_input(read_file(path), "checkpoint file '" + path + "'", Status::Io);
}

void write_scheduler_state(const std::string& path, const SchedulerState& state) {
  write_file(path, json{{"step", state.step}, {"base_lrs", state.base_lrs}}.dump(2));
}

SchedulerState read_scheduler_state(const std::string& path) {
  const json j = read_json(path);
  SchedulerState state{json_field_at_least<int64_t>(j, "step", path, 0),
                       json_field<std::vector<double>>(j, "base_lrs", path)};
  for (double lr : state.base_lrs)
    if (lr < 0) fail(Status::Io, "checkpoint file '", path, "': 'base_lrs' holds a negative learning rate ", lr);
  return state;
}

void write_scaler_state(const std::string& path, const ScalerState& state) {
  write_file(path, json{{"scale", state.scale}, {"growth_tracker", state.growth_tracker}}.dump(2));
}

ScalerState read_scaler_state(const std::string& path) {
  const json j = read_json(path);
  return {json_field<double>(j, "scale", path), json_field_at_least<int64_t>(j, "growth_tracker", path, 0)};
}

namespace {

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

std::vector<uint8_t> from_hex(const json& j, size_t loader, const std::string& path) {
  if (!j.contains("generator_state")) return {};
  const auto text = json_field<std::string>(j, "generator_state", path);
  auto digit = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    fail(Status::Io, "checkpoint file '", path, "': loader ", loader, "'s generator_state is not hexadecimal");
  };
  if (text.size() % 2 != 0)
    fail(Status::Io, "checkpoint file '", path, "': loader ", loader, "'s generator_state has an odd length");
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  return bytes;
}

}  // namespace

void write_loader_states(const std::string& path, const std::vector<LoaderState>& states) {
  json all = json::array();
  for (const auto& s : states) {
    json entry = {{"epoch", s.epoch}, {"position", s.position}, {"epoch_seed", optional_seed(s.epoch_seed)},
                  {"seed", optional_seed(s.seed)}};
    if (!s.generator_state.empty()) entry["generator_state"] = to_hex(s.generator_state);
    all.push_back(entry);
  }
  write_file(path, all.dump(2));
}

std::vector<LoaderState> read_loader_states(const std::string& path) {
  const json all = read_json(path);
  if (!all.is_array()) fail(Status::Io, "checkpoint file '", path, "' is not a list of loader states");
  std::vector<LoaderState> states;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i].is_object()) fail(Status::Io, "checkpoint file '", path, "': loader ", i, " is not an object");
    LoaderState s;
    s.epoch = json_field_at_least<int64_t>(all[i], "epoch", path, 0);
    s.position = json_field_at_least<int64_t>(all[i], "position", path, 0);
    s.epoch_seed = read_optional_seed(all[i], "epoch_seed", path);
    s.seed = read_optional_seed(all[i], "seed", path);
    s.generator_state = from_hex(all[i], i, path);
    states.push_back(s);
  }
  return states;
}

namespace {

std::vector<std::pair<std::string, at::Generator>> generators() {
  std::vector<std::pair<std::string, at::Generator>> all = {{"cpu", at::detail::getDefaultCPUGenerator()}};
  for (int64_t i = 0; cuda_available() && i < cuda_device_count(); ++i)
    all.emplace_back("cuda_" + std::to_string(i),
                     at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i))));
  return all;
}

}  // namespace

NamedTensors capture_rng_states() {
  NamedTensors states;
  for (auto& generator : generators()) states.emplace_back(generator.first, generator.second.get_state());
  return states;
}

std::function<void()> prepare_rng_restore(const NamedTensors& saved, const std::string& path) {
  std::vector<std::function<void()>> sets;
  for (auto& generator : generators()) {
    auto it = std::find_if(saved.begin(), saved.end(), [&](const auto& entry) { return entry.first == generator.first; });
    if (it == saved.end())
      fail(Status::InvalidArgument, "checkpoint file '", path, "' has no state for the ", generator.first, " generator");
    if (it->second.scalar_type() != at::kByte || it->second.numel() != generator.second.get_state().numel())
      fail(Status::InvalidArgument, "checkpoint file '", path, "': the ", generator.first,
           " generator state has the wrong size or type");
    sets.push_back([gen = generator.second, state = it->second.clone()]() mutable { gen.set_state(state); });
  }
  return [sets] {
    for (const auto& set : sets) set();
  };
}

}  // namespace acc
