// DDP where the autograd graph decides what is reduced: find_unused_parameters with an output the
// loss does not read (DDP's output sink) and with a layer used on some steps and processes only (the
// Reducer then reports to its DDP logger: a process without one crashed there), and static_graph
// (the first averaging backward reduces at its end and finds the parameters that never get
// gradients), alone, with find_unused_parameters and with gradient accumulation. Every gradient after every backward is
// PyTorch's DDP's to the bit, as tests/data/export_ddp_graph_cases.py recorded them on 2 and 3 processes.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelerate.h"
#include "job.h"

using nlohmann::json;

namespace {

// The fixture for this job's process count (null when none was recorded for it).
const json* ddp_graph_cases() {
  static const json document = [] {
    std::ifstream in(acc_test::data_dir() + "/ddp_graph_cases.json");
    return in ? json::parse(in) : json();
  }();
  if (document.is_null() || !document["runs"].contains(std::to_string(g_world))) return nullptr;
  return &document;
}

std::vector<std::pair<std::string, std::string>> ddp_options(const json& c) {
  const int64_t accumulation = c.value("accumulation", 1);
  return {{"ddp_find_unused_parameters", c.value("find_unused_parameters", false) ? "true" : "false"},
          {"ddp_static_graph", c.value("static_graph", false) ? "true" : "false"},
          {"gradient_accumulation_steps", std::to_string(accumulation)}};
}

// One case: a new accelerator with its DDP settings, the exported model, SGD; each step's
// gradients compared with this process's recorded ones, and at each window's end with every
// process's (averaged: the same everywhere, whatever the fixture).
void train_as_recorded(const json& doc, const json& c) {
  acc_accelerator* acc = acc_test::make_accelerator(ddp_options(c));
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  const std::string file = doc["models"][c["model"].get<std::string>()];
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &model));
  ACC_ASSERT_OK(acc_model_set_graph_optimization(model, 0));  // as the fixture ran it
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_optimizer_set_lr(opt, 0, 0.1));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  const json& runs = doc["runs"][std::to_string(g_world)];
  const json& steps = runs[g_rank][c["name"].get<std::string>()]["steps"];
  const int64_t rows = doc["rows"], accumulation = c.value("accumulation", 1);
  const bool refused = c.value("static_graph", false) && accumulation > 1 &&
                       acc_test::static_graph_needs_an_averaging_first_step();
  for (size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const json& batch = doc["inputs"][std::to_string(g_world)][step][g_rank];
    acc_tensor* x = acc_test::floats(acc_test::hex_floats(batch["x"]), {rows, 6});
    acc_tensor* y = acc_test::longs(batch["y"].get<std::vector<int64_t>>(), {rows});
    ACC_ASSERT_OK(acc_accumulate_begin(acc));
    acc_tensor_list* outputs = nullptr;
    if (refused) {  // refused on every process, before any collective
      ACC_EXPECT_ERROR(acc_model_forward(model, &x, 1, ACC_FORWARD_DEFAULT, &outputs), ACC_ERR_UNSUPPORTED,
                       "the first training step must average gradients");
      ACC_ASSERT_OK(acc_accumulate_end(acc));
      acc_tensor_free(x);
      acc_tensor_free(y);
      break;
    }
    ACC_ASSERT_OK(acc_model_forward(model, &x, 1, ACC_FORWARD_DEFAULT, &outputs));
    acc_tensor *logits = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(outputs, 0, &logits));  // the first output only
    y = acc_test::on_device_of(logits, y);
    ACC_ASSERT_OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    ACC_ASSERT_OK(acc_backward(acc, loss));
    for (const auto& [parameter, values] : steps[step].items()) {
      acc_tensor *p = nullptr, *grad = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(model, parameter.c_str(), &p));
      ACC_ASSERT_OK(acc_tensor_grad(p, &grad));
      if ((step + 1) % accumulation == 0)
        for (size_t rank = 1; rank < runs.size(); ++rank)
          EXPECT_EQ(runs[rank][c["name"].get<std::string>()]["steps"][step][parameter], values)
              << parameter << ": the fixture's processes disagree at a window's end";
      if (values.is_null()) {
        EXPECT_EQ(grad, nullptr) << parameter << " has a gradient; PyTorch's has none";
      } else {
        EXPECT_NE(grad, nullptr) << parameter;
        if (grad) EXPECT_EQ(acc_test::to_floats(grad), acc_test::hex_floats(values)) << parameter;
      }
      acc_tensor_free(grad);
      acc_tensor_free(p);
    }
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_accumulate_end(acc));
    for (acc_tensor* t : {x, y, logits, loss}) acc_tensor_free(t);
    acc_tensor_list_free(outputs);
  }
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(DdpGraph, GradientsArePyTorchsToTheBit) {
  const json* doc = ddp_graph_cases();
  if (!doc) GTEST_SKIP() << "no DDP graph cases recorded for " << g_world << " processes";
  for (const json& c : (*doc)["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    train_as_recorded(*doc, c);
    ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
  }
}

// Without find_unused_parameters, a parameter that gets no gradient leaves its bucket's allreduce
// unlaunched: PyTorch's DDP fails the next forward with gradients ("Expected to have finished
// reduction in the prior iteration"), and so does this, on every process, instead of stepping each
// process's own gradients (before 2026-12-03 the replicas drifted apart silently). The heads model's
// spare layer gets no gradient: the second training forward is refused; the first one trains.
TEST(DdpGraph, AParameterWithoutGradientFailsTheNextForwardAsInPyTorch) {
  const json* doc = ddp_graph_cases();
  if (!doc) GTEST_SKIP() << "no DDP graph cases recorded for " << g_world << " processes";
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  const std::string file = (*doc)["models"]["heads"];
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &model));
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  const int64_t rows = (*doc)["rows"];
  for (int step = 0; step < 2; ++step) {
    const json& batch = (*doc)["inputs"][std::to_string(g_world)][step][g_rank];
    acc_tensor* x = acc_test::floats(acc_test::hex_floats(batch["x"]), {rows, 6});
    acc_tensor* y = acc_test::longs(batch["y"].get<std::vector<int64_t>>(), {rows});
    acc_tensor_list* outputs = nullptr;
    if (step == 1) {
      ACC_EXPECT_ERROR(acc_model_forward(model, &x, 1, ACC_FORWARD_DEFAULT, &outputs), ACC_ERR_INVALID_ARGUMENT,
                       "gave no gradient to some trainable parameters");
      // Evaluation does not reduce: it runs.
      ACC_ASSERT_OK(acc_model_forward(model, &x, 1, ACC_FORWARD_NO_GRAD, &outputs));
      acc_tensor_list_free(outputs);
    } else {
      ACC_ASSERT_OK(acc_model_forward(model, &x, 1, ACC_FORWARD_DEFAULT, &outputs));
      acc_tensor *logits = nullptr, *loss = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_get(outputs, 0, &logits));  // the aux head's output and the spare layer unused
      y = acc_test::on_device_of(logits, y);
      ACC_ASSERT_OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
      ACC_ASSERT_OK(acc_backward(acc, loss));
      ACC_ASSERT_OK(acc_optimizer_step(opt));
      ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
      for (acc_tensor* t : {logits, loss}) acc_tensor_free(t);
      acc_tensor_list_free(outputs);
    }
    acc_tensor_free(x);
    acc_tensor_free(y);
  }
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
  ACC_ASSERT_OK(acc_wait_for_everyone(g_acc));
}

}  // namespace
