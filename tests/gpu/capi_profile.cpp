// accelerator.profile() on the GPU: with the cuda activity (the default on a CUDA device) torch's
// profiler, through Kineto, records the CUDA kernels of a training step beside the CPU operators,
// and the trace is Kineto's own file (what Python's export_chrome_trace writes).
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_support.h"

using acc_gpu::device_of;
using acc_test::make_accelerator;

TEST(GpuProfile, RecordsTheCudaKernelsOfATrainingStep) {
  ACC_REQUIRE_CUDA();
  const std::string work = acc_gpu::work_dir("profile");
  acc_accelerator* acc = make_accelerator({});
  ASSERT_NE(acc, nullptr);
  const std::string device = device_of(acc);
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":64,"out_features":64},{"type":"relu"},
                                        {"type":"linear","in_features":64,"out_features":1}])", &model));
  acc_optimizer* opt = acc_test::optimizer(model, "adamw", 1e-3);
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", work.c_str()));
  ACC_ASSERT_OK(acc_options_set_bool(o, "record_shapes", 1));
  ACC_ASSERT_OK(acc_profile_begin(acc, o));
  acc_options_free(o);
  acc_tensor* x = acc_gpu::floats_on(acc_gpu::uniform(32 * 64, 5), {32, 64}, device);
  for (int step = 0; step < 3; ++step) {
    acc_tensor *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out));
    ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
    ACC_ASSERT_OK(acc_backward(acc, loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_profile_step(acc));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  ACC_ASSERT_OK(acc_profile_end(acc));
  std::ifstream in(work + "/profile_0.json");
  ASSERT_TRUE(in.good());
  const auto trace = nlohmann::json::parse(in);
  std::set<std::string> categories;
  bool addmm = false;
  for (const auto& e : trace["traceEvents"]) {
    categories.insert(e.value("cat", ""));
    addmm = addmm || e.value("name", "") == "aten::addmm";
  }
  EXPECT_TRUE(addmm);
  EXPECT_TRUE(categories.count("kernel")) << "no CUDA kernel in the trace";
  char* table = nullptr;
  ACC_ASSERT_OK(acc_profile_summary(acc, &table));
  std::printf("%s", table);
  EXPECT_NE(std::string(table).find("Self device"), std::string::npos);
  acc_string_free(table);
  acc_tensor_free(x);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}
