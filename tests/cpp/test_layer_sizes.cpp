// Spec layers' weights sized from their specs before anything is allocated (model/layer_sizes.h):
// the sizes are what building the layers takes, and a model the machine cannot hold is refused up
// front (found by a hunt: two 40000 x 40000 linear layers allocated and filled the first before
// the second failed; sizes in the terabytes reached the allocator).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "model/layer_sizes.h"
#include "model/layers.h"
#include "model/model.h"

namespace {

double built_bytes(const acc::LayerSpec& spec) {
  const auto module = acc::build_layer(spec).ptr();
  double bytes = 0;
  for (const auto& p : module->named_parameters(true))
    if (p.value().defined()) bytes += static_cast<double>(p.value().nbytes());
  for (const auto& b : module->named_buffers(true))
    if (b.value().defined()) bytes += static_cast<double>(b.value().nbytes());
  return bytes;
}

TEST(LayerSizes, AreWhatBuildingTheLayersTakes) {
  // Every layer type, sized ones with their options that change the weights.
  const std::string spec = R"([
    {"type":"linear","in_features":6,"out_features":5},
    {"type":"linear","in_features":6,"out_features":5,"bias":false},
    {"type":"conv2d","in_channels":4,"out_channels":6,"kernel_size":[3,2],"groups":2},
    {"type":"conv2d","in_channels":3,"out_channels":5,"kernel_size":3,"bias":false},
    {"type":"maxpool2d","kernel_size":2},{"type":"avgpool2d","kernel_size":2},{"type":"flatten"},
    {"type":"relu"},{"type":"gelu"},{"type":"tanh"},{"type":"sigmoid"},{"type":"softmax","dim":-1},{"type":"logsoftmax","dim":-1},
    {"type":"dropout","p":0.1},
    {"type":"layernorm","normalized_shape":[3,4]},
    {"type":"layernorm","normalized_shape":[4],"elementwise_affine":false},
    {"type":"layernorm","normalized_shape":[3,4],"bias":false},
    {"type":"rmsnorm","normalized_shape":[3,4]},
    {"type":"rmsnorm","normalized_shape":[4],"elementwise_affine":false},
    {"type":"batchnorm1d","num_features":7},
    {"type":"batchnorm2d","num_features":7,"affine":false},
    {"type":"batchnorm1d","num_features":7,"track_running_stats":false},
    {"type":"multihead_attention","embed_dim":8,"num_heads":2},
    {"type":"multihead_attention","embed_dim":8,"num_heads":2,"bias":false},
    {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":12},
    {"type":"transformer_decoder_layer","d_model":8,"nhead":2,"dim_feedforward":12},
    {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":12,"bias":false},
    {"type":"transformer_decoder_layer","d_model":8,"nhead":2,"dim_feedforward":12,"bias":false},
    {"type":"embedding","num_embeddings":9,"embedding_dim":4},
    {"type":"positional_embedding","num_embeddings":9,"embedding_dim":4},
    {"type":"sinusoidal_positional_encoding","embedding_dim":4}])";
  for (const acc::LayerSpec& layer : acc::parse_layer_specs(spec))
    EXPECT_EQ(acc::layer_weight_bytes(layer), built_bytes(layer)) << layer.type << " " << layer.args.dump();
}

TEST(LayerSizes, AModelTheMachineCannotHoldIsRefusedBeforeAllocating) {
  // 8 x 10^12 bytes in two layers of 4 x 10^12: more than any machine running these tests has.
  const std::string huge = R"([{"type":"linear","in_features":1000000,"out_features":1000000,"bias":false},
                               {"type":"linear","in_features":1000000,"out_features":1000000,"bias":false}])";
  try {
    acc::model_from_spec(huge, false);
    FAIL() << "built";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("the model's weights need 8000.0 GB"), std::string::npos) << e.what();
  }
  // With weights pending, the largest layer counts, named.
  try {
    acc::model_from_spec(huge, true);
    FAIL() << "built";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("the weights of layer 0 (linear) need 4000.0 GB"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(acc::model_from_spec(R"([{"type":"linear","in_features":4,"out_features":2}])", false));
}

}  // namespace
