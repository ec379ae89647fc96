// Pieces of cpp/tracking checked on their own: CRC-32C (common/) against published check values, TFRecord
// framing, log_with parsing, the CSV header reader, the background file, the progress text, and
// values printed as Python prints them (MLflow's parameters and metric lines) against python3 itself,
// SHA-256, W&B's log framing and values.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "../capi/tracking_reader.h"
#include "../capi/wandb_reader.h"
#include "common/error.h"
#include "common/python_text.h"
#include "common/sha256.h"
#include "tracking/async_file.h"
#include "tracking/crc32c.h"
#include "tracking/csv_tracker.h"
#include "tracking/histogram.h"
#include "tracking/mlflow_metrics.h"
#include "tracking/mlflow_store.h"
#include "tracking/progress.h"
#include "tracking/tfrecord.h"
#include "tracking/tracker_set.h"
#include "tracking/wandb_log.h"
#include "tracking/wandb_values.h"

using namespace acc::tracking;
using acc::python_float_repr;
using acc::python_str;

TEST(Crc32c, MatchesTheCheckValuesOfRfc3720) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c("", 0), 0u);
  // The slicing-by-8 path and the byte path agree at every split.
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t n = 0; n <= text.size(); ++n) EXPECT_EQ(crc32c(text.data(), n), acc_test::crc32c_bitwise(text.substr(0, n))) << n;
  // Extended a piece at a time (as files are), at every split, and past many words.
  for (size_t n = 0; n <= text.size(); ++n)
    EXPECT_EQ(acc::crc32c_extend(acc::crc32c(text.data(), n), text.data() + n, text.size() - n),
              crc32c(text.data(), text.size()))
        << n;
  std::string long_text;
  for (int i = 0; i < 5000; ++i) long_text.push_back(static_cast<char>(i * 7919 % 251));
  EXPECT_EQ(crc32c(long_text.data(), long_text.size()), acc_test::crc32c_bitwise(long_text));
}

TEST(TfRecord, FramesLengthDataAndMaskedCrcs) {
  std::string out;
  append_tfrecord(out, "abc");
  ASSERT_EQ(out.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(out.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(out.substr(12, 3), "abc");
  uint32_t stored = 0;
  for (int k = 0; k < 4; ++k) stored |= uint32_t(static_cast<unsigned char>(out[15 + k])) << (8 * k);
  const uint32_t c = crc32c("abc", 3);
  EXPECT_EQ(stored, acc_test::masked(c));
  EXPECT_EQ(stored, masked_crc32c("abc", 3));
}

TEST(LogWith, NamesAllAndLists) {
  EXPECT_EQ(parse_log_with(""), std::vector<std::string>{});
  EXPECT_EQ(parse_log_with("all"), (std::vector<std::string>{"tensorboard", "jsonl", "csv", "mlflow"}));
  EXPECT_EQ(parse_log_with(" CSV , tensorboard,csv"), (std::vector<std::string>{"csv", "tensorboard"}));
  EXPECT_EQ(parse_log_with("  "), std::vector<std::string>{});
  for (const char* lost : {",", " , ", "csv,", "csv,,jsonl", ",csv"})  // a name lost, not no tracker
    EXPECT_THROW(parse_log_with(lost), acc::Error) << lost;
  EXPECT_EQ(parse_log_with("jsonl,all"), (std::vector<std::string>{"jsonl", "tensorboard", "csv", "mlflow"}));
  EXPECT_THROW(parse_log_with("tensorboard,comet_ml"), acc::Error);
}

TEST(CsvRecord, ReadsQuotedFields) {
  size_t used = 0;
  const std::string text = "step,wall_time,\"a, b\",\"say \"\"hi\"\"\",\"two\nlines\"\n1,2,3\n";
  auto fields = parse_csv_record(text, &used);
  EXPECT_EQ(fields, (std::vector<std::string>{"step", "wall_time", "a, b", "say \"hi\"", "two\nlines"}));
  EXPECT_EQ(text.substr(used), "1,2,3\n");
}

// A failed write in a file that was already there (a resumed run's, a log made before the writer)
// cuts back only what this writer wrote: what the file held stays.
TEST(AsyncFile, AFailedWriteKeepsWhatTheFileHeldBefore) {
  const std::string path = ::testing::TempDir() + "/acc_async_existing.txt";
  std::ofstream(path, std::ios::trunc) << "kept\n";
  AsyncFile file(path, /*truncate=*/false, std::chrono::hours(1));
  file.append("a record stdio still holds");
  file.post([](std::FILE*&, const std::string&) { acc::fail(acc::Status::Io, "disk full (simulated)"); });
  EXPECT_THROW(file.flush(), acc::Error);
  EXPECT_THROW(file.close(), acc::Error);
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "kept\n");
}

TEST(AsyncFile, WritesInOrderAndReportsErrorsOnTheCallersSide) {
  const std::string path = ::testing::TempDir() + "/acc_async_file.txt";
  {
    AsyncFile file(path, /*truncate=*/true, std::chrono::hours(1));
    for (int i = 0; i < 1000; ++i) file.append(std::to_string(i) + "\n");
    file.flush();  // on disk now, although the flush interval is an hour
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line); ++n) ASSERT_EQ(line, std::to_string(n));
    EXPECT_EQ(n, 1000);
    file.post([](std::FILE*&, const std::string&) { acc::fail(acc::Status::Io, "disk full (simulated)"); });
    EXPECT_THROW(file.flush(), acc::Error);
    EXPECT_THROW(file.append("more"), acc::Error);
    EXPECT_THROW(file.close(), acc::Error);
  }
  EXPECT_THROW(AsyncFile("/proc/no/such/dir/file", true), acc::Error);
  std::filesystem::remove(path);
}

TEST(ProgressText, BarAndPlainLines) {
  EXPECT_EQ(Progress::bar_line("epoch 1", 50, 200, 10.0, "loss 0.5"),
            "epoch 1  25%|######-------------------| 50/200 [00:10<00:30, 5.0 it/s] loss 0.5");
  EXPECT_EQ(Progress::bar_line("", 3, 0, 4.0, ""), "3 [00:04, 1.3 s/it]");
  EXPECT_EQ(Progress::plain_line("train", 50, 200, 3725.0, ""),
            "train: 50/200 (25%), 74.5 s/it, elapsed 1:02:05, ETA 3:06:15");
  EXPECT_EQ(Progress::plain_line("", 0, 10, 0.0, "x"), "0/10 (0%), ? it/s, elapsed 00:00, ETA ?, x");
}

// Code points of a UTF-8 text (what a terminal shows of it, a wide character as one).
size_t code_points(const std::string& text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// On a terminal narrower than the line, \r goes back to the wrapped line's last row only: the bar
// narrows, then the line is cut, always one column short of the width; a line break in a
// description or postfix shows as a space (it would end the one line).
TEST(ProgressText, TheTerminalLineFitsTheTerminalsWidth) {
  const std::string full = Progress::bar_line("epoch 1", 50, 200, 10.0, "loss 0.5");
  EXPECT_EQ(Progress::bar_line("epoch 1", 50, 200, 10.0, "loss 0.5", 200), full);
  const std::string narrow = Progress::bar_line("epoch 1", 50, 200, 10.0, "loss 0.5", 61);
  EXPECT_EQ(narrow, "epoch 1  25%|#-----| 50/200 [00:10<00:30, 5.0 it/s] loss 0.5");
  EXPECT_EQ(code_points(narrow), 60u);
  const std::string cut = Progress::bar_line(std::string(100, 'd'), 50, 200, 10.0, "", 40);
  EXPECT_EQ(cut, std::string(39, 'd'));
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "\xc3\xa9";  // é
  const std::string cut_utf8 = Progress::bar_line(accents, 3, 0, 4.0, "", 20);
  EXPECT_EQ(cut_utf8, accents.substr(0, 38)) << "19 whole code points";
  EXPECT_EQ(Progress::bar_line("a\nb", 3, 0, 4.0, "x\ry"), "a b 3 [00:04, 1.3 s/it] x y");
  EXPECT_EQ(Progress::plain_line("a\nb", 0, 10, 0.0, "x\ny"), "a b: 0/10 (0%), ? it/s, elapsed 00:00, ETA ?, x y");
}

// Off a terminal: a line at each tenth of the total and one on close, so at most ten whatever
// the total (a total of 15 printed one per step), and one per step below ten.
TEST(ProgressText, PlainLinesComeAtEachTenthOfTheTotal) {
  for (int64_t total : {1, 3, 9, 10, 11, 15, 19, 25, 37, 99, 1000, 1001}) {
    char buffer[8192] = {0};
    std::FILE* out = fmemopen(buffer, sizeof buffer - 1, "w");
    ASSERT_NE(out, nullptr);
    {
      Progress p(total, "e", true, out, /*terminal=*/false);
      for (int64_t i = 0; i < total; ++i) p.update(1);
      p.close();
    }
    std::fclose(out);
    const std::string text = buffer;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), std::min<int64_t>(total, 10)) << "total " << total << ":\n"
                                                                                        << text;
  }
  EXPECT_EQ(Progress::tenth_mark(15, 1), 2);
  EXPECT_EQ(Progress::tenth_mark(std::numeric_limits<int64_t>::max(), 10), std::numeric_limits<int64_t>::max());
}

TEST(ProgressText, TerminalRedrawsInPlace) {
  char buffer[4096] = {0};
  std::FILE* out = fmemopen(buffer, sizeof buffer - 1, "w");
  ASSERT_NE(out, nullptr);
  {
    Progress p(4, "e", true, out, /*terminal=*/true);
    p.update(4);
    p.close();
  }
  std::fclose(out);
  const std::string text = buffer;
  EXPECT_EQ(text.front(), '\r');
  EXPECT_NE(text.find("\re 100%|#########################| 4/4"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  // Off the main process nothing is shown.
  char silent[64] = {0};
  out = fmemopen(silent, sizeof silent - 1, "w");
  {
    Progress p(4, "e", false, out, true);
    p.update(4);
  }
  std::fclose(out);
  EXPECT_STREQ(silent, "");
}

// python_float_repr against repr() of python3 itself, on the values a run logs (rates, losses,
// counts, the ends of the ranges) and on 4,000 doubles of random bits; python_str against str() of
// what json.loads makes of the same JSON.
TEST(PythonText, FloatsAndValuesPrintAsPythonPrintsThem) {
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                0.1,
                                0.001,
                                1e-4,
                                1e-5,
                                1.5e-5,
                                123456789.0,
                                1e15,
                                1e16,
                                9999999999999998.0,
                                1.2345678901234567e17,
                                3e-310,
                                5e-324,
                                1.7976931348623157e308,
                                2.5,
                                100.0,
                                0.3333333333333333,
                                6.02214076e23,
                                -7.25e-9};
  uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift: the same doubles every run
  while (values.size() < 4000) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    double value;
    std::memcpy(&value, &state, sizeof value);
    if (std::isfinite(value)) values.push_back(value);
  }
  const std::string dir = std::filesystem::temp_directory_path() / ("acc_python_text_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream hex(dir + "/values.txt");
    char text[64];
    for (const double v : values) {
      std::snprintf(text, sizeof text, "%a\n", v);
      hex << text;
    }
  }
  const std::string command = std::string("'") + ACC_TEST_PYTHON +
                              "' -c 'import sys\nfor line in open(sys.argv[1]): print(repr(float.fromhex(line)))' '" +
                              dir + "/values.txt' > '" + dir + "/repr.txt'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream theirs(dir + "/repr.txt");
  size_t compared = 0;
  for (const double v : values) {
    std::string line;
    ASSERT_TRUE(std::getline(theirs, line));
    EXPECT_EQ(python_float_repr(v), line) << "%a of the value: " << v;
    ++compared;
  }
  EXPECT_EQ(compared, values.size());
  EXPECT_EQ(python_float_repr(std::nan("")), "nan");
  EXPECT_EQ(python_float_repr(-HUGE_VAL), "-inf");

  const std::string json =
      R"({"s": "plain", "q": "it's", "both": "it's \"x\"", "ctl": "a\tb\nc\u0001\u007f\u0085\u00e9",
    "t": true, "n": null, "i": -12, "f": 2.0, "list": [1, "a'b", [], {}, null, 1e-7],
    "obj": {"a": {"k": "v"}, "z": 1}})";
  const auto parsed = nlohmann::json::parse(json);
  { std::ofstream(dir + "/value.json") << json; }
  const std::string str_command =
      std::string("'") + ACC_TEST_PYTHON +
      "' -c 'import json, sys\nfor k, v in sorted(json.load(open(sys.argv[1])).items()): print(k, str(v))' '" + dir +
      "/value.json' > '" + dir + "/str.txt'";
  ASSERT_EQ(std::system(str_command.c_str()), 0) << str_command;
  std::ifstream printed(dir + "/str.txt");
  std::string ours;
  for (const auto& [key, value] : parsed.items()) ours += key + " " + python_str(value) + "\n";
  std::stringstream all;
  all << printed.rdbuf();
  // (Objects print their keys sorted, Python's dicts in the document's order: "obj" lists them
  // sorted, where both agree; the README says so.)
  EXPECT_EQ(ours, all.str());
  std::filesystem::remove_all(dir);
}

TEST(MlflowNames, AsMlflowValidatesThem) {
  for (const std::string& good :
       std::vector<std::string>{"loss", "train/loss", "a.b-c_d e", "x/y/z", std::string(250, 'a')})
    EXPECT_NO_THROW(mlflow::check_name("metric", good)) << good;
  for (const std::string& bad : std::vector<std::string>{"", "/a", "a/", "a//b", "./a", "a/./b", "a/..", "..", ".",
                                                         "a:b", "caf\u00e9", std::string(251, 'a')})
    EXPECT_THROW(mlflow::check_name("metric", bad), acc::Error) << bad;
  EXPECT_EQ(mlflow::metric_line(1700000000123, 0.1, 7), "1700000000123 0.1 7\n");
}

// make_histogram against torch's own make_histogram (tests/interop/torch_histogram.py runs it with
// numpy) on the bins add_histogram gives it: every bucket limit and count, min, max, num and sum to
// the bit; sum_squares (numpy's BLAS dot, whose order is BLAS's) to 1e-12. Cases: the tensorflow bins
// and equal-width ones, max_bins, one repeated value, integers, bool, bf16, NaN, values beyond the
// tensorflow bins, and what both refuse.
TEST(Histogram, AsTorchMakesIt) {
  at::manual_seed(3);
  const at::Tensor normal = at::randn({1000}, at::kDouble) * 3;
  const at::Tensor spread = at::randn({5000}, at::kDouble) * at::pow(10.0, at::rand({5000}, at::kDouble) * 30 - 15);
  at::Tensor with_nan = at::randn({50}, at::kDouble);
  with_nan[7] = std::nan("");
  const at::Tensor beyond = at::tensor({1e25, 1.0, -3.0, -1e21}, at::kDouble);
  struct Case {
    at::Tensor values;
    int64_t equal_bins, max_bins;
  };
  const std::vector<Case> cases = {
      {normal, 0, 0},
      {normal, 30, 0},
      {normal, 0, 10},
      {normal, 7, 3},
      {at::full({5}, 2.5, at::kDouble), 10, 0},
      {at::arange(100, at::kLong), 0, 0},
      {at::arange(100, at::kLong), 9, 0},
      {at::tensor({1, 0, 1}, at::kInt).to(at::kBool), 0, 0},
      {(at::randn({300}) * 100).to(at::kBFloat16), 0, 0},
      {(at::randn({300}) * 100).to(at::kBFloat16), 16, 0},
      {with_nan, 0, 0},
      {with_nan, 5, 0},
      {beyond, 0, 0},
      {at::full({3}, 1e25, at::kDouble), 0, 0},
      {at::zeros({1}, at::kDouble), 0, 0},
      {spread, 0, 64},
      {spread, 1000, 0},
  };
  const std::string dir = std::filesystem::temp_directory_path() / ("acc_histogram_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json requests = nlohmann::json::array();
  for (const auto& c : cases) {
    nlohmann::json hex = nlohmann::json::array();
    const at::Tensor as_double = c.values.to(at::kDouble).contiguous();
    char text[64];
    for (int64_t i = 0; i < as_double.numel(); ++i) {
      const double v = as_double.data_ptr<double>()[i];
      if (std::isnan(v))
        hex.push_back("nan");
      else {
        std::snprintf(text, sizeof text, "%a", v);
        hex.push_back(text);
      }
    }
    requests.push_back({{"values", hex},
                        {"bins", c.equal_bins == 0 ? nlohmann::json("tensorflow") : nlohmann::json(c.equal_bins)},
                        {"max_bins", c.max_bins == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.max_bins)}});
  }
  std::ofstream(dir + "/cases.json") << requests.dump();
  const std::string command = std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_SOURCE_DIR +
                              "/tests/interop/torch_histogram.py' '" + dir + "/cases.json' > '" + dir + "/torch.json'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir + "/torch.json");
  const nlohmann::json theirs = nlohmann::json::parse(in);
  ASSERT_EQ(theirs.size(), cases.size());
  auto texts = [](const std::vector<double>& values) {
    std::vector<std::string> out;
    for (const double v : values) out.push_back(python_float_repr(v));
    return out;
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    const HistogramBins bins{cases[k].equal_bins, cases[k].max_bins};
    if (theirs[k].contains("error")) {
      EXPECT_THROW(make_histogram(cases[k].values, bins), acc::Error) << theirs[k]["error"];
      continue;
    }
    const Histogram ours = make_histogram(cases[k].values, bins);
    EXPECT_EQ(texts(ours.bucket_limit), theirs[k]["bucket_limit"].get<std::vector<std::string>>());
    EXPECT_EQ(texts(ours.bucket), theirs[k]["bucket"].get<std::vector<std::string>>());
    EXPECT_EQ(python_float_repr(ours.min), theirs[k]["min"]);
    EXPECT_EQ(python_float_repr(ours.max), theirs[k]["max"]);
    EXPECT_EQ(python_float_repr(ours.num), theirs[k]["num"]);
    EXPECT_EQ(python_float_repr(ours.sum), theirs[k]["sum"]);
    const double squares = std::stod(theirs[k]["sum_squares"].get<std::string>());
    if (std::isnan(squares))
      EXPECT_TRUE(std::isnan(ours.sum_squares));
    else
      EXPECT_NEAR(ours.sum_squares, squares, 1e-12 * std::abs(squares));
  }
  std::filesystem::remove_all(dir);
}

TEST(Histogram, BinsAsAddHistogramTakesThem) {
  EXPECT_EQ(parse_histogram_bins("", 0).equal_bins, 0);
  EXPECT_EQ(parse_histogram_bins("tensorflow", 5).max_bins, 5);
  EXPECT_EQ(parse_histogram_bins("64", 0).equal_bins, 64);
  for (const char* bad : {"0", "-3", "1.5", "tf", "16777217"})
    EXPECT_THROW(parse_histogram_bins(bad, 0), acc::Error) << bad;
  EXPECT_THROW(parse_histogram_bins("tensorflow", -1), acc::Error);
  try {
    parse_histogram_bins("auto", 0);
    ADD_FAILURE() << "numpy's strategies are not built";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::Unsupported);
  }
  // SummaryWriter's default_bins: symmetric around 0, from 1e-12 up by factors of 1.1 below 1e20.
  const auto& bins = tensorflow_bins();
  ASSERT_EQ(bins.size() % 2, 1u);
  EXPECT_EQ(bins[bins.size() / 2], 0.0);
  EXPECT_EQ(bins[bins.size() / 2 + 1], 1e-12);
  EXPECT_EQ(bins.front(), -bins.back());
  EXPECT_LT(bins.back(), 1e20);
  EXPECT_GE(bins.back() * 1.1, 1e20);
}

// SHA-256 against FIPS 180-4's examples (one block, two blocks, a million bytes) and the empty input.
TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(acc::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(acc::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(acc::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(acc::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the padding's block boundary (55, 56, 63, 64 bytes) against sha256sum.
  for (size_t n : {55, 56, 63, 64, 65}) {
    const std::string path = ::testing::TempDir() + "sha_" + std::to_string(n);
    std::ofstream(path, std::ios::binary) << std::string(n, 'x');
    const std::string command = "sha256sum '" + path + "' > '" + path + ".sum'";
    ASSERT_EQ(std::system(command.c_str()), 0);
    std::ifstream sum(path + ".sum");
    std::string expected;
    sum >> expected;
    EXPECT_EQ(acc::sha256_hex(std::string(n, 'x')), expected) << n;
  }
}

// W&B's transaction log framing: the header, wandb's own worked example of a record, a block's end
// with exactly a chunk header's room (an empty first chunk, the data in the next block), one with
// less (zeros, then the chunk in the next block), and a record spanning three blocks.
TEST(WandbLog, FramesRecordsAsWandbsWriter) {
  using acc::tracking::wandb::framed_record;
  EXPECT_EQ(acc::tracking::wandb::log_header(), std::string(":W&B\xe1\xbe\x00", 7));
  // Record{num: 1, header: {}} at the file's start: CRC-32 of 01 08 01 aa 01 00 is 0x3fa6b755.
  EXPECT_EQ(framed_record(std::string("\x08\x01\xaa\x01\x00", 5), 7),
            std::string("\x55\xb7\xa6\x3f\x05\x00\x01\x08\x01\xaa\x01\x00", 12));
  auto chunk = [](unsigned char type, const std::string& data) {
    std::string c(1, static_cast<char>(type));
    const uint32_t crc = acc_test::crc32_ieee_bitwise(c + data);
    std::string out;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
    out.push_back(static_cast<char>(data.size() & 0xff));
    out.push_back(static_cast<char>(data.size() >> 8));
    return out + c + data;
  };
  EXPECT_EQ(framed_record("abc", 32768 - 7), chunk(2, "") + chunk(4, "abc"));
  EXPECT_EQ(framed_record("abc", 32768 - 6), std::string(6, '\0') + chunk(1, "abc"));
  EXPECT_EQ(framed_record("", 32768 - 7), chunk(1, ""));
  const std::string big(70000, 'z');
  EXPECT_EQ(framed_record(big, 7),
            chunk(2, big.substr(0, 32754)) + chunk(3, big.substr(32754, 32761)) + chunk(4, big.substr(32754 + 32761)));
}

// Values as W&B's JSON holds them: floats as Python's repr, NaN and infinities as bare tokens,
// nested objects and lists compact; the leaves of a step's tree by their paths.
TEST(WandbValues, JsonAndLeavesAsWandbWritesThem) {
  using acc::tracking::wandb::value_json;
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  v["f"] = 1.0;
  v["small"] = 1e-5;
  v["big"] = 1e16;
  v["nan"] = std::nan("");
  v["inf"] = -INFINITY;
  v["i"] = 3;
  v["s"] = "q\"\n\xc3\xa9";
  v["list"] = {1, 2.5};
  EXPECT_EQ(value_json(v),
            "{\"f\":1.0,\"small\":1e-05,\"big\":1e+16,\"nan\":NaN,\"inf\":-Infinity,\"i\":3,\"s\":\"q\\\"\\n\xc3\xa9\","
            "\"list\":[1,2.5]}");
  nlohmann::ordered_json tree = nlohmann::ordered_json::object();
  tree["a"]["b"] = 1;
  tree["a"]["c"] = {1, 2};
  tree["d"] = "x";
  const auto leaves = acc::tracking::wandb::leaves(tree);
  ASSERT_EQ(leaves.size(), 3u);
  EXPECT_EQ(leaves[0].path, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(leaves[1].path, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(leaves[1].value_json, "[1,2]");
  EXPECT_EQ(leaves[2].value_json, "\"x\"");
  EXPECT_EQ(acc::tracking::wandb::media_path("media/images", "/a/./../b", 3, std::string(64, 'f'), ".png"),
            "media/images/a/_/__/b_3_" + std::string(20, 'f') + ".png");
}
