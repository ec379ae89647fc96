#include "tracking/clearml_events.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/files.h"

namespace acc::tracking::clearml {
namespace {

// Python's urllib.parse.quote with ClearML's safe characters: letters, digits, "_.-~" and
// "'[]{}()$^,.; -_+=/" kept, every other byte %XX.
std::string quoted(const std::string& text) {
  static const char* const safe = "_.-~'[]{}()$^,; +=/";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) && c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c != 0 && std::strchr(safe, c)) {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// ClearML's UploadEvent._replace_slash: '\\' as '/', the '/' at the ends dropped, the others as
// ".slash.", and #"';?:@&=+$,%! and line breaks as 0x<hex>.
std::string replaced_slashes(std::string text) {
  std::replace(text.begin(), text.end(), '\\', '/');
  const size_t first = text.find_first_not_of('/');
  text = first == std::string::npos ? "" : text.substr(first, text.find_last_not_of('/') - first + 1);
  std::string out;
  for (char c : text) {
    if (c == '/') {
      out += ".slash.";
    } else if (std::strchr("#\"';?:@&=+$,%!\r\n", c) && c != 0) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Python's text[:n] counts characters: a cut never splits one.
std::string first_characters(const std::string& text, size_t n) {
  size_t bytes = 0, count = 0;
  while (bytes < text.size() && count < n) {
    ++bytes;
    while (bytes < text.size() && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) ++bytes;
    ++count;
  }
  return text.substr(0, bytes);
}

}  // namespace

void check_image_key(const std::string& key, const std::string& what) {
  for (const auto& part : path_parts(key)) {
    require(part.size() <= 250, "clearml: ", what, " makes a part of the images' paths longer than 250 bytes (\"",
            part.substr(0, 40), "...\"): ClearML would shorten it by a digest, which is not built");
    require(part != "." && part != "..", "clearml: ", what, " makes a \"", part,
            "\" part of the images' paths, which would lead out of the session's folder");
  }
}

std::pair<std::string, std::string> title_series(const std::string& name) {
  for (const char* prefix : {"eval", "test", "train"}) {
    const std::string start = std::string(prefix) + "_";
    if (name.rfind(start, 0) == 0) return {name.substr(start.size()), prefix};
  }
  return {name, "train"};
}

nlohmann::ordered_json scalar_event(int64_t timestamp_ms, const std::string& task_id, int64_t iteration,
                                    const std::string& metric, const std::string& variant, double value) {
  return {{"timestamp", timestamp_ms},
          {"type", "training_stats_scalar"},
          {"task", task_id},
          {"iter", iteration},
          {"metric", metric},
          {"variant", variant},
          {"value", value}};
}

nlohmann::ordered_json image_event(int64_t timestamp_ms, const std::string& task_id, int64_t iteration,
                                   const std::string& metric, const std::string& variant, const std::string& key,
                                   const std::string& url) {
  return {{"timestamp", timestamp_ms},
          {"type", "training_debug_image"},
          {"task", task_id},
          {"iter", iteration},
          {"metric", metric},
          {"variant", variant},
          {"key", key},
          {"url", url}};
}

std::string image_key(const std::string& project, const std::string& task_name, const std::string& task_id,
                      const std::string& metric, const std::string& variant, int64_t counter,
                      const std::string& extension) {
  // Task._get_output_destination_suffix: the name cut so that "<name>.<id>" fits 128 characters.
  const size_t room = task_id.size() + 1 < 128 ? 128 - task_id.size() - 1 : 0;
  char number[24];
  std::snprintf(number, sizeof number, "%08lld", static_cast<long long>(counter));
  const std::string parts[] = {quoted(project),
                               quoted(first_characters(task_name, room)) + "." + task_id,
                               "metrics",
                               replaced_slashes(metric),
                               replaced_slashes(variant),
                               replaced_slashes(metric + "_" + variant + "_" + number) + extension};
  std::string key;  // empty parts left out, as ClearML joins them
  for (const auto& part : parts)
    if (!part.empty()) key += (key.empty() ? "" : "/") + part;
  return key;
}

}  // namespace acc::tracking::clearml
