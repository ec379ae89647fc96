// Tensors, tensor lists and losses.
#include <algorithm>

#include "common/device.h"
#include "common/random.h"
#include "guard.h"
#include "handles.h"
#include "tensor/host.h"
#include "tensor/losses.h"
#include "tensor/reshape.h"

using namespace acc::capi;

namespace {

c10::ArrayRef<int64_t> dims_arg(const int64_t* dims, size_t ndim) {
  if (ndim > 0 && !dims) acc::fail(acc::Status::InvalidArgument, "dims is NULL but ndim is ", ndim);
  return c10::ArrayRef<int64_t>(dims, ndim);
}

// The dims of a tensor to create: none negative, and their product within int64.
c10::ArrayRef<int64_t> shape_arg(const int64_t* dims, size_t ndim) {
  auto shape = dims_arg(dims, ndim);
  acc::checked_numel(shape);
  return shape;
}

const at::Tensor& tensor_arg(const acc_tensor* t, const char* name) { return live(t, name).tensor; }

template <typename Op>
acc_status unary(const acc_tensor* t, acc_tensor** out, Op op) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, op(tensor_arg(t, "t")));
  });
}

}  // namespace

extern "C" {

size_t acc_dtype_size(acc_dtype dtype) {
  try {
    return c10::elementSize(to_scalar_type(dtype));
  } catch (...) {
    return 0;
  }
}

acc_status acc_tensor_from_host(const void* data, size_t nbytes, const int64_t* dims, size_t ndim, acc_dtype dtype,
                                acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::tensor_from_host_copy(data, nbytes, dims_arg(dims, ndim), to_scalar_type(dtype)));
  });
}

acc_status acc_tensor_from_host_borrow(void* data, size_t nbytes, const int64_t* dims, size_t ndim, acc_dtype dtype,
                                       acc_deleter deleter, void* ctx, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    std::function<void()> on_release;
    if (deleter) on_release = [deleter, data, ctx] { deleter(data, ctx); };
    emit(out, acc::tensor_from_host_borrow(data, nbytes, dims_arg(dims, ndim), to_scalar_type(dtype),
                                           std::move(on_release)));
  });
}

acc_status acc_tensor_zeros(const int64_t* dims, size_t ndim, acc_dtype dtype, const char* device, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    const auto shape = shape_arg(dims, ndim);
    const c10::Device where = device ? acc::parse_device(device) : c10::Device(c10::kCPU);
    emit(out, at::zeros(shape, at::TensorOptions().dtype(to_scalar_type(dtype)).device(where)));
  });
}

acc_status acc_tensor_rand(const int64_t* dims, size_t ndim, acc_tensor** out) {
  return guarded(
      [&] { emit(out_param(out, "out"), at::rand(shape_arg(dims, ndim), acc::global_cpu_generator(), at::kFloat)); });
}

acc_status acc_tensor_randn(const int64_t* dims, size_t ndim, acc_tensor** out) {
  return guarded(
      [&] { emit(out_param(out, "out"), at::randn(shape_arg(dims, ndim), acc::global_cpu_generator(), at::kFloat)); });
}

acc_status acc_tensor_to_host(const acc_tensor* t, void* dst, size_t nbytes) {
  return guarded([&] { acc::tensor_to_host(tensor_arg(t, "t"), dst, nbytes); });
}

acc_status acc_tensor_ndim(const acc_tensor* t, size_t* out) {
  return guarded([&] { *out_param(out, "out") = static_cast<size_t>(tensor_arg(t, "t").dim()); });
}

acc_status acc_tensor_shape(const acc_tensor* t, int64_t* dims, size_t capacity, size_t* ndim) {
  return guarded([&] {
    const auto sizes = tensor_arg(t, "t").sizes();
    out_param(ndim, "ndim");
    acc::require(dims || capacity == 0, "dims is NULL but capacity is ", capacity);
    for (size_t i = 0; i < sizes.size() && i < capacity; ++i) dims[i] = sizes[i];
    *ndim = sizes.size();
  });
}

acc_status acc_tensor_numel(const acc_tensor* t, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = tensor_arg(t, "t").numel(); });
}

acc_status acc_tensor_dtype(const acc_tensor* t, acc_dtype* out) {
  return guarded([&] { *out_param(out, "out") = from_scalar_type(tensor_arg(t, "t").scalar_type()); });
}

acc_status acc_tensor_device(const acc_tensor* t, char** out) {
  return guarded([&] { *out_param(out, "out") = owned_string(acc::device_name(tensor_arg(t, "t").device())); });
}

acc_status acc_tensor_requires_grad(const acc_tensor* t, int* out) {
  return guarded([&] { *out_param(out, "out") = tensor_arg(t, "t").requires_grad() ? 1 : 0; });
}

acc_status acc_tensor_to(const acc_tensor* t, const char* device, acc_dtype dtype, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    const at::Tensor& src = tensor_arg(t, "t");
    const c10::Device where = device ? acc::parse_device(device) : src.device();
    const at::ScalarType type = enum_int(dtype) == ACC_DTYPE_UNDEFINED ? src.scalar_type() : to_scalar_type(dtype);
    emit(out, src.to(where, type));
  });
}

acc_status acc_tensor_reshape(const acc_tensor* t, const int64_t* dims, size_t ndim, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::checked_reshape(tensor_arg(t, "t"), dims_arg(dims, ndim)));
  });
}

acc_status acc_tensor_grad(const acc_tensor* t, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    const at::Tensor grad = tensor_arg(t, "t").grad();
    if (grad.defined())
      emit(out, grad);
    else
      *out = nullptr;
  });
}

acc_status acc_tensor_backward(const acc_tensor* loss) {
  return guarded([&] {
    const at::Tensor& l = tensor_arg(loss, "loss");
    acc::require_backward_loss(l);
    l.backward();
  });
}

acc_status acc_tensor_sum(const acc_tensor* t, acc_tensor** out) {
  return unary(t, out, [](const at::Tensor& x) { return x.sum(); });
}

acc_status acc_tensor_mean(const acc_tensor* t, acc_tensor** out) {
  return unary(t, out, [](const at::Tensor& x) {
    acc::require(x.is_floating_point(), "mean needs a floating tensor, got ", x.scalar_type());
    return x.mean();
  });
}

acc_status acc_tensor_argmax(const acc_tensor* t, int64_t dim, int keepdim, acc_tensor** out) {
  return unary(t, out, [&](const at::Tensor& x) {
    const int64_t dims = std::max<int64_t>(x.dim(), 1);  // a 0-d tensor takes dim 0 or -1, as in torch
    acc::require(dim >= -dims && dim < dims, "dim ", dim, " is out of range for a tensor of ", x.dim(),
                 " dimension(s)");
    return x.argmax(dim, keepdim != 0);
  });
}

acc_status acc_tensor_count_equal(const acc_tensor* a, const acc_tensor* b, int64_t* out) {
  return guarded([&] {
    const at::Tensor& x = tensor_arg(a, "a");
    const at::Tensor& y = tensor_arg(b, "b");
    out_param(out, "out");
    acc::require(x.sizes() == y.sizes(), "shapes differ: ", x.sizes(), " and ", y.sizes());
    *out = x.eq(y.to(x.device())).sum().item<int64_t>();
  });
}

acc_status acc_tensor_item(const acc_tensor* t, double* out) {
  return guarded([&] {
    const at::Tensor& x = tensor_arg(t, "t");
    out_param(out, "out");
    acc::require(x.numel() == 1, "item needs a tensor with one element, got shape ", x.sizes());
    *out = x.item<double>();
  });
}

acc_status acc_loss_cross_entropy(const acc_tensor* logits, const acc_tensor* target, acc_reduction reduction,
                                  double label_smoothing, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::cross_entropy(tensor_arg(logits, "logits"), tensor_arg(target, "target"),
                                 reduction_arg(reduction), label_smoothing));
  });
}

acc_status acc_loss_nll(const acc_tensor* log_probs, const acc_tensor* target, acc_reduction reduction,
                        acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::nll_loss(tensor_arg(log_probs, "log_probs"), tensor_arg(target, "target"), reduction_arg(reduction)));
  });
}

acc_status acc_loss_mse(const acc_tensor* input, const acc_tensor* target, acc_reduction reduction,
                        acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::mse_loss(tensor_arg(input, "input"), tensor_arg(target, "target"), reduction_arg(reduction)));
  });
}

acc_status acc_loss_l1(const acc_tensor* input, const acc_tensor* target, acc_reduction reduction, acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::l1_loss(tensor_arg(input, "input"), tensor_arg(target, "target"), reduction_arg(reduction)));
  });
}

acc_status acc_loss_smooth_l1(const acc_tensor* input, const acc_tensor* target, acc_reduction reduction, double beta,
                              acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out,
         acc::smooth_l1_loss(tensor_arg(input, "input"), tensor_arg(target, "target"), reduction_arg(reduction), beta));
  });
}

acc_status acc_loss_huber(const acc_tensor* input, const acc_tensor* target, acc_reduction reduction, double delta,
                          acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out,
         acc::huber_loss(tensor_arg(input, "input"), tensor_arg(target, "target"), reduction_arg(reduction), delta));
  });
}

acc_status acc_loss_bce_with_logits(const acc_tensor* logits, const acc_tensor* target, acc_reduction reduction,
                                    acc_tensor** out) {
  return guarded([&] {
    out_param(out, "out");
    emit(out, acc::bce_with_logits(tensor_arg(logits, "logits"), tensor_arg(target, "target"),
                                   reduction_arg(reduction)));
  });
}

void acc_tensor_free(acc_tensor* t) { release(t); }

acc_status acc_tensor_list_create(acc_tensor_list** out) {
  return guarded([&] { emit(out_param(out, "out"), std::vector<std::string>{}, std::vector<at::Tensor>{}); });
}

acc_status acc_tensor_list_append(acc_tensor_list* list, const char* name, const acc_tensor* t) {
  return guarded([&] {
    auto& l = live(list, "list");
    const at::Tensor& x = tensor_arg(t, "t");
    l.names.emplace_back(name ? name : "");
    l.tensors.push_back(x);
  });
}

acc_status acc_tensor_list_size(const acc_tensor_list* list, size_t* out) {
  return guarded([&] { *out_param(out, "out") = live(list, "list").tensors.size(); });
}

acc_status acc_tensor_list_get(const acc_tensor_list* list, size_t index, acc_tensor** out) {
  return guarded([&] {
    const auto& l = live(list, "list");
    out_param(out, "out");
    acc::require(index < l.tensors.size(), "index ", index, " is out of range (the list has ", l.tensors.size(),
                 " tensors)");
    emit(out, l.tensors[index]);
  });
}

acc_status acc_tensor_list_name(const acc_tensor_list* list, size_t index, const char** out) {
  return guarded([&] {
    const auto& l = live(list, "list");
    out_param(out, "out");
    acc::require(index < l.names.size(), "index ", index, " is out of range (the list has ", l.names.size(),
                 " tensors)");
    *out = l.names[index].c_str();
  });
}

acc_status acc_tensor_list_find(const acc_tensor_list* list, const char* name, acc_tensor** out) {
  return guarded([&] {
    const auto& l = live(list, "list");
    const std::string key = text_arg(name, "name");
    out_param(out, "out");
    for (size_t i = 0; i < l.names.size(); ++i)
      if (l.names[i] == key) return emit(out, l.tensors[i]);
    std::string names;
    for (const auto& n : l.names) names += (names.empty() ? "'" : ", '") + n + "'";
    acc::fail(acc::Status::InvalidArgument, "no tensor named '", key, "' in the list (names: ", names, ")");
  });
}

void acc_tensor_list_free(acc_tensor_list* list) { release(list); }

}  // extern "C"
