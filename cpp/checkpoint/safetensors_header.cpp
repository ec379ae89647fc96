#include "checkpoint/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <unordered_set>

#include "common/error.h"
#include "common/json_input.h"

namespace acc {
namespace {

// Where the parser is: the header object, a tensor's entry, __metadata__, a shape, data_offsets, or
// inside a value the reader ignores.
enum class Place { Header, Tensor, Metadata, Shape, Offsets, Ignored };

struct HeaderReader : nlohmann::json::json_sax_t {
  const std::string& path;
  SafetensorsHeader header;
  std::vector<Place> places;  // empty before the header's object opens
  std::string last_key;       // the last key of the innermost object
  std::unordered_set<std::string> names;
  bool metadata_seen = false;

  explicit HeaderReader(const std::string& path) : path(path) {}

  [[noreturn]] void refuse(const std::string& why) const { fail(Status::Io, "'", path, "': ", why); }
  SafetensorsEntry& entry() { return header.entries.back(); }
  std::string tensor() { return "tensor '" + entry().name + "'"; }
  [[noreturn]] void refuse_entry() { refuse(tensor() + " needs dtype, shape and data_offsets [begin, end]"); }

  // __metadata__ met (once only, as the reference refuses a second one).
  void take_metadata() {
    if (metadata_seen) refuse("__metadata__ appears twice in the header");
    metadata_seen = true;
  }
  // A value where __metadata__'s strings, a shape's sizes or data_offsets' numbers go, but none of them.
  [[noreturn]] void refuse_in(Place place) {
    if (place == Place::Metadata) refuse("__metadata__['" + last_key + "'] is not a string");
    if (place == Place::Shape) refuse(tensor() + " has a bad shape");
    refuse(tensor() + " has bad data_offsets");
  }

  // A value other than an object or an array (`null`: JSON's null), where the parser is.
  bool scalar(bool null = false) {
    if (places.empty()) refuse("the header is not a JSON object");
    switch (places.back()) {
      case Place::Header:
        if (last_key == "__metadata__" && null) return take_metadata(), true;  // the reference's Option
        if (last_key == "__metadata__") refuse("__metadata__ must be an object of strings");
        refuse("tensor '" + last_key + "' needs dtype, shape and data_offsets [begin, end]");
      case Place::Tensor:
        if (last_key == "dtype" || last_key == "shape" || last_key == "data_offsets") refuse_entry();
        return true;  // another key: ignored
      case Place::Ignored:
        return true;
      default:
        refuse_in(places.back());
    }
  }

  bool open(bool object) {
    if (places.size() >= static_cast<size_t>(kMaxJsonDepth))
      refuse("the header is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (places.empty()) {
      if (!object) refuse("the header is not a JSON object");
      places.push_back(Place::Header);
      return true;
    }
    switch (places.back()) {
      case Place::Header:
        if (last_key == "__metadata__") {
          if (!object) refuse("__metadata__ must be an object of strings");
          take_metadata();
          places.push_back(Place::Metadata);
          return true;
        }
        if (!object) refuse("tensor '" + last_key + "' needs dtype, shape and data_offsets [begin, end]");
        if (!names.insert(last_key).second) refuse("tensor '" + last_key + "' is named twice in the header");
        if (last_key.find('\0') != std::string::npos) refuse("a tensor's name holds a NUL character");
        header.entries.emplace_back();
        header.entries.back().name = last_key;
        places.push_back(Place::Tensor);
        return true;
      case Place::Tensor:
        if (last_key == "shape" && !object) {
          if (entry().has_shape) refuse(tensor() + " has two shapes");
          entry().has_shape = true;
          places.push_back(Place::Shape);
        } else if (last_key == "data_offsets" && !object) {
          if (entry().has_offsets) refuse(tensor() + " has two data_offsets");
          entry().has_offsets = true;
          places.push_back(Place::Offsets);
        } else if (last_key == "dtype" || last_key == "shape" || last_key == "data_offsets") {
          refuse_entry();
        } else {
          places.push_back(Place::Ignored);
        }
        return true;
      case Place::Ignored:
        places.push_back(Place::Ignored);
        return true;
      default:
        refuse_in(places.back());
    }
  }

  bool close() {
    if (places.back() == Place::Tensor && (!entry().has_dtype || !entry().has_shape || !entry().has_offsets))
      refuse_entry();
    if (places.back() == Place::Offsets && offsets_read != 2) refuse_entry();
    if (places.back() == Place::Offsets) offsets_read = 0;
    places.pop_back();
    return true;
  }

  size_t offsets_read = 0;
  bool number(uint64_t value) {
    if (places.empty()) refuse("the header is not a JSON object");
    if (places.back() == Place::Shape) {
      if (entry().shape.size() >= kMaxSafetensorsDims)
        refuse(tensor() + " has more than " + std::to_string(kMaxSafetensorsDims) + " dimensions");
      if (value > static_cast<uint64_t>(INT64_MAX)) refuse(tensor() + " has a bad shape");
      entry().shape.push_back(static_cast<int64_t>(value));
      return true;
    }
    if (places.back() == Place::Offsets) {
      if (offsets_read == 2) refuse_entry();
      (offsets_read++ == 0 ? entry().begin : entry().end) = value;
      return true;
    }
    return scalar();
  }

  bool null() override { return scalar(/*null=*/true); }
  bool boolean(bool) override { return scalar(); }
  // A signed integer is one written with a minus sign ("-0" too): never a size, as the reference reads it.
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t value) override { return number(value); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& value) override {
    if (!places.empty() && places.back() == Place::Tensor && last_key == "dtype") {
      if (entry().has_dtype) refuse(tensor() + " has two dtypes");
      entry().dtype = value;
      entry().has_dtype = true;
      return true;
    }
    if (!places.empty() && places.back() == Place::Metadata) {
      header.metadata[last_key] = value;  // a repeated key: the last value, as a JSON parser keeps it
      return true;
    }
    return scalar();
  }
  bool start_object(std::size_t) override { return open(true); }
  bool key(string_t& value) override {
    last_key = value;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    refuse("the header is not valid JSON: " + std::string(plain_message(e)));
  }
};

}  // namespace

SafetensorsHeader read_safetensors_header(std::string_view text, const std::string& path) {
  // nlohmann's lexer takes a NUL byte for the end of its input: what follows would go unread.
  if (const size_t at = text.find('\0'); at != std::string_view::npos)
    fail(Status::Io, "'", path, "': the header holds a NUL byte at offset ", at);
  // nlohmann's lexer skips a byte-order mark; the reference reader's JSON parser refuses it.
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    fail(Status::Io, "'", path, "': the header starts with a UTF-8 byte-order mark, which is not JSON");
  HeaderReader reader(path);
  nlohmann::json::sax_parse(text.begin(), text.end(), &reader);  // (errors throw from the reader)
  return std::move(reader.header);
}

}  // namespace acc
