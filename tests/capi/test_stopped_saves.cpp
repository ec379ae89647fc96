// A save killed at each step of its file operations, one step further each round (a preloaded
// library, tests/faults/kill_at_call.c, kills the saving process right after its Nth such call):
// what is left reads as the earlier save or as the new one, whole, and the next save works.
#include <signal.h>

#include "support.h"

#ifdef ACC_TEST_KILL_AT_CALL
namespace {

namespace fs = std::filesystem;

const char* const kWhatVariable = "ACC_TEST_STOPPED_SAVE";
constexpr const char* kSpec =
    R"([{"type":"linear","in_features":64,"out_features":64},{"type":"linear","in_features":64,"out_features":64},)"
    R"({"type":"linear","in_features":64,"out_features":64},{"type":"linear","in_features":64,"out_features":64}])";

// One save of `what` ("model", "sharded_model", "torchscript", "lora") into `path` with every
// weight `value` (and lora_alpha 4 * value), in this process.
void save(const std::string& what, const std::string& path, float value) {
  acc_model* model = acc_test::spec_model(kSpec);
  if (what == "lora") {
    acc_options* o = acc_test::lora_options(4, 4 * value);
    ASSERT_EQ(acc_model_add_lora(model, "0", o, nullptr), ACC_OK);
    acc_options_free(o);
  }
  acc_test::fill_state(model, value);
  if (what == "model" || what == "sharded_model") {
    acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
    ASSERT_EQ(acc_save_model(acc, model, path.c_str(), what == "model" ? nullptr : "20000"), ACC_OK)
        << acc_last_error_message();
    acc_accelerator_free(acc);
  } else if (what == "torchscript") {
    ASSERT_EQ(acc_model_save_torchscript(model, path.c_str()), ACC_OK) << acc_last_error_message();
  } else {
    ASSERT_EQ(acc_model_save_lora(model, path.c_str()), ACC_OK) << acc_last_error_message();
  }
  acc_model_free(model);
}

// The same save in a child process killed right after its `at`th call `call` on a path holding
// `match`. False when the save ended before that call (the round after the last step).
bool killed_save(const std::string& what, const std::string& path, float value, const char* call, const char* match,
                 int at) {
  const int status =
      acc_test::run_self("StoppedSaveChild.Saves",
                         {std::string(kWhatVariable) + "=" + what + "|" + path + "|" + std::to_string(value),
                          std::string("LD_PRELOAD=") + ACC_TEST_KILL_AT_CALL, std::string("ACC_TEST_KILL_CALL=") + call,
                          std::string("ACC_TEST_KILL_MATCH=") + match, "ACC_TEST_KILL_AT=" + std::to_string(at)});
  EXPECT_NE(status, -1) << "the saving process did not start";
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    return true;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the save failed by itself (status " << status << ")";
  return false;
}

// Rounds of: the earlier save (value 1) made whole, the new one (value 2) killed after its kth
// call, what is there checked by `check` (given the values it may hold), then the next save (value
// 3) and its check; until a round's save is not stopped.
template <typename Check>
void stop_at_every_step(const std::string& earlier, const std::string& later, const std::string& path, const char* call,
                        const char* match, Check check) {
  int rounds = 0;
  for (int at = 1; at < 200; ++at) {
    SCOPED_TRACE("stopped after call " + std::to_string(at) + " (" + call + " of a path with '" + match + "')");
    fs::remove_all(path);
    save(earlier, path, 1);
    const bool stopped = killed_save(later, path, 2, call, match, at);
    check(stopped ? std::set<float>{1, 2} : std::set<float>{2});
    if (::testing::Test::HasFailure()) return;
    save(later, path, 3);  // the next save to the same place
    check(std::set<float>{3});
    if (!stopped) break;
    ++rounds;
  }
  EXPECT_GE(rounds, 1) << "no call of the save was stopped";
}

// The model read from `path` (a folder or a TorchScript file) holds one value throughout, one of `allowed`.
void expect_loaded_model_in(const std::string& path, bool torchscript, const std::set<float>& allowed) {
  acc_model* model = nullptr;
  if (torchscript) {
    EXPECT_EQ(acc_model_load_torchscript(path.c_str(), &model), ACC_OK) << acc_last_error_message();
  } else {
    model = acc_test::spec_model(kSpec);
    EXPECT_EQ(acc_model_load_safetensors(model, path.c_str(), 1, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  }
  if (!model) return;
  const std::set<float> values = acc_test::parameter_values(model);
  acc_model_free(model);
  EXPECT_EQ(values.size(), 1u) << "a mix of saves";
  if (!values.empty()) EXPECT_TRUE(allowed.count(*values.begin())) << *values.begin();
}

}  // namespace

// Not a test by itself: the saving process of the tests below.
TEST(StoppedSaveChild, Saves) {
  const char* spec = std::getenv(kWhatVariable);
  if (!spec) GTEST_SKIP() << "runs as the child of the StoppedSave tests";
  std::string s = spec;
  const auto bar = s.find('|'), bar2 = s.rfind('|');
  save(s.substr(0, bar), s.substr(bar + 1, bar2 - bar - 1), std::stof(s.substr(bar2 + 1)));
}

TEST(StoppedSave, ASingleFileSaveOverAShardedOneReadsAsEitherSave) {
  // A kill while the earlier shards were removed left the earlier index naming missing shards.
  const std::string dir = acc_test::temp_path("stopped_single_over_sharded");
  stop_at_every_step("sharded_model", "model", dir, "remove", "stopped_single_over_sharded",
                     [&](const std::set<float>& allowed) {
                       expect_loaded_model_in(dir, false, allowed);
                       EXPECT_TRUE(acc_test::temporaries_of(dir + "/model.safetensors").empty());
                     });
}

TEST(StoppedSave, AShardedSaveOverAShardedOneReadsAsEitherSave) {
  // A kill while the new shards were moved in left a folder without an index: neither save loaded.
  const std::string dir = acc_test::temp_path("stopped_sharded_over_sharded");
  for (const char* call : {"rename", "remove"})
    stop_at_every_step("sharded_model", "sharded_model", dir, call, "stopped_sharded_over_sharded",
                       [&](const std::set<float>& allowed) {
                         expect_loaded_model_in(dir, false, allowed);
                         // A finished save leaves no staged files behind.
                         if (allowed == std::set<float>{3}) EXPECT_FALSE(fs::exists(dir + "/.accelerate-save-staging"));
                       });
}

TEST(StoppedSave, ATorchScriptSaveLeavesTheEarlierFileOrTheNewOne) {
  // The file was opened for writing in place: a kill left it truncated.
  const std::string path = acc_test::temp_path("stopped_torchscript.pt");
  stop_at_every_step("torchscript", "torchscript", path, "open", "stopped_torchscript.pt",
                     [&](const std::set<float>& allowed) { expect_loaded_model_in(path, true, allowed); });
}

TEST(StoppedSave, AnAdapterSaveNeverPairsOneSavesWeightsWithAnothersConfiguration) {
  // The weights were renamed into place before the configuration: a kill between paired the new
  // weights with the old lora_alpha, silently.
  const std::string dir = acc_test::temp_path("stopped_lora");
  stop_at_every_step("lora", "lora", dir, "rename", "stopped_lora", [&](const std::set<float>& allowed) {
    acc_model* model = acc_test::spec_model(kSpec);
    ASSERT_EQ(acc_model_load_lora(model, dir.c_str()), ACC_OK) << acc_last_error_message();
    const std::set<float> a = acc_test::parameter_values(model, "lora_A");
    acc_model_free(model);
    ASSERT_EQ(a.size(), 1u);
    const std::string config = acc_test::read_file(dir + "/adapter_config.json");
    const float value = *a.begin();
    EXPECT_TRUE(allowed.count(value)) << value;
    const std::string alpha = "\"lora_alpha\": " + std::to_string(static_cast<int>(4 * value)) + ".0";
    EXPECT_NE(config.find(alpha), std::string::npos) << "weights of value " << value << " with " << config;
  });
}
#endif  // ACC_TEST_KILL_AT_CALL (not under sanitizers)
