#include "model/pickle_storages.h"

#include <limits>
#include <map>
#include <memory>

namespace acc {
namespace {

// What the walk keeps of a pickled value: strings and integers (a storage's persistent id is
// ("storage", <class>, key, location, numel)), tuples of them, and marks; the rest is opaque.
struct Value {
  enum Kind { Opaque, Int, Str, Tuple, Mark } kind = Opaque;
  int64_t integer = 0;
  std::string text;
  std::vector<Value> items;
};

std::optional<uint64_t> element_size(const std::string& storage_class) {
  static const std::map<std::string, uint64_t> sizes = {
      {"torch.FloatStorage", 4},  {"torch.DoubleStorage", 8},        {"torch.HalfStorage", 2},
      {"torch.BFloat16Storage", 2}, {"torch.LongStorage", 8},        {"torch.IntStorage", 4},
      {"torch.ShortStorage", 2},  {"torch.CharStorage", 1},          {"torch.ByteStorage", 1},
      {"torch.BoolStorage", 1},   {"torch.ComplexFloatStorage", 8},  {"torch.ComplexDoubleStorage", 16},
      {"torch.QInt8Storage", 1},  {"torch.QUInt8Storage", 1},        {"torch.QInt32Storage", 4}};
  auto it = sizes.find(storage_class);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

StorageRef storage_of(const Value& id) {
  StorageRef ref;
  if (id.kind != Value::Tuple || id.items.size() < 5 || id.items[2].kind != Value::Str) return ref;
  ref.key = id.items[2].text;
  const auto item = id.items[1].kind == Value::Str ? element_size(id.items[1].text) : std::nullopt;
  if (!item || id.items[4].kind != Value::Int) return ref;
  const int64_t numel = id.items[4].integer;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  ref.nbytes = numel < 0 || static_cast<uint64_t>(numel) > max / *item ? max : static_cast<uint64_t>(numel) * *item;
  return ref;
}

class Walk {
 public:
  explicit Walk(std::string_view p) : p_(p) {}

  std::optional<std::vector<StorageRef>> run() {
    while (at_ < p_.size()) {
      const auto op = static_cast<uint8_t>(p_[at_++]);
      if (op == '.') return std::move(found_);  // STOP
      if (!step(op)) return std::nullopt;
    }
    return std::nullopt;  // no STOP: truncated
  }

 private:
  bool take(uint64_t n, std::string_view& out) {
    if (n > p_.size() - at_) return false;
    out = p_.substr(at_, n);
    at_ += n;
    return true;
  }
  bool little(int width, uint64_t& v) {
    std::string_view b;
    if (!take(width, b)) return false;
    v = 0;
    for (int i = width - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[i]);
    return true;
  }
  bool line(std::string& out) {
    const auto end = p_.find('\n', at_);
    if (end == std::string_view::npos) return false;
    out.assign(p_.substr(at_, end - at_));
    at_ = end + 1;
    return true;
  }
  void push(Value v) { stack_.push_back(std::move(v)); }
  bool pop(Value* out = nullptr) {
    if (stack_.empty()) return false;
    if (out) *out = std::move(stack_.back());
    stack_.pop_back();
    return true;
  }
  bool pop_to_mark(std::vector<Value>* items) {
    for (size_t i = stack_.size(); i-- > 0;)
      if (stack_[i].kind == Value::Mark) {
        if (items) items->assign(std::make_move_iterator(stack_.begin() + i + 1), std::make_move_iterator(stack_.end()));
        stack_.resize(i);
        return true;
      }
    return false;
  }
  bool text(int width) {
    uint64_t n = 0;
    std::string_view b;
    if (!little(width, n) || !take(n, b)) return false;
    Value v;
    v.kind = Value::Str;
    v.text.assign(b);
    push(std::move(v));
    return true;
  }
  bool skip_sized(int width) {
    uint64_t n = 0;
    std::string_view b;
    if (!little(width, n) || !take(n, b)) return false;
    push({});
    return true;
  }
  bool integer(int width, bool is_signed) {
    uint64_t raw = 0;
    if (!little(width, raw)) return false;
    Value v;
    v.kind = Value::Int;
    v.integer = is_signed && width == 4 ? static_cast<int32_t>(raw) : static_cast<int64_t>(raw);
    push(std::move(v));
    return true;
  }
  bool long1() {
    uint64_t n = 0;
    std::string_view b;
    if (!little(1, n) || !take(n, b)) return false;
    Value v;
    if (n <= 8) {
      uint64_t raw = 0;
      for (size_t i = n; i-- > 0;) raw = raw << 8 | static_cast<uint8_t>(b[i]);
      if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) raw |= ~uint64_t{0} << (8 * n);  // sign
      v.kind = Value::Int;
      v.integer = static_cast<int64_t>(raw);
    }
    push(std::move(v));
    return true;
  }
  bool tuple_of(size_t n) {
    if (stack_.size() < n) return false;
    Value v;
    v.kind = Value::Tuple;
    v.items.assign(std::make_move_iterator(stack_.end() - n), std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    push(std::move(v));
    return true;
  }
  bool memo_put(uint64_t index) {
    if (stack_.empty()) return false;
    memo_[index] = stack_.back();
    return true;
  }
  bool memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return false;
    push(it->second);
    return true;
  }

  bool step(uint8_t op) {
    uint64_t n = 0;
    std::string_view skipped;
    switch (op) {
      case 0x80: return take(1, skipped);                       // PROTO
      case 0x95: return take(8, skipped);                       // FRAME
      case 'c': {                                                // GLOBAL module\nname\n
        std::string module, name;
        if (!line(module) || !line(name)) return false;
        Value v;
        v.kind = Value::Str;
        v.text = module + "." + name;
        push(std::move(v));
        return true;
      }
      case 'X': return text(4);                                  // BINUNICODE
      case 0x8c: return text(1);                                 // SHORT_BINUNICODE
      case 'T': return text(4);                                  // BINSTRING
      case 'U': return text(1);                                  // SHORT_BINSTRING
      case 'B': return skip_sized(4);                            // BINBYTES
      case 'C': return skip_sized(1);                            // SHORT_BINBYTES
      case 'J': return integer(4, true);                         // BININT
      case 'K': return integer(1, false);                        // BININT1
      case 'M': return integer(2, false);                        // BININT2
      case 0x8a: return long1();                                 // LONG1
      case 'G': if (!take(8, skipped)) return false; push({}); return true;  // BINFLOAT
      case 'N': case 0x88: case 0x89: case ')': case ']': case '}': push({}); return true;
      case '(': { Value m; m.kind = Value::Mark; push(std::move(m)); return true; }
      case 't': {                                                // TUPLE
        Value v;
        v.kind = Value::Tuple;
        if (!pop_to_mark(&v.items)) return false;
        push(std::move(v));
        return true;
      }
      case 0x85: return tuple_of(1);
      case 0x86: return tuple_of(2);
      case 0x87: return tuple_of(3);
      case 'a': return pop();                                    // APPEND
      case 's': return pop() && pop();                           // SETITEM
      case 'e': case 'u': return pop_to_mark(nullptr);           // APPENDS, SETITEMS
      case 'b': return pop();                                    // BUILD
      case 'R': case 0x81: return pop() && pop() && (push({}), true);  // REDUCE, NEWOBJ
      case 'q': return little(1, n) && memo_put(n);              // BINPUT
      case 'r': return little(4, n) && memo_put(n);              // LONG_BINPUT
      case 0x94: return memo_put(memo_.size());                  // MEMOIZE
      case 'h': return little(1, n) && memo_get(n);              // BINGET
      case 'j': return little(4, n) && memo_get(n);              // LONG_BINGET
      case 'Q': {                                                // BINPERSID
        Value id;
        if (!pop(&id)) return false;
        StorageRef ref = storage_of(id);
        if (!ref.key.empty()) found_.push_back(std::move(ref));
        push({});
        return true;
      }
      default: return false;
    }
  }

  std::string_view p_;
  size_t at_ = 0;
  std::vector<Value> stack_;
  std::map<uint64_t, Value> memo_;
  std::vector<StorageRef> found_;
};

}  // namespace

std::optional<std::vector<StorageRef>> pickle_storages(std::string_view pickle) { return Walk(pickle).run(); }

}  // namespace acc
