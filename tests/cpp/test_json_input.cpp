// JSON from outside the library (common/json_input.h): documents in their own order, repeated keys
// as nlohmann's parser and Python's json take them, and what is not JSON refused.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/json_input.h"

TEST(JsonInput, OrderedDocumentsKeepTheirOrderAndTheLastOfARepeatedKey) {
  const auto j = acc::parse_ordered_json_input(
      R"({"b": 1, "a": [true, null, 2.5, {"z": "x", "y": -3}], "c": {"k": 1, "j": 2, "k": 3}, "b": 4})", "test");
  EXPECT_EQ(j.dump(), R"({"b":4,"a":[true,null,2.5,{"z":"x","y":-3}],"c":{"k":3,"j":2}})");
  // The same as nlohmann's own parser gives.
  const std::string text = R"([{"q": 1, "p": {"r": [1, 2, {"s": 18446744073709551615}]}, "q": 2}, "t", -0.0])";
  EXPECT_EQ(acc::parse_ordered_json_input(text, "test"), nlohmann::ordered_json::parse(text));
  EXPECT_EQ(acc::parse_ordered_json_input("7", "test"), 7);
}

TEST(JsonInput, AnObjectOfManyKeysParsesWhole) {
  // 200,000 keys: nlohmann's ordered parser searched them one by one (a minute); this is linear.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const auto j = acc::parse_ordered_json_input(text, "test");
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.begin().key(), "k0");
  EXPECT_EQ(j["k199999"], 199999);
}

TEST(JsonInput, ANulByteAndWhatFollowsItAreRefused) {
  for (bool ordered : {false, true}) {
    const std::string text = std::string(R"({"a": 1})") + '\0' + "not json {{{";
    try {
      if (ordered)
        acc::parse_ordered_json_input(text, "'cfg.json'", acc::Status::Io);
      else
        acc::parse_json_input(text, "'cfg.json'", acc::Status::Io);
      ADD_FAILURE() << "accepted";
    } catch (const acc::Error& e) {
      EXPECT_EQ(e.status(), acc::Status::Io);
      EXPECT_NE(std::string(e.what()).find("'cfg.json' is not valid JSON: a NUL byte at offset 8"), std::string::npos)
          << e.what();
    }
  }
  // Escaped, it is a character like any other.
  EXPECT_EQ(acc::parse_ordered_json_input(R"(["a\u0000b"])", "test")[0].get<std::string>().size(), 3u);
  EXPECT_THROW(acc::parse_ordered_json_input(R"({"a": 1,})", "test"), acc::Error);
  EXPECT_THROW(acc::parse_ordered_json_input(R"({"a": 1} x)", "test"), acc::Error);
}
