#include "checkpoint/pickle_reader.h"

#include <cstring>
#include <unordered_map>

#include "common/error.h"

namespace acc {

const PickleNode* PickleNode::find(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  for (size_t i = items.size() / 2; i-- > 0;)  // from the end: a key set twice keeps its last value
    if (items[2 * i]->kind == Kind::String && items[2 * i]->text == key) return items[2 * i + 1];
  return nullptr;
}

const PickleNode* PickleNode::find_int(int64_t key) const {
  if (kind != Kind::Dict) return nullptr;
  for (size_t i = items.size() / 2; i-- > 0;)
    if (items[2 * i]->kind == Kind::Int && items[2 * i]->integer == key) return items[2 * i + 1];
  return nullptr;
}

bool PickleNode::is_call_of(std::string_view name) const {
  return kind == Kind::Call && items[0]->kind == Kind::Global && items[0]->text == name;
}

std::string pickle_kind_name(const PickleNode& node) {
  switch (node.kind) {
    case PickleNode::Kind::None:
      return "None";
    case PickleNode::Kind::Bool:
      return "a bool";
    case PickleNode::Kind::Int:
      return "an int";
    case PickleNode::Kind::BigInt:
      return "an int beyond 64 bits";
    case PickleNode::Kind::Float:
      return "a float";
    case PickleNode::Kind::String:
      return "a string";
    case PickleNode::Kind::Bytes:
      return "bytes";
    case PickleNode::Kind::Tuple:
      return "a tuple";
    case PickleNode::Kind::List:
      return "a list";
    case PickleNode::Kind::Dict:
      return "a dict";
    case PickleNode::Kind::Global:
      return "the global " + node.text;
    case PickleNode::Kind::Call:
      return "a call of " + (node.items[0]->kind == PickleNode::Kind::Global ? node.items[0]->text : "an object");
    case PickleNode::Kind::Persistent:
      return "a persistent id";
  }
  return "a value";
}

// The pickle virtual machine, less everything that would run code.
class PickleMachine {
 public:
  PickleMachine(std::string_view data, const std::string& source) : data_(data), source_(source) {}

  Pickle run() {
    while (true) {
      if (at_ >= data_.size()) refuse("it ends before its STOP opcode (truncated?)");
      const auto op = static_cast<uint8_t>(data_[at_++]);
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1 || !marks_.empty()) refuse("it leaves ", stack_.size(), " values at its end, not one");
    out_.root_ = stack_.back();
    return std::move(out_);
  }

 private:
  using Kind = PickleNode::Kind;

  template <typename... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail(Status::Io, "'", source_, "' is not a pickle this library reads: ", std::forward<Parts>(parts)...,
         " (at byte ", at_, ")");
  }

  std::string_view take(uint64_t n) {
    if (n > data_.size() - at_) refuse("it is truncated");
    const std::string_view out = data_.substr(at_, n);
    at_ += n;
    return out;
  }
  uint64_t little(int width) {
    const std::string_view b = take(width);
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[i]);
    return v;
  }
  std::string line() {
    const auto end = data_.find('\n', at_);
    if (end == std::string_view::npos) refuse("a GLOBAL's name is not terminated");
    std::string out(data_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }

  PickleNode* make(Kind kind) {
    out_.nodes_.push_back(std::make_unique<PickleNode>());
    out_.nodes_.back()->kind = kind;
    return out_.nodes_.back().get();
  }
  void push(PickleNode* node) { stack_.push_back(node); }
  PickleNode* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) refuse("an opcode finds too few values before it");
    PickleNode* node = stack_.back();
    stack_.pop_back();
    return node;
  }
  PickleNode* top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) refuse("an opcode finds no value before it");
    return stack_.back();
  }
  // The values since the last MARK, which is removed.
  std::vector<const PickleNode*> pop_mark() {
    if (marks_.empty()) refuse("an opcode needs a MARK that is not there");
    const size_t start = marks_.back();
    marks_.pop_back();
    std::vector<const PickleNode*> items(stack_.begin() + start, stack_.end());
    stack_.resize(start);
    return items;
  }
  PickleNode* expect(PickleNode* node, Kind kind, const char* what) {
    if (node->kind != kind) refuse(what, " is ", pickle_kind_name(*node));
    return node;
  }

  void push_text(Kind kind, uint64_t length) {
    PickleNode* node = make(kind);
    node->text.assign(take(length));
    push(node);
  }
  void push_int(int64_t value) {
    PickleNode* node = make(Kind::Int);
    node->integer = value;
    push(node);
  }
  // LONG1 / LONG4: little-endian two's complement of any length.
  void push_long(uint64_t length) {
    const std::string_view b = take(length);
    if (length > 8) {
      PickleNode* node = make(Kind::BigInt);
      node->text.assign(b);
      return push(node);
    }
    uint64_t raw = 0;
    for (size_t i = length; i-- > 0;) raw = raw << 8 | static_cast<uint8_t>(b[i]);
    if (length > 0 && length < 8 && (static_cast<uint8_t>(b[length - 1]) & 0x80)) raw |= ~uint64_t{0} << (8 * length);
    push_int(static_cast<int64_t>(raw));
  }
  void push_float() {
    uint64_t bits = 0;
    for (char c : take(8)) bits = bits << 8 | static_cast<uint8_t>(c);  // big-endian
    PickleNode* node = make(Kind::Float);
    std::memcpy(&node->number, &bits, sizeof bits);
    push(node);
  }
  void push_sequence(Kind kind, std::vector<const PickleNode*> items) {
    PickleNode* node = make(kind);
    node->items = std::move(items);
    push(node);
  }
  void push_tuple_of(size_t n) {
    std::vector<const PickleNode*> items(n);
    for (size_t i = n; i-- > 0;) items[i] = pop();
    push_sequence(Kind::Tuple, std::move(items));
  }
  void extend(PickleNode* target, const std::vector<const PickleNode*>& items, Kind kind, const char* op) {
    if (target->kind != kind) refuse(op, " applies to ", pickle_kind_name(*target));
    target->items.insert(target->items.end(), items.begin(), items.end());
  }
  void set_items(PickleNode* target, const std::vector<const PickleNode*>& items) {
    if (items.size() % 2) refuse("SETITEMS has a key without a value");
    // Appended as they come (a key set again is found by its last value): constant time per item.
    extend(target, items, Kind::Dict, "SETITEMS");
  }

  // A call's result: plain-data constructors are built, everything else recorded.
  void push_call(PickleNode* callable, PickleNode* args) {
    expect(args, Kind::Tuple, "a call's arguments");
    if (callable->kind == Kind::Global && callable->text == "collections.OrderedDict" && args->items.empty())
      return push(make(Kind::Dict));
    if (callable->kind == Kind::Global && callable->text == "_codecs.encode" && args->items.size() == 2 &&
        args->items[0]->kind == Kind::String && args->items[1]->kind == Kind::String &&
        (args->items[1]->text == "latin1" || args->items[1]->text == "latin-1"))
      return push(latin1_bytes(args->items[0]->text));
    PickleNode* call = make(Kind::Call);
    call->items = {callable, args};
    push(call);
  }
  // Protocol 2 writes bytes as the code points 0-255 of a string, encoded again as Latin-1.
  PickleNode* latin1_bytes(const std::string& utf8) {
    PickleNode* node = make(Kind::Bytes);
    node->text.reserve(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) {
      const auto c = static_cast<uint8_t>(utf8[i]);
      if (c < 0x80) {
        node->text.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size() &&
                 (static_cast<uint8_t>(utf8[i + 1]) & 0xC0) == 0x80) {
        node->text.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(utf8[++i]) & 0x3F)));
      } else {
        refuse("_codecs.encode's text is not Latin-1");
      }
    }
    return node;
  }

  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) refuse("it refers to memo entry ", index, ", which was never stored");
    push(it->second);
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80:
        take(1);
        return;  // PROTO
      case 0x95:
        take(8);
        return;  // FRAME
      case '(':
        marks_.push_back(stack_.size());
        return;  // MARK
      case '0':
        pop();
        return;  // POP
      case '1':
        pop_mark();
        return;  // POP_MARK
      case '2':
        push(top());
        return;  // DUP
      case 'N':
        push(make(Kind::None));
        return;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        PickleNode* node = make(Kind::Bool);
        node->boolean = op == 0x88;
        return push(node);
      }
      case 'J':
        return push_int(static_cast<int32_t>(little(4)));  // BININT
      case 'K':
        return push_int(static_cast<int64_t>(little(1)));  // BININT1
      case 'M':
        return push_int(static_cast<int64_t>(little(2)));  // BININT2
      case 0x8a:
        return push_long(little(1));  // LONG1
      case 0x8b:
        return push_long(little(4));  // LONG4
      case 'G':
        return push_float();  // BINFLOAT
      case 'X':
      case 'T':
        return push_text(Kind::String, little(4));  // BINUNICODE, BINSTRING
      case 0x8c:
      case 'U':
        return push_text(Kind::String, little(1));  // SHORT_BINUNICODE, SHORT_BINSTRING
      case 0x8d:
        return push_text(Kind::String, little(8));  // BINUNICODE8
      case 'B':
        return push_text(Kind::Bytes, little(4));  // BINBYTES
      case 'C':
        return push_text(Kind::Bytes, little(1));  // SHORT_BINBYTES
      case 0x8e:
      case 0x96:
        return push_text(Kind::Bytes, little(8));  // BINBYTES8, BYTEARRAY8
      case ')':
        return push_sequence(Kind::Tuple, {});  // EMPTY_TUPLE
      case 't':
        return push_sequence(Kind::Tuple, pop_mark());  // TUPLE
      case 0x85:
        return push_tuple_of(1);
      case 0x86:
        return push_tuple_of(2);
      case 0x87:
        return push_tuple_of(3);
      case ']':
      case 0x8f:
        return push_sequence(Kind::List, {});  // EMPTY_LIST, EMPTY_SET
      case 'l':
      case 0x91:
        return push_sequence(Kind::List, pop_mark());  // LIST, FROZENSET
      case '}':
        return push_sequence(Kind::Dict, {});  // EMPTY_DICT
      case 'd': {                              // DICT
        auto items = pop_mark();
        push(make(Kind::Dict));
        return set_items(stack_.back(), items);
      }
      case 'a': {  // APPEND
        const PickleNode* item = pop();
        return extend(top(), {item}, Kind::List, "APPEND");
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        auto items = pop_mark();
        return extend(top(), items, Kind::List, "APPENDS");
      }
      case 's': {  // SETITEM
        const PickleNode* value = pop();
        const PickleNode* key = pop();
        return set_items(top(), {key, value});
      }
      case 'u': {  // SETITEMS
        auto items = pop_mark();
        return set_items(top(), items);
      }
      case 'c': {  // GLOBAL module\nname\n
        PickleNode* node = make(Kind::Global);
        node->text = line();
        node->text += "." + line();
        return push(node);
      }
      case 0x93: {  // STACK_GLOBAL
        PickleNode* name = expect(pop(), Kind::String, "STACK_GLOBAL's name");
        PickleNode* module = expect(pop(), Kind::String, "STACK_GLOBAL's module");
        PickleNode* node = make(Kind::Global);
        node->text = module->text + "." + name->text;
        return push(node);
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        PickleNode* args = pop();
        PickleNode* callable = pop();
        return push_call(callable, args);
      }
      case 0x92: {  // NEWOBJ_EX
        PickleNode* kwargs = pop();
        PickleNode* args = pop();
        PickleNode* callable = pop();
        push_call(callable, args);
        if (stack_.back()->kind == Kind::Call) stack_.back()->items.push_back(kwargs);
        return;
      }
      case 'b': {  // BUILD
        PickleNode* state = pop();
        top()->state = state;
        return;
      }
      case 'Q': {  // BINPERSID
        PickleNode* node = make(Kind::Persistent);
        node->items = {pop()};
        return push(node);
      }
      case 'q':
        return memo_put(little(1));  // BINPUT
      case 'r':
        return memo_put(little(4));  // LONG_BINPUT
      case 0x94:
        return memo_put(memo_.size());  // MEMOIZE
      case 'h':
        return memo_get(little(1));  // BINGET
      case 'j':
        return memo_get(little(4));  // LONG_BINGET
      default:
        --at_;
        refuse("opcode 0x", "0123456789abcdef"[op >> 4], "0123456789abcdef"[op & 15],
               " is not one a pickle of data needs (protocol 0's text forms, extensions and out-of-band buffers "
               "are not read)");
    }
  }

  std::string_view data_;
  const std::string& source_;
  size_t at_ = 0;
  Pickle out_;
  std::vector<PickleNode*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleNode*> memo_;
};

Pickle read_pickle(std::string_view data, const std::string& source) { return PickleMachine(data, source).run(); }

}  // namespace acc
