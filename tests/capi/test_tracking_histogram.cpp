// acc_log_histogram: torch's SummaryWriter.add_histogram in the TensorBoard event file, read back by
// the independent event reader and compared with torch's own make_histogram on the same values
// (tests/interop/torch_histogram.py); the step it takes, the trackers that skip it, and mistakes.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support.h"
#include "tracking_reader.h"

namespace {

std::vector<double> numbers(const nlohmann::json& texts) {
  std::vector<double> out;
  for (const auto& t : texts) out.push_back(std::stod(t.get<std::string>()));
  return out;
}

// What a program's tracker was given by its histogram callback.
struct ReceivedHistogram {
  std::string name;
  int64_t step = 0;
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits, counts;
};
int record_histogram(void* user_data, const char* name, double min, double max, double num, double sum,
                     double sum_squares, const double* bucket_limits, const double* bucket_counts, size_t n_buckets,
                     int64_t step) {
  static_cast<std::vector<ReceivedHistogram>*>(user_data)->push_back(
      {name, step, min, max, num, sum, sum_squares, std::vector<double>(bucket_limits, bucket_limits + n_buckets),
       std::vector<double>(bucket_counts, bucket_counts + n_buckets)});
  return 0;
}
int count_log_calls(void* user_data, const char* const*, const double*, size_t, int64_t) {
  ++*static_cast<int*>(user_data);
  return 0;
}

}  // namespace

TEST(HistogramTracking, TensorBoardGetsTorchsHistogram) {
  const std::string dir = acc_test::fresh_dir("histograms");
  std::filesystem::create_directories(dir);
  acc_accelerator* a =
      acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "tensorboard,jsonl"}, {"project_dir", dir}});
  // A program's tracker with a histogram callback gets what TensorBoard writes; one without gets none.
  std::vector<ReceivedHistogram> received;
  int numbers_logged = 0;
  ACC_ASSERT_OK(acc_add_tracker(a, "histograms", nullptr, nullptr, nullptr, &received, nullptr));
  ACC_ASSERT_OK(acc_tracker_set_log_histogram(a, "histograms", record_histogram));
  ACC_ASSERT_OK(acc_add_tracker(a, "numbers", nullptr, count_log_calls, nullptr, &numbers_logged, nullptr));
  ACC_EXPECT_ERROR(acc_tracker_set_log_histogram(a, "tensorboard", record_histogram), ACC_ERR_INVALID_ARGUMENT,
                   "only a tracker added with acc_add_tracker");
  ACC_EXPECT_ERROR(acc_tracker_set_log_histogram(a, "absent", record_histogram), ACC_ERR_INVALID_ARGUMENT, "absent");
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, -1));  // step 0

  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> weights(300);
  for (auto& w : weights) w = normal(rng);
  acc_tensor* w = acc_test::floats(weights, {10, 30});
  std::vector<int64_t> counts_in(20);
  for (size_t i = 0; i < counts_in.size(); ++i) counts_in[i] = static_cast<int64_t>(i % 7);
  acc_tensor* ints = acc_test::longs(counts_in, {20});
  ACC_ASSERT_OK(acc_log_histogram(a, "layer/weights", w, -1, nullptr, 0));  // step 1, the tensorflow bins
  ACC_ASSERT_OK(acc_log_histogram(a, "ints", ints, 5, "4", 0));
  ACC_ASSERT_OK(acc_log_histogram(a, "weights/coarse", w, -1, "tensorflow", 20));  // step 6

  // Mistakes: refused on the arguments, no step taken.
  acc_tensor* empty = acc_test::floats({}, {0});
  acc_tensor* nans = acc_test::floats({std::nanf(""), std::nanf("")}, {2});
  ACC_EXPECT_ERROR(acc_log_histogram(a, "e", empty, -1, nullptr, 0), ACC_ERR_INVALID_ARGUMENT, "is empty");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "n", nans, -1, nullptr, 0), ACC_ERR_INVALID_ARGUMENT,
                   "the histogram would be empty");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "n", nans, -1, "8", 0), ACC_ERR_INVALID_ARGUMENT, "is not finite");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "w", w, -1, "auto", 0), ACC_ERR_UNSUPPORTED, "bin-width strategies");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "w", w, -1, "many", 0), ACC_ERR_INVALID_ARGUMENT, "a number of bins");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "w", w, -1, nullptr, -1), ACC_ERR_INVALID_ARGUMENT, "max_bins");
  ACC_EXPECT_ERROR(acc_log_histogram(a, nullptr, w, -1, nullptr, 0), ACC_ERR_INVALID_ARGUMENT, "name");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "w", nullptr, -1, nullptr, 0), ACC_ERR_INVALID_HANDLE, "values");
  ACC_EXPECT_ERROR(acc_log_histogram(a, "", w, -1, nullptr, 0), ACC_ERR_INVALID_ARGUMENT, "empty");
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, -1));  // step 7
  ACC_ASSERT_OK(acc_end_training(a));
  const std::string events = acc_test::tracker_path(a, "tensorboard");
  const std::string jsonl = acc_test::tracker_path(a, "jsonl");
  acc_accelerator_free(a);

  // jsonl skips histograms (two lines, steps 0 and 7).
  std::ifstream lines(jsonl);
  std::vector<int64_t> steps;
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line)["step"]);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 7}));

  // torch's make_histogram on the same values (float32 and int64, read as float64 as add_histogram does).
  nlohmann::json cases = nlohmann::json::array();
  auto hex_of = [](const auto& values) {
    nlohmann::json out = nlohmann::json::array();
    char text[64];
    for (const auto v : values) {
      std::snprintf(text, sizeof text, "%a", static_cast<double>(v));
      out.push_back(text);
    }
    return out;
  };
  cases.push_back({{"values", hex_of(weights)}, {"bins", "tensorflow"}, {"max_bins", nullptr}});
  cases.push_back({{"values", hex_of(counts_in)}, {"bins", 4}, {"max_bins", nullptr}});
  cases.push_back({{"values", hex_of(weights)}, {"bins", "tensorflow"}, {"max_bins", 20}});
  std::ofstream(dir + "/cases.json") << cases.dump();
  const std::string command = std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_TORCH_HISTOGRAM + "' '" + dir +
                              "/cases.json' > '" + dir + "/torch.json'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir + "/torch.json");
  const nlohmann::json theirs = nlohmann::json::parse(in);

  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"layer/weights", 1}, {"ints", 5}, {"weights/coarse", 6}};
  size_t found = 0;
  for (const auto& e : acc_test::read_event_file(events))
    for (const auto& v : e.values) {
      if (!v.has_histo) continue;
      ASSERT_LT(found, expected.size());
      SCOPED_TRACE(v.tag);
      EXPECT_EQ(v.tag, expected[found].first);
      EXPECT_EQ(e.step, expected[found].second);
      const auto& t = theirs[found];
      EXPECT_EQ(v.histo_limits, numbers(t["bucket_limit"]));
      EXPECT_EQ(v.histo_counts, numbers(t["bucket"]));
      EXPECT_EQ(v.histo_min, std::stod(t["min"].get<std::string>()));
      EXPECT_EQ(v.histo_max, std::stod(t["max"].get<std::string>()));
      EXPECT_EQ(v.histo_num, std::stod(t["num"].get<std::string>()));
      EXPECT_EQ(v.histo_sum, std::stod(t["sum"].get<std::string>()));
      const double squares = std::stod(t["sum_squares"].get<std::string>());
      EXPECT_NEAR(v.histo_sum_squares, squares, 1e-12 * squares);
      ++found;
    }
  EXPECT_EQ(found, expected.size());

  // The program's tracker got the same histograms, exactly, and the other one only the two losses.
  EXPECT_EQ(numbers_logged, 2);
  ASSERT_EQ(received.size(), expected.size());
  size_t i = 0;
  for (const auto& e : acc_test::read_event_file(events))
    for (const auto& v : e.values) {
      if (!v.has_histo) continue;
      const ReceivedHistogram& r = received[i++];
      SCOPED_TRACE(r.name);
      EXPECT_EQ(r.name, v.tag);
      EXPECT_EQ(r.step, e.step);
      EXPECT_EQ(r.limits, v.histo_limits);
      EXPECT_EQ(r.counts, v.histo_counts);
      EXPECT_EQ(std::vector<double>({r.min, r.max, r.num, r.sum, r.sum_squares}),
                std::vector<double>({v.histo_min, v.histo_max, v.histo_num, v.histo_sum, v.histo_sum_squares}));
    }
  for (acc_tensor* t : {w, ints, empty, nans}) acc_tensor_free(t);
}
