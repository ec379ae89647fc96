// safetensors' complex64 (C64): written and read as the reference implementation does, laid out by
// its dtype order (F64, C64, F32, ...: largest first, then by name). It was refused both ways (a
// hunt's finding: a model with a complex buffer could not be saved).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "checkpoint/safetensors.h"

namespace {

TEST(SafetensorsDtypes, ComplexTensorsRoundTripInTheReferenceOrder) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("acc_c64_" + std::to_string(::getpid()) + ".safetensors")).string();
  const at::Tensor f32 = at::arange(3, at::kFloat), f64 = at::arange(2, at::kDouble);
  const at::Tensor c64 = at::complex(at::arange(4, at::kFloat), at::arange(4, at::kFloat) * -1).reshape({2, 2});
  acc::save_safetensors(path, {{"a", f32}, {"b", c64}, {"c", f64}});
  const acc::SafetensorsContents read = acc::load_safetensors(path);
  ASSERT_EQ(read.tensors.size(), 3u);
  EXPECT_EQ(read.tensors[0].first, "c");  // F64
  EXPECT_EQ(read.tensors[1].first, "b");  // C64
  EXPECT_EQ(read.tensors[2].first, "a");  // F32
  EXPECT_EQ(read.tensors[1].second.scalar_type(), at::kComplexFloat);
  EXPECT_TRUE(at::equal(read.tensors[1].second, c64));
  EXPECT_TRUE(at::equal(read.tensors[0].second, f64));
  std::filesystem::remove(path);
}

}  // namespace
