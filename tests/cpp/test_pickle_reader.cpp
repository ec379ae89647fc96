// The pickle reader behind Python Accelerate's checkpoint files: Python's own pickles (the bytes
// below are what CPython's pickle.dumps(..., protocol=2) gives) read as data, nothing they name run,
// and malformed ones refused with an Io error instead of a crash.
#include <gtest/gtest.h>

#include <string>

#include "checkpoint/pickle_reader.h"
#include "common/error.h"

namespace {

using acc::PickleNode;
using Kind = acc::PickleNode::Kind;

// A string literal's bytes, embedded zeros included (its terminating zero left out).
template <size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

// Whether reading `pickle` fails with an Io error whose message holds `needle`.
bool refused(const std::string& pickle, const std::string& needle) {
  try {
    acc::read_pickle(pickle, "test.pkl");
  } catch (const acc::Error& e) {
    return e.status() == acc::Status::Io && std::string(e.what()).find(needle) != std::string::npos &&
           std::string(e.what()).find("test.pkl") != std::string::npos;
  }
  return false;
}

}  // namespace

// {'a': 1, 'b': 2**32 - 1, 'c': (1.5, None, True), 'd': b'\x00\xff', 'big': 2**70, 'neg': -5, 's': 'é',
//  'od': OrderedDict([('x', [1, 2])])}: 5- and 9-byte LONG1 (random.getstate() writes the first),
// bytes as _codecs.encode(text, 'latin1'), an OrderedDict filled by SETITEMS.
TEST(PickleReader, ReadsPythonsDataAsPythonWroteIt) {
  const std::string pickle = bytes(
      "\x80\x02}q\x00(X\x01\x00\x00\x00"
      "aq\x01K\x01X\x01\x00\x00\x00"
      "bq\x02\x8a\x05\xff\xff\xff\xff"
      "\x00X\x01\x00\x00\x00"
      "cq\x03G?\xf8\x00\x00\x00\x00\x00\x00N\x88\x87q\x04X\x01\x00\x00\x00"
      "dq"
      "\x05"
      "c_codecs\nencode\nq\x06X\x03\x00\x00\x00\x00\xc3\xbfq\x07X\x06\x00\x00\x00latin1q\x08\x86q"
      "\x09Rq\nX\x03\x00\x00\x00"
      "bigq\x0b\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00@X\x03\x00\x00\x00negq"
      "\x0cJ\xfb\xff\xff\xffX\x01\x00\x00\x00sq\x0dX\x02\x00\x00\x00\xc3\xa9q\x0eX\x02\x00\x00\x00odq\x0f"
      "ccollections\nOrderedDict\nq\x10)Rq\x11X\x01\x00\x00\x00xq\x12]q\x13(K\x01K\x02"
      "esu.");
  ASSERT_EQ(pickle.size(), 221u);
  const acc::Pickle p = acc::read_pickle(pickle, "test.pkl");
  const PickleNode& root = p.root();
  ASSERT_EQ(root.kind, Kind::Dict);
  EXPECT_EQ(root.find("a")->integer, 1);
  EXPECT_EQ(root.find("b")->integer, 4294967295);
  const PickleNode& c = *root.find("c");
  ASSERT_EQ(c.kind, Kind::Tuple);
  ASSERT_EQ(c.items.size(), 3u);
  EXPECT_EQ(c.items[0]->number, 1.5);
  EXPECT_EQ(c.items[1]->kind, Kind::None);
  EXPECT_TRUE(c.items[2]->boolean);
  EXPECT_EQ(root.find("d")->kind, Kind::Bytes);
  EXPECT_EQ(root.find("d")->text, std::string("\x00\xff", 2));
  EXPECT_EQ(root.find("big")->kind, Kind::BigInt);
  EXPECT_EQ(root.find("neg")->integer, -5);
  EXPECT_EQ(root.find("s")->text, "\xc3\xa9");
  const PickleNode& od = *root.find("od");
  ASSERT_EQ(od.kind, Kind::Dict);
  ASSERT_EQ(od.find("x")->items.size(), 2u);
  EXPECT_EQ(od.find("x")->items[1]->integer, 2);
  EXPECT_EQ(root.find("missing"), nullptr);
}

// A class the pickle names is recorded, never looked up: NumPy's array comes back as the calls
// that would rebuild it, with its state.
TEST(PickleReader, RecordsCallsItDoesNotRun) {
  // pickle.dumps(os.system, ...) style: GLOBAL + REDUCE of something that would run a command.
  const std::string pickle = bytes(
      "\x80\x02"
      "cos\nsystem\nX\x04\x00\x00\x00"
      "echo\x85R}b.");
  const acc::Pickle p = acc::read_pickle(pickle, "test.pkl");
  ASSERT_TRUE(p.root().is_call_of("os.system"));
  EXPECT_EQ(p.root().items[1]->items[0]->text, "echo");
  ASSERT_NE(p.root().state, nullptr);
  EXPECT_EQ(p.root().state->kind, Kind::Dict);
}

// A list holding itself, and lists nested a million deep, are read and freed without recursion.
TEST(PickleReader, SelfReferenceAndDeepNestingAreHarmless) {
  const acc::Pickle cycle = acc::read_pickle(bytes("\x80\x02]q\x00h\x00"
                                                   "a."),
                                             "test.pkl");
  ASSERT_EQ(cycle.root().items.size(), 1u);
  EXPECT_EQ(cycle.root().items[0], &cycle.root());
  // [[[[...]]]]: EMPTY_LIST a million times, then APPEND a million times.
  const size_t depth = 1000000;
  std::string deep = "\x80\x02";
  deep += std::string(depth, ']');
  deep += std::string(depth - 1, 'a');
  deep += '.';
  const acc::Pickle nested = acc::read_pickle(deep, "test.pkl");
  EXPECT_EQ(nested.root().kind, Kind::List);
}

TEST(PickleReader, RefusesMalformedPicklesNamingTheFile) {
  EXPECT_TRUE(refused(bytes("\x80\x02}q\x00(X\x01\x00\x00\x00"
                            "a"),
                      "truncated"));
  EXPECT_TRUE(refused(bytes("\x80\x02K\x01"), "before its STOP"));
  EXPECT_TRUE(refused(bytes("\x80\x02K\x01K\x02."), "leaves 2 values"));
  EXPECT_TRUE(refused(bytes("\x80\x02h\x05."), "memo entry 5"));
  EXPECT_TRUE(refused(bytes("\x80\x02"
                            "a."),
                      "too few values"));
  EXPECT_TRUE(refused(bytes("\x80\x02K\x01K\x02u."), "MARK"));
  EXPECT_TRUE(refused(bytes("\x80\x02I1\n."), "opcode 0x49"));  // protocol 0's INT
  EXPECT_TRUE(refused(bytes("\x80\x02](K\x01K\x02u."), "SETITEMS applies to a list"));
  EXPECT_TRUE(refused(bytes("\x80\x02K\x01K\x02"
                            "a."),
                      "APPEND applies to an int"));
  EXPECT_TRUE(refused(bytes("\x80\x02X\xff\xff\xff\x7f."), "truncated"));  // a 2 GB string in 8 bytes
}
