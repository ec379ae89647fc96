#include "model/rms_norm.h"

#include "common/error.h"

namespace acc {
namespace {

// torch.finfo(dtype).eps, PyTorch's default eps for RMSNorm.
double machine_epsilon(at::ScalarType type) {
  switch (type) {
    case at::kDouble: return 2.220446049250313e-16;
    case at::kHalf: return 0.0009765625;
    case at::kBFloat16: return 0.0078125;
    default: return 1.1920928955078125e-07;
  }
}

std::string shape_list(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (int64_t v : shape) out += (out.size() > 1 ? ", " : "") + std::to_string(v);
  return out + "]";
}

}  // namespace

RMSNormImpl::RMSNormImpl(std::vector<int64_t> shape, std::optional<double> eps_, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (elementwise_affine) weight = register_parameter("weight", torch::ones(normalized_shape));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  require(x.dim() >= n && x.sizes().slice(static_cast<size_t>(x.dim() - n)) == at::IntArrayRef(normalized_shape),
          "rmsnorm: input of shape ", x.sizes(), " does not end with normalized_shape ", shape_list(normalized_shape));
  require(x.is_floating_point(), "rmsnorm: expected a floating input, got ", x.scalar_type());
  std::vector<int64_t> dims;
  for (int64_t i = 1; i <= n; ++i) dims.push_back(-i);
  const double e = eps ? *eps : machine_epsilon(x.scalar_type());
  at::Tensor y = x * at::rsqrt(x.pow(2).mean(dims, /*keepdim=*/true) + e);
  return weight.defined() ? y * weight : y;
}

LayerKind rmsnorm_kind() {
  return {{{"normalized_shape", Arg::IntList, nullptr},
           {"eps", Arg::OptionalFloat, nullptr},
           {"elementwise_affine", Arg::Bool, true}},
          [](const nlohmann::json& a) {
            std::optional<double> eps;
            if (!a["eps"].is_null()) eps = a["eps"].get<double>();
            return torch::nn::AnyModule(
                RMSNorm(a["normalized_shape"].get<std::vector<int64_t>>(), eps, a["elementwise_affine"].get<bool>()));
          },
          [](const nlohmann::json& a) {
            const auto shape = a["normalized_shape"].get<std::vector<int64_t>>();
            std::vector<int64_t> dims;
            for (size_t i = 1; i <= shape.size(); ++i) dims.push_back(-static_cast<int64_t>(i));
            std::vector<std::string> lines;
            if (a["eps"].is_null()) {
              // A dtype is its ScalarType number in TorchScript (torch.float64 does not resolve in
              // a module defined from C++): 7 double, 5 half, 15 bfloat16.
              lines = {"eps = 1.1920928955078125e-07",
                       "if x.dtype == 7:\n        eps = 2.220446049250313e-16",
                       "elif x.dtype == 5:\n        eps = 0.0009765625",
                       "elif x.dtype == 15:\n        eps = 0.0078125"};
            } else {
              lines = {"eps = " + script_float(a["eps"])};
            }
            lines.push_back("y = x * torch.rsqrt(x.pow(2).mean(" + shape_list(dims) + ", keepdim=True) + eps)");
            lines.push_back(a["elementwise_affine"].get<bool>() ? "return y * self.weight" : "return y");
            return script_lines(lines);
          }};
}

}  // namespace acc
