// The library against the installed Python packages, through the C API: a TorchScript model that
// calls scaled_dot_product_attention trains on the GPU; acc_save_model's safetensors load into the
// same nn.Module with Python's safetensors; TensorBoard's EventAccumulator reads our event files.
// Each Python step exits 77 when its package is missing, which skips the test.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_support.h"

using acc_gpu::device_of;
using acc_gpu::dtype_of;
using acc_gpu::parameter;
using acc_test::make_accelerator;

TEST(GpuTorchScript, ScaledDotProductAttentionModelTrainsOnTheGpu) {
  ACC_REQUIRE_CUDA();
  const std::string work = acc_gpu::work_dir("sdpa_model");
  const std::string path = work + "/sdpa.pt";
  ACC_RUN_PYTHON("sdpa_model.py", path);

  acc_accelerator* acc = make_accelerator({});
  ASSERT_NE(acc, nullptr);
  const std::string device = device_of(acc);
  ASSERT_EQ(device.rfind("cuda", 0), 0u) << device;
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &model));
  acc_optimizer* opt = acc_test::optimizer(model, "adam", 2e-2);
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  const auto qkv_before = parameter(model, "qkv.weight");
  ASSERT_EQ(qkv_before.size(), 96u * 32u);

  // 8 sequences of 16 tokens of 32 features; the target is half the input.
  const std::vector<float> xv = acc_gpu::uniform(8 * 16 * 32, 21);
  std::vector<float> yv(xv);
  for (float& v : yv) v *= 0.5f;
  acc_tensor* x = acc_gpu::floats_on(xv, {8, 16, 32}, device);
  acc_tensor* y = acc_gpu::floats_on(yv, {8, 16, 32}, device);
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    acc_tensor *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out));
    if (step == 0) {
      EXPECT_EQ(device_of(out), device);
      EXPECT_EQ(dtype_of(out), ACC_DTYPE_FLOAT32);
    }
    ACC_ASSERT_OK(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss));
    losses.push_back(acc_test::item(loss));
    ACC_ASSERT_OK(acc_backward(acc, loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  std::printf("loss %.5f -> %.5f over %zu steps\n", losses.front(), losses.back(), losses.size());
  for (double l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "the attention model did not train";
  // The query rows of qkv.weight get their gradient only through the attention weights, i.e.
  // through scaled_dot_product_attention's backward.
  const auto qkv_after = parameter(model, "qkv.weight");
  ASSERT_EQ(qkv_after.size(), qkv_before.size());
  int64_t query_changed = 0;
  for (size_t i = 0; i < 32u * 32u; ++i) query_changed += qkv_after[i] != qkv_before[i];
  EXPECT_GT(query_changed, 0) << "no gradient reached the queries through the attention";

  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(GpuSaveModel, SafetensorsLoadIntoTheSameModuleWithEqualOutputs) {
  ACC_REQUIRE_CUDA();
  const std::string work = acc_gpu::work_dir("save_model_safetensors");
  ACC_RUN_PYTHON("safetensors_model.py", "export", work);

  acc_accelerator* acc = make_accelerator({});
  ASSERT_NE(acc, nullptr);
  const std::string device = device_of(acc);
  ASSERT_EQ(device.rfind("cuda", 0), 0u) << device;
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((work + "/model.pt").c_str(), &model));
  acc_optimizer* opt = acc_test::optimizer(model, "sgd", 0.1);
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));

  // A few training steps on the GPU (batch norm in training mode: one batch counted per step).
  constexpr int kSteps = 5;
  acc_tensor* x = acc_gpu::floats_on(acc_gpu::uniform(16 * 12, 31), {16, 12}, device);
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 3);
  acc_tensor* y = acc_gpu::longs_on(labels, {16}, device);
  for (int step = 0; step < kSteps; ++step) {
    acc_tensor *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out));
    ACC_ASSERT_OK(acc_loss_cross_entropy(out, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    ACC_ASSERT_OK(acc_backward(acc, loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }

  // Outputs of the trained model in evaluation mode on fixed inputs, written with the library's own
  // safetensors writer; then the weights, as save_pretrained lays them out.
  ACC_ASSERT_OK(acc_model_set_training(model, 0));
  acc_tensor* x_eval_cpu = acc_test::floats(acc_gpu::uniform(10 * 12, 32), {10, 12});
  acc_tensor* x_eval = acc_gpu::to(x_eval_cpu, device.c_str());
  acc_tensor* y_eval = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(model, x_eval, ACC_FORWARD_NO_GRAD, &y_eval));
  acc_tensor* y_eval_cpu = acc_gpu::to(y_eval, "cpu");
  acc_tensor_list* io = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&io));
  ACC_ASSERT_OK(acc_tensor_list_append(io, "x", x_eval_cpu));
  ACC_ASSERT_OK(acc_tensor_list_append(io, "y", y_eval_cpu));
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(io, (work + "/io.safetensors").c_str()));
  ACC_ASSERT_OK(acc_save_model(acc, model, (work + "/saved").c_str(), nullptr));
  ASSERT_TRUE(std::ifstream(work + "/saved/model.safetensors").good()) << "acc_save_model wrote no model.safetensors";

  ACC_RUN_PYTHON("safetensors_model.py", "check", work, std::to_string(kSteps));

  for (acc_tensor* t : {x, y, x_eval_cpu, x_eval, y_eval, y_eval_cpu}) acc_tensor_free(t);
  acc_tensor_list_free(io);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

// Needs no GPU, only Python's tensorboard (which the GPU machine has): it runs wherever that is there.
TEST(GpuTracking, TensorBoardReadsOurEventFiles) {
  ACC_RUN_PYTHON("tensorboard_check.py", "--probe");
  const std::string work = acc_gpu::work_dir("tensorboard_events");
  acc_accelerator* acc = make_accelerator({{"project_dir", work}, {"log_with", "tensorboard"}});
  ASSERT_NE(acc, nullptr);
  const char* config = R"({"lr": 0.01, "batch_size": 32, "optimizer": "adamw", "model": {"layers": 2}, "shuffle": true})";
  ACC_ASSERT_OK(acc_init_trackers(acc, "tb_run", config));
  nlohmann::json expected;
  expected["scalars"] = {{"loss", nlohmann::json::array()}, {"accuracy", nlohmann::json::array()},
                         {"lr", nlohmann::json::array()}};
  for (int step = 0; step < 5; ++step) {  // steps chosen by the library: 0, 1, 2, ...
    const char* names[] = {"loss", "accuracy"};
    const double values[] = {1.0 / (step + 1), 0.5 + 0.1 * step};
    ACC_ASSERT_OK(acc_log(acc, names, values, 2, -1));
    expected["scalars"]["loss"].push_back({step, values[0]});
    expected["scalars"]["accuracy"].push_back({step, values[1]});
  }
  ACC_ASSERT_OK(acc_log_scalar(acc, "lr", 3e-4, 10));  // an explicit step
  expected["scalars"]["lr"].push_back({10, 3e-4});
  // A batch of 3 colour images of 4x5 on the accelerator's device (values below 0 and above 1 too).
  std::vector<float> pixels(3 * 3 * 4 * 5);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 150.0f - 0.1f;
  acc_tensor* images = acc_gpu::floats_on(pixels, {3, 3, 4, 5}, device_of(acc));
  const char* image_name = "samples";
  ACC_ASSERT_OK(acc_log_images(acc, &image_name, &images, 1, 11, nullptr));
  acc_tensor_free(images);
  expected["images"] = {{"samples", {{"step", 11}, {"shape", {3, 3, 4, 5}}, {"values", pixels}}}};
  ACC_ASSERT_OK(acc_end_training(acc));
  expected["hparams"] = {{"lr", 0.01}, {"batch_size", 32}, {"optimizer", "adamw"}, {"model/layers", 2},
                         {"shuffle", true}};
  expected["text"] = {"| lr | 0.01 |", "| optimizer | adamw |", "| model/layers | 2 |"};

  char* event_file = nullptr;
  ACC_ASSERT_OK(acc_tracker_path(acc, "tensorboard", &event_file));
  const std::string path = event_file ? event_file : "";
  acc_string_free(event_file);
  ASSERT_NE(path.find("events.out.tfevents."), std::string::npos) << path;
  const std::string run_dir = path.substr(0, path.rfind('/'));
  EXPECT_EQ(run_dir, work + "/tb_run");
  std::ofstream(work + "/expected.json") << expected.dump(2);
  ACC_RUN_PYTHON("tensorboard_check.py", run_dir, work + "/expected.json");
  acc_accelerator_free(acc);
}
