// DDP's PowerSGD communication hooks (ddp_comm_hook power_sgd / batched_power_sgd): the gradients
// after every backward are PyTorch's to the bit, on each process (the error feedback makes them
// differ between processes), as tests/data/export_power_sgd_cases.py recorded them with PyTorch's
// own hooks on 2 and 3 processes; and the settings PyTorch refuses are refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "accelerate.h"
#include "job.h"

using nlohmann::json;

namespace {

// The fixture for this job's process count (null when none was recorded for it).
const json* power_sgd_cases() {
  static const json document = [] {
    std::ifstream in(acc_test::data_dir() + "/power_sgd_cases.json");
    return in ? json::parse(in) : json();
  }();
  if (document.is_null() || !document["runs"].contains(std::to_string(g_world))) return nullptr;
  return &document;
}

std::vector<std::pair<std::string, std::string>> hook_options(const json& c) {
  std::vector<std::pair<std::string, std::string>> options{{"ddp_comm_hook", c["hook"].get<std::string>()}};
  if (!c["state"].empty()) options.emplace_back("ddp_comm_state_option", c["state"].dump());
  if (c.contains("wrapper")) options.emplace_back("ddp_comm_wrapper", c["wrapper"].get<std::string>());
  return options;
}

// A case's training objects: a new accelerator with the case's hook, the exported network, SGD.
struct Job {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;

  Job(const json& doc, const json& c) {
    acc = acc_test::make_accelerator(hook_options(c));
    const std::string file = doc["models"][c.value("model", std::string("net"))];
    EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &model), ACC_OK);
    EXPECT_EQ(acc_model_set_graph_optimization(model, 0), ACC_OK);  // as the fixture ran it
    EXPECT_EQ(acc_optimizer_create(model, "sgd", nullptr, &opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_set_lr(opt, 0, 0.1), ACC_OK);
    prepared = acc_prepare(acc, &model, &opt, nullptr, nullptr);
    if (prepared != ACC_OK) refusal = acc_last_error_message();
  }
  acc_status prepared = ACC_OK;
  std::string refusal;
  ~Job() {
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // The recorded steps [from, to): after each backward every gradient is compared with this
  // process's recorded one, bit for bit. Where PyTorch failed, this must fail too, for its reason.
  // The forward and backward of this process's batch of `step`; acc_backward's status.
  acc_status forward_backward(const json& doc, int64_t step) {
    const json& batch = doc["inputs"][std::to_string(g_world)][step][g_rank];
    acc_tensor* x = acc_test::floats(acc_test::hex_floats(batch["x"]), {4, 6});
    acc_tensor* y = acc_test::longs(batch["y"].get<std::vector<int64_t>>(), {4});
    acc_tensor *logits = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits), ACC_OK) << acc_last_error_message();
    y = acc_test::on_device_of(logits, y);
    EXPECT_EQ(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
    const acc_status status = loss ? acc_backward(acc, loss) : ACC_ERR_INVALID_ARGUMENT;
    for (acc_tensor* t : {x, y, logits, loss}) acc_tensor_free(t);
    return status;
  }

  void train(const json& doc, const json& c, int64_t from, int64_t to) {
    const json& recorded = doc["runs"][std::to_string(g_world)][g_rank][c["name"].get<std::string>()];
    const json& steps = recorded["steps"];
    ASSERT_EQ(prepared, ACC_OK) << refusal;
    for (int64_t step = from; step < to; ++step) {
      const acc_status status = forward_backward(doc, step);
      if (step == static_cast<int64_t>(steps.size())) {
        // PyTorch failed here (1.13 has no half-precision matmul on the CPU).
        ASSERT_TRUE(recorded.contains("error"));
        EXPECT_NE(status, ACC_OK);
        EXPECT_NE(std::string(acc_last_error_message()).find("Half"), std::string::npos) << acc_last_error_message();
        return;
      }
      ASSERT_EQ(status, ACC_OK) << acc_last_error_message();
      for (const auto& [parameter, values] : steps[step].items()) {
        acc_tensor *p = nullptr, *grad = nullptr;
        ACC_ASSERT_OK(acc_model_parameter(model, parameter.c_str(), &p));
        ACC_ASSERT_OK(acc_tensor_grad(p, &grad));
        ASSERT_NE(grad, nullptr) << parameter;
        const std::vector<float> got = acc_test::to_floats(grad);
        if (values.is_object()) {  // a large gradient: the CRC-32 of its float32 bytes
          ASSERT_EQ(got.size(), values["numel"].get<size_t>()) << parameter;
          const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(got.data()), static_cast<uInt>(got.size() * 4));
          EXPECT_EQ(crc, values["crc32"].get<uint64_t>()) << parameter << " at step " << step;
        } else {
          EXPECT_EQ(got, acc_test::hex_floats(values)) << parameter << " at step " << step;
        }
        acc_tensor_free(grad);
        acc_tensor_free(p);
      }
      ACC_ASSERT_OK(acc_optimizer_step(opt));
      ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    }
  }
};

// Once every process is here, the main process removes the folders; then all go on.
void remove_when_all_are_done(const std::vector<std::string>& dirs) {
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  if (g_rank == 0)
    for (const std::string& dir : dirs) std::filesystem::remove_all(dir);
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
}

// A copy of checkpoint `dir` whose last process's PowerSGD iteration is another (same length), and
// whose manifest records no files (as an older checkpoint's): each file alone passes every check.
std::string with_a_forged_iteration(const std::string& dir) {
  const std::string forged = dir + "_forged";
  if (g_rank == 0) {
    std::filesystem::copy(dir, forged, std::filesystem::copy_options::recursive);
    json manifest = json::parse(acc_test::read_file(forged + "/accelerate_state.json"));
    manifest.erase("files");
    manifest.erase("manifest_crc32c");
    std::ofstream(forged + "/accelerate_state.json", std::ios::trunc) << manifest.dump();
    const std::string file = forged + "/ddp_comm_hook_" + std::to_string(g_world - 1) + ".safetensors";
    std::string bytes = acc_test::read_file(file);
    const std::string key = "\"model_0.iter\":\"";
    const size_t at = bytes.find(key);
    EXPECT_NE(at, std::string::npos);
    char& digit = bytes[at + key.size()];
    digit = digit == '9' ? '8' : static_cast<char>(digit + 1);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  EXPECT_EQ(acc_wait_for_everyone(g_acc), ACC_OK);
  return forged;
}

const json* case_named(const json& doc, const std::string& name) {
  for (const json& c : doc["cases"])
    if (c["name"] == name) return &c;
  return nullptr;
}

TEST(PowerSgd, GradientsArePyTorchsToTheBit) {
  const json* doc = power_sgd_cases();
  if (!doc) GTEST_SKIP() << "no PowerSGD cases recorded for " << g_world << " processes";
  for (const json& c : (*doc)["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const json& recorded = (*doc)["runs"][std::to_string(g_world)][g_rank][c["name"].get<std::string>()];
    Job job(*doc, c);
    if (recorded.contains("error")) {
      // PyTorch failed at its first compressed step (1.13 has no float16 matrix product on the CPU):
      // refused at prepare here, saying why (found by a hunt: it failed in a backward, unexplained).
      EXPECT_EQ(job.prepared, ACC_ERR_UNSUPPORTED);
      EXPECT_NE(job.refusal.find("ddp_comm_wrapper fp16"), std::string::npos) << job.refusal;
    } else {
      job.train(*doc, c, 0, (*doc)["steps"].get<int64_t>());
    }
    ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  }
}

// save_state after compressed steps (error feedback and warm-started P and Q in hand), everything
// made anew, load_state: the next gradients are those of PyTorch's uninterrupted run.
TEST(PowerSgd, AResumedJobCompressesAsTheUninterruptedOne) {
  const json* doc = power_sgd_cases();
  if (!doc) GTEST_SKIP() << "no PowerSGD cases recorded for " << g_world << " processes";
  const std::string dir = std::string("/tmp/acc_dist_power_sgd_") + std::getenv("MASTER_PORT");
  for (const char* name : {"layerwise", "batched"}) {
    SCOPED_TRACE(name);
    const json& c = *case_named(*doc, name);
    const int64_t steps = (*doc)["steps"].get<int64_t>();
    {
      Job first(*doc, c);
      first.train(*doc, c, 0, 4);
      ACC_ASSERT_OK(acc_save_state(first.acc, dir.c_str(), nullptr));
      ACC_ASSERT_OK(acc_save_state(first.acc, dir.c_str(), nullptr));  // a save replaces its own files
      for (int64_t rank = 0; rank < g_world; ++rank)
        EXPECT_TRUE(std::filesystem::exists(dir + "/ddp_comm_hook_" + std::to_string(rank) + ".safetensors"));
    }
    // A process's state is its own: another's, copied over it, is refused before anything changes.
    const std::string swapped = dir + "_swapped";
    if (g_rank == 0) {
      std::filesystem::copy(dir, swapped, std::filesystem::copy_options::recursive);
      std::filesystem::copy_file(dir + "/ddp_comm_hook_0.safetensors", swapped + "/ddp_comm_hook_1.safetensors",
                                 std::filesystem::copy_options::overwrite_existing);
    }
    ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
    // A process's file the manifest records, deleted, is refused too (not taken for "saved without").
    const std::string missing = dir + "_missing";
    if (g_rank == 0) {
      std::filesystem::copy(dir, missing, std::filesystem::copy_options::recursive);
      std::filesystem::remove(missing + "/ddp_comm_hook_" + std::to_string(g_world - 1) + ".safetensors");
    }
    ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
    // Processes whose iterations differ would run different collectives: refused on every process.
    const std::string forged = with_a_forged_iteration(dir);
    Job second(*doc, c);
    ACC_EXPECT_ERROR(acc_load_state(second.acc, forged.c_str(), nullptr), ACC_ERR_IO,
                     "hold states that must agree and do not: process 0 has PowerSGD state of model 0: iteration");
    ACC_EXPECT_ERROR(acc_load_state(second.acc, swapped.c_str(), nullptr), ACC_ERR_IO, "PowerSGD");
    ACC_EXPECT_ERROR(acc_load_state(second.acc, missing.c_str(), nullptr), ACC_ERR_IO, "is missing");
    ACC_ASSERT_OK(acc_load_state(second.acc, dir.c_str(), nullptr));
    second.train(*doc, c, 4, steps);
    remove_when_all_are_done({dir, swapped, missing, forged});
  }
}

// A checkpoint saved without PowerSGD (here: the initial weights) loads into a job that uses it:
// its PowerSGD starts afresh, plain steps until start_powerSGD_iter again, so the job then trains
// exactly as PyTorch's did from the start.
TEST(PowerSgd, ACheckpointWithoutItStartsItAfresh) {
  const json* doc = power_sgd_cases();
  if (!doc) GTEST_SKIP() << "no PowerSGD cases recorded for " << g_world << " processes";
  const std::string dir = std::string("/tmp/acc_dist_power_sgd_plain_") + std::getenv("MASTER_PORT");
  const json& c = *case_named(*doc, "layerwise");
  {
    json plain_case = c;
    plain_case["hook"] = "no";
    plain_case["state"] = json::object();
    Job initial(*doc, plain_case);
    ACC_ASSERT_OK(acc_save_state(initial.acc, dir.c_str(), nullptr));
    EXPECT_FALSE(std::filesystem::exists(dir + "/ddp_comm_hook_0.safetensors"));
  }
  {
    Job job(*doc, c);
    job.train(*doc, c, 0, 3);  // into compression
    ACC_ASSERT_OK(acc_load_state(job.acc, dir.c_str(), nullptr));
    job.train(*doc, c, 0, (*doc)["steps"].get<int64_t>());
  }
  remove_when_all_are_done({dir});
}

// A state saved under another hook (its memories shaped otherwise) starts PowerSGD afresh on resume,
// as Accelerate's resumed PowerSGD always starts: training goes on, through compressed steps.
TEST(PowerSgd, AStateSavedWithOtherSettingsStartsItAfresh) {
  const json* doc = power_sgd_cases();
  if (!doc) GTEST_SKIP() << "no PowerSGD cases recorded for " << g_world << " processes";
  const std::string dir = std::string("/tmp/acc_dist_power_sgd_other_") + std::getenv("MASTER_PORT");
  const json& batched = *case_named(*doc, "batched");
  const json& layerwise = *case_named(*doc, "layerwise");
  {
    Job first(*doc, batched);
    first.train(*doc, batched, 0, 4);
    ACC_ASSERT_OK(acc_save_state(first.acc, dir.c_str(), nullptr));
  }
  {
    Job second(*doc, layerwise);
    ACC_ASSERT_OK(acc_load_state(second.acc, dir.c_str(), nullptr));
    for (int64_t step = 0; step < (*doc)["steps"].get<int64_t>(); ++step) {  // past start_powerSGD_iter again
      ACC_ASSERT_OK(second.forward_backward(*doc, step));
      ACC_ASSERT_OK(acc_optimizer_step(second.opt));
      ACC_ASSERT_OK(acc_optimizer_zero_grad(second.opt));
    }
  }
  remove_when_all_are_done({dir});
}

TEST(PowerSgd, SettingsPyTorchRefusesAreRefused) {
  // Accelerate hands PowerSGDState its arguments; PyTorch refuses an early start with error feedback
  // or warm start (the buckets are rebuilt after the first step), and unknown arguments.
  acc_accelerator* acc = nullptr;
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "power_sgd"}, {"ddp_comm_state_option", R"({"start_powerSGD_iter": 1})"}}, &acc),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("start_powerSGD_iter must be > 1"), std::string::npos);
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "power_sgd"}, {"ddp_comm_state_option", R"({"rank": 2})"}}, &acc),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("unknown key 'rank'"), std::string::npos);
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "power_sgd"}, {"ddp_comm_state_option", "[1, 2]"}}, &acc),
            ACC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "power_sgd"},
                                          {"ddp_comm_state_option", R"({"random_seed": 4294967296})"}}, &acc),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("random_seed"), std::string::npos);
  // A state or a wrapper without a PowerSGD hook would do nothing: refused, not ignored.
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_state_option", R"({"start_powerSGD_iter": 10})"}}, &acc),
            ACC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "fp16"}, {"ddp_comm_wrapper", "fp16"}}, &acc),
            ACC_ERR_UNSUPPORTED);
  ASSERT_EQ(acc_test::create_accelerator({{"ddp_comm_hook", "power_sgd"}, {"zero_stage", "2"}}, &acc),
            ACC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(acc_last_error_message()).find("zero_stage 2"), std::string::npos);
}

TEST(PowerSgd, JoinUnevenInputsIsRefused) {
  acc_accelerator* acc = acc_test::make_accelerator({{"ddp_comm_hook", "power_sgd"}});
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(kDistNet, &model));
  ACC_ASSERT_OK(acc_prepare(acc, &model, nullptr, nullptr, nullptr));
  ACC_EXPECT_ERROR(acc_join_uneven_inputs_begin(acc, model, -1), ACC_ERR_UNSUPPORTED, "power_sgd");
  acc_model_free(model);
  acc_accelerator_free(acc);
}

}  // namespace
