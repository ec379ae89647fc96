// An independent reader of W&B's transaction log (a run's .wandb file) for the tests, written from
// the format as wandb's own readers take it (not with the library's framing, CRC or generated
// classes): the 7-byte header ":W&B" 0xBEE1 (little-endian) version 0; 32 KiB blocks from the file's
// start; chunks of a little-endian CRC-32 (IEEE, bit by bit here) over the type byte and the
// payload, a 2-byte length and a type (1 full, 2 first, 3 middle, 4 last), none crossing a block,
// fewer than 7 bytes left in a block all zero; each record a wandb_internal.Record, decoded by field
// number into JSON for the assertions.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "support.h"
#include "tracking_reader.h"

namespace acc_test {

inline uint32_t crc32_ieee_bitwise(const std::string& data) { return crc32_bitwise(data, 0xEDB88320u); }

// The records' payloads; a framing error is a test failure.
inline std::vector<std::string> wandb_log_payloads(const std::string& bytes) {
  std::vector<std::string> records;
  EXPECT_GE(bytes.size(), 7u);
  if (bytes.size() < 7) return records;
  EXPECT_EQ(bytes.substr(0, 7), std::string(":W&B\xe1\xbe\x00", 7)) << "the file's header";
  const size_t block = 32768;
  size_t at = 7;
  std::string record;
  bool inside = false;
  while (at < bytes.size()) {
    const size_t left = block - at % block;
    if (left < 7) {
      EXPECT_EQ(bytes.substr(at, left), std::string(std::min(left, bytes.size() - at), '\0')) << "padding at " << at;
      EXPECT_LT(at + left, bytes.size()) << "padding at the end of the file (at " << at << ")";
      at += left;
      continue;
    }
    if (at + 7 > bytes.size()) {
      ADD_FAILURE() << "a torn chunk header at " << at;
      break;
    }
    auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
    const uint32_t crc = byte(at) | byte(at + 1) << 8 | byte(at + 2) << 16 | byte(at + 3) << 24;
    const size_t length = byte(at + 4) | byte(at + 5) << 8;
    const int type = static_cast<int>(byte(at + 6));
    if (length > left - 7 || at + 7 + length > bytes.size()) {
      ADD_FAILURE() << "a chunk at " << at << " of " << length << " bytes crosses its block or the file's end";
      break;
    }
    const std::string payload = bytes.substr(at + 7, length);
    EXPECT_EQ(crc, crc32_ieee_bitwise(std::string(1, static_cast<char>(type)) + payload)) << "the CRC at " << at;
    if (type == 1 || type == 2) {
      EXPECT_FALSE(inside) << "a record starts at " << at << " inside another";
      record = payload;
      inside = type == 2;
      if (type == 1) records.push_back(record);
    } else if (type == 3 || type == 4) {
      EXPECT_TRUE(inside) << "a middle or last chunk at " << at << " outside a record";
      record += payload;
      if (type == 4) records.push_back(record), inside = false;
    } else {
      ADD_FAILURE() << "chunk type " << type << " at " << at;
      break;
    }
    at += 7 + length;
  }
  EXPECT_FALSE(inside) << "the last record is unfinished";
  return records;
}

// Items (ConfigItem, SummaryItem, HistoryItem: key = 1, nested_key = 2, value_json = 16) as
// {"<path joined by '|'>": "<value_json>"}.
inline nlohmann::ordered_json wandb_items(const std::vector<WireField>& fields, uint32_t number) {
  nlohmann::ordered_json items = nlohmann::ordered_json::object();
  for (const auto& f : fields) {
    if (f.number != number || f.type != 2) continue;
    std::string path, value;
    for (const auto& g : decode_message(f.bytes)) {
      if (g.number == 1) path = g.bytes;
      if (g.number == 2) path += (path.empty() ? "" : "|") + g.bytes;
      if (g.number == 16) value = g.bytes;
    }
    items[path] = value;
  }
  return items;
}

// Each record as {"num": n, "type": ..., its fields}.
inline nlohmann::ordered_json wandb_record(const std::string& payload) {
  nlohmann::ordered_json out = {{"num", 0}, {"type", "none"}};
  for (const auto& f : decode_message(payload)) {
    if (f.number == 1 && f.type == 0) out["num"] = f.integer;
    if (f.number == 16 && f.type == 2)  // Control: always_send = 5
      for (const auto& c : decode_message(f.bytes))
        if (c.number == 5) out["always_send"] = c.integer != 0;
    if (f.type != 2 || f.number == 16 || f.number == 200) continue;
    const std::vector<WireField> body = decode_message(f.bytes);
    switch (f.number) {
      case 2: {  // HistoryRecord: item = 1, step = 2 (num = 1)
        out["type"] = "history";
        out["items"] = wandb_items(body, 1);
        for (const auto& g : body)
          if (g.number == 2) {
            out["step"] = 0;  // proto3 leaves a zero out
            for (const auto& s : decode_message(g.bytes))
              if (s.number == 1) out["step"] = static_cast<int64_t>(s.integer);
          }
        break;
      }
      case 3:
        out["type"] = "summary";
        out["update"] = wandb_items(body, 1);
        break;
      case 5:
        out["type"] = "config";
        out["update"] = wandb_items(body, 1);
        break;
      case 6: {  // FilesRecord: files = 1 (path = 1)
        out["type"] = "files";
        out["paths"] = nlohmann::ordered_json::array();
        for (const auto& g : body)
          if (g.number == 1)
            for (const auto& p : decode_message(g.bytes))
              if (p.number == 1) out["paths"].push_back(p.bytes);
        break;
      }
      case 17: {  // RunRecord
        out["type"] = "run";
        out["tags"] = nlohmann::ordered_json::array();
        for (const auto& g : body) {
          const char* names[] = {nullptr,    "run_id",       "entity", "project", nullptr, nullptr, "run_group",
                                 "job_type", "display_name", "notes",  nullptr,   nullptr, nullptr, "host"};
          if (g.number < 14 && names[g.number]) out[names[g.number]] = g.bytes;
          if (g.number == 4) out["config"] = wandb_items(decode_message(g.bytes), 1);
          if (g.number == 10) out["tags"].push_back(g.bytes);
          if (g.number == 17)
            for (const auto& t : decode_message(g.bytes))
              if (t.number == 1) out["start_seconds"] = static_cast<int64_t>(t.integer);
        }
        break;
      }
      case 18:  // RunExitRecord: exit_code = 1, runtime = 2
        out["type"] = "exit";
        out["exit_code"] = 0;
        out["runtime"] = 0;
        for (const auto& g : body) {
          if (g.number == 1) out["exit_code"] = static_cast<int32_t>(g.integer);
          if (g.number == 2) out["runtime"] = static_cast<int32_t>(g.integer);
        }
        break;
      case 20:
        out["type"] = "final";
        break;
      case 21:  // HeaderRecord: version_info = 1 (producer = 1)
        out["type"] = "header";
        for (const auto& g : body)
          if (g.number == 1)
            for (const auto& v : decode_message(g.bytes))
              if (v.number == 1) out["producer"] = v.bytes;
        break;
      default:
        out["type"] = "field " + std::to_string(f.number);
    }
  }
  return out;
}

inline std::vector<nlohmann::ordered_json> read_wandb_log(const std::string& path) {
  std::vector<nlohmann::ordered_json> records;
  for (const auto& payload : wandb_log_payloads(read_file(path))) records.push_back(wandb_record(payload));
  return records;
}

}  // namespace acc_test
