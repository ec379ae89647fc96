// Python pickles read as data, never as code: the opcodes protocols 2 to 4 write for numbers,
// strings, bytes, tuples, lists, dicts and sets are understood; a class or function a pickle names
// (GLOBAL) is never looked up or called. REDUCE, NEWOBJ and BUILD only record what would have been
// called with which arguments, for the reader's caller to interpret (torch.save's tensors, NumPy's
// arrays), except two plain-data constructors: collections.OrderedDict (a dict) and
// _codecs.encode(text, "latin1") (bytes in protocol 2). A pickle from anywhere is safe to read.
//
// libtorch's own Unpickler cannot do this: it reads only integers of at most 8 bytes as LONG1
// (Python's random.getstate() writes 5-byte ones) and refuses any global it has no class for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace acc {

struct PickleNode {
  enum class Kind {
    None,
    Bool,
    Int,     // fits int64
    BigInt,  // does not: `text` holds its little-endian two's-complement bytes
    Float,
    String,      // UTF-8 in `text`
    Bytes,       // in `text`
    Tuple,       // `items`
    List,        // `items` (sets too)
    Dict,        // `items`: key, value, key, value ...
    Global,      // "module.name" in `text`
    Call,        // items[0] the callable (a Global), items[1] its arguments (a Tuple); `state` after BUILD
    Persistent,  // a persistent id (torch.save's storages): items[0]
  };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<const PickleNode*> items;
  const PickleNode* state = nullptr;

  // A dict's value for a string or int key; null when absent (or not a dict).
  const PickleNode* find(std::string_view key) const;
  const PickleNode* find_int(int64_t key) const;
  // Whether this is a Call of the global `name` ("module.name").
  bool is_call_of(std::string_view name) const;
};

// What a pickle holds. The nodes belong to it (one flat arena: a pickle nested a million deep or
// referring to itself is freed without recursion).
class Pickle {
 public:
  const PickleNode& root() const { return *root_; }

 private:
  friend class PickleMachine;
  std::vector<std::unique_ptr<PickleNode>> nodes_;
  const PickleNode* root_ = nullptr;
};

// Reads a whole pickle; a malformed or truncated one, or one using an opcode this reader does not
// take (protocol 0's text forms, out-of-band buffers), is an Io error naming `source`.
Pickle read_pickle(std::string_view data, const std::string& source);

// A short description of a node's kind for messages ("a dict", "an int", ...).
std::string pickle_kind_name(const PickleNode& node);

}  // namespace acc
