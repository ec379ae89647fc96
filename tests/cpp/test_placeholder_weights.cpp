// FSDP's cpu_ram_efficient_loading on the processes that are not the main one: models built with
// placeholder weights (model/model.h, Model::make_weights_pending) hold no memory for them, draw
// the same random numbers as a normal build, refuse to compute with them, and get storage when
// prepared.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "common/error.h"
#include "model/model.h"

namespace {

const char* const kNet = R"([{"type":"linear","in_features":30,"out_features":20},{"type":"batchnorm1d","num_features":20},
                            {"type":"relu"},{"type":"linear","in_features":20,"out_features":4}])";

// Bytes behind a tensor (a placeholder: one element).
size_t storage_bytes(const at::Tensor& t) { return t.storage().nbytes(); }

void expect_placeholders(const acc::Model& model) {
  for (const auto& entry : model.named_parameters())
    EXPECT_LE(storage_bytes(entry.second), entry.second.element_size()) << entry.first;
  for (const auto& entry : model.named_buffers())
    EXPECT_LE(storage_bytes(entry.second), entry.second.element_size()) << entry.first;
}

acc::Status status_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const acc::Error& e) {
    return e.status();
  }
  return acc::Status::Ok;
}

}  // namespace

TEST(PlaceholderWeights, ASpecModelKeepsItsShapesAndRandomDrawsButNoWeights) {
  at::manual_seed(3);
  auto normal = acc::model_from_spec(kNet);
  const at::Tensor next_normal = at::rand({4});
  at::manual_seed(3);
  auto pending = acc::model_from_spec(kNet, /*weights_pending=*/true);
  const at::Tensor next_pending = at::rand({4});
  EXPECT_TRUE(at::equal(next_normal, next_pending)) << "the pending build drew other random numbers";
  EXPECT_TRUE(pending->weights_pending());
  EXPECT_FALSE(normal->weights_pending());
  expect_placeholders(*pending);
  const auto a = normal->named_parameters(), b = pending->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.sizes(), b[i].second.sizes()) << a[i].first;
    EXPECT_TRUE(b[i].second.requires_grad()) << a[i].first;
  }
  EXPECT_EQ(normal->named_buffers().size(), pending->named_buffers().size());
}

TEST(PlaceholderWeights, ValuesAreRefusedAndLoadingOnlyChecks) {
  auto model = acc::model_from_spec(kNet, true);
  EXPECT_EQ(status_of([&] { model->forward({at::ones({2, 30})}); }), acc::Status::NotInitialized);
  EXPECT_EQ(status_of([&] { model->state_dict(); }), acc::Status::NotInitialized);
  const std::string file = testing::TempDir() + "/placeholder_" + std::to_string(::getpid()) + ".pt";
  EXPECT_EQ(status_of([&] { model->save_torchscript(file); }), acc::Status::NotInitialized);
  EXPECT_FALSE(std::filesystem::exists(file));

  // A checkpoint with a wrong shape is still refused; a right one is accepted and not written (the
  // main process's weights come when preparing).
  acc::NamedTensors wrong{{"0.weight", at::ones({30, 20})}};
  EXPECT_EQ(status_of([&] { model->load_state_dict(wrong, false); }), acc::Status::InvalidArgument);
  acc::NamedTensors right{{"0.weight", at::ones({20, 30})}};
  const auto [missing, unexpected] = model->load_state_dict(right, false);
  EXPECT_FALSE(missing.empty());
  EXPECT_TRUE(unexpected.empty());
  expect_placeholders(*model);

  // Moving keeps placeholders (a GPU would otherwise receive the whole model in zeros).
  model->to(c10::nullopt, at::kDouble);
  expect_placeholders(*model);
  EXPECT_EQ(model->named_parameters().front().second.scalar_type(), at::kDouble);
}

TEST(PlaceholderWeights, MaterializingGivesStorageToWhatTheEngineDoesNotShard) {
  auto model = acc::model_from_spec(kNet, true);
  model->set_requires_grad("0.*", false);
  model->materialize_weights(c10::nullopt, /*parameters_too=*/false);
  EXPECT_TRUE(model->weights_pending()) << "until stage 3 has filled its shards";
  for (const auto& entry : model->named_parameters())
    EXPECT_LE(storage_bytes(entry.second), 4u) << entry.first << ": stage 3 fills every parameter, frozen ones too";
  for (const auto& entry : model->named_buffers())
    EXPECT_EQ(storage_bytes(entry.second), entry.second.numel() * entry.second.element_size()) << entry.first;

  auto everything = acc::model_from_spec(kNet, true);
  everything->materialize_weights(c10::nullopt, true);
  EXPECT_FALSE(everything->weights_pending());
  for (const auto& entry : everything->named_parameters())
    EXPECT_EQ(storage_bytes(entry.second), entry.second.numel() * 4u) << entry.first;
  EXPECT_NO_THROW(everything->forward({at::ones({2, 30})}));
}

TEST(PlaceholderWeights, ATorchScriptModelLoadedPendingKeepsNoWeights) {
  const std::string file = testing::TempDir() + "/placeholder_source_" + std::to_string(::getpid()) + ".pt";
  acc::model_from_spec(kNet)->save_torchscript(file);
  auto model = acc::load_torchscript_model(file, true);
  std::filesystem::remove(file);
  EXPECT_TRUE(model->weights_pending());
  expect_placeholders(*model);
  EXPECT_EQ(status_of([&] { model->forward({at::ones({2, 30})}); }), acc::Status::NotInitialized);
}
