// Gradient clipping against PyTorch's own clip_grad_norm_ (tests/data/export_clip_cases.py), bit
// for bit: the same norms in the same dtype and order, the same coefficient, applied even when 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "optim/clip_grad.h"

namespace {

at::Tensor from_hex(const nlohmann::json& values, const std::vector<int64_t>& shape) {
  std::vector<float> v;
  for (const auto& text : values) v.push_back(static_cast<float>(std::strtod(text.get<std::string>().c_str(), nullptr)));
  return at::tensor(v, at::kFloat).reshape(shape);
}

double hex(const nlohmann::json& text) { return std::strtod(text.get<std::string>().c_str(), nullptr); }

}  // namespace

TEST(ClipGradNorm, EqualsPyTorchsBitForBit) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  ASSERT_NE(dir, nullptr);
  std::ifstream in(std::string(dir) + "/clip_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_clip_cases fixture";
  const auto data = nlohmann::json::parse(in);
  ASSERT_EQ(data["cases"].size(), 48u);  // 12 of them torch's edge values (max_norm inf or 0, norm types <= 0)
  for (const auto& c : data["cases"]) {
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < c["shapes"].size(); ++i)
      grads.push_back(from_hex(c["grads"][i], c["shapes"][i].get<std::vector<int64_t>>()));
    const double norm_type = hex(c["norm_type"]), max_norm = hex(c["max_norm"]);
    const double total = acc::clip_grad_norm(grads, max_norm, norm_type);
    const std::string which = "norm_type " + std::to_string(norm_type) + ", max_norm " + std::to_string(max_norm);
    EXPECT_EQ(total, hex(c["total_norm"])) << which;
    for (size_t i = 0; i < grads.size(); ++i) {
      const at::Tensor expected = from_hex(c["clipped"][i], grads[i].sizes().vec());
      EXPECT_TRUE(at::equal(grads[i], expected))
          << which << ", gradient " << i << ": largest difference "
          << (grads[i] - expected).abs().max().item<double>();
    }
  }
}

TEST(ClipGradValue, ABoundPastTheDtypesLargestValueClipsNothing) {
  // ATen refuses to turn 1e308 into a float or 1e5 into a half; as a bound they clip nothing.
  for (const auto& [dtype, bound] : {std::pair{at::kFloat, 1e308}, {at::kBFloat16, 1e308}, {at::kHalf, 1e5}}) {
    const at::Tensor g = (at::arange(-4, 4, at::kFloat) * 1000).to(dtype);
    const at::Tensor before = g.clone();
    acc::clip_grad_value({g}, bound);
    EXPECT_TRUE(at::equal(g, before)) << dtype;
  }
  const at::Tensor g = at::arange(-4, 4, at::kFloat);
  acc::clip_grad_value({g}, 2.5);
  EXPECT_EQ(g.max().item<float>(), 2.5f);
  EXPECT_EQ(g.min().item<float>(), -2.5f);
}
