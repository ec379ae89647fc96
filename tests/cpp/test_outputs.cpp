// Flattening of TorchScript forward results into named tensors.
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/script_model.h"

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
