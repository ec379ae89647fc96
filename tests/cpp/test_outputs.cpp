// Flattening of TorchScript forward results into named tensors.
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/script_model.h"

#include <torch/csrc/jit/runtime/graph_executor.h>

#include <cstdlib>

TEST(FlattenOutputs, NestedContainersJoinNamesWithDots) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("loss", at::ones({}));
  dict.insert("pair", c10::ivalue::Tuple::create({at::zeros({2}), c10::IValue(3.5)}));
  dict.insert("absent", c10::IValue());
  auto out = acc::flatten_outputs(c10::IValue(dict));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first, "loss");
  EXPECT_EQ(out[1].first, "pair.0");
  EXPECT_EQ(out[2].first, "pair.1");
  EXPECT_EQ(out[2].second.item<double>(), 3.5);
  EXPECT_EQ(acc::flatten_outputs(c10::IValue(at::ones({1})))[0].first, "");
}

TEST(FlattenOutputs, UnsupportedValuesAreReported) {
  EXPECT_THROW(acc::flatten_outputs(c10::IValue(std::string("text"))), acc::Error);
}

TEST(ScriptModel, GraphOptimizationCanBeTurnedOffPerModel) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  ASSERT_NE(dir, nullptr);
  auto model = acc::load_torchscript_model(std::string(dir) + "/classifier.pt");
  const at::Tensor x = at::linspace(-1, 1, 12).reshape({3, 4});
  const at::Tensor labels = at::tensor({0, 2, 1}, at::kLong);
  acc::NamedTensors optimised;
  for (int run = 0; run < 3; ++run) optimised = model->forward({x, labels});  // past the profiling runs
  model->set_graph_optimization(false);
  const auto eager = model->forward({x, labels});
  ASSERT_EQ(eager.size(), optimised.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(at::allclose(eager[i].second, optimised[i].second));
  // The executor's switch was set for that forward only.
  EXPECT_TRUE(torch::jit::getGraphExecutorOptimize());
}
