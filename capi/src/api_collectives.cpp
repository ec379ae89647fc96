// Collectives on the accelerator's process group.
#include <functional>

#include "guard.h"
#include "handles.h"

using namespace acc::capi;

namespace {

acc::Collectives& collectives_arg(acc_accelerator* a) { return accelerator_arg(a).collectives(); }

std::string name_arg(const char* name, const char* fallback) { return name ? name : fallback; }

// An object's bytes are copied into one string: a size past what a string holds names the argument.
void require_object_size(size_t size) {
  acc::require(size <= std::string().max_size(), "size ", size, " is larger than any object can be (at most ",
               std::string().max_size(), " bytes)");
}

// A tensor collective's tensor, its output and `more` checks, run so that a process refusing them
// fails the call on every process (Collectives::check_arguments).
const at::Tensor& tensor_call_args(acc::Collectives& c, const std::string& call, const acc_tensor* t, acc_tensor** out,
                                   const std::function<void()>& more = {}) {
  const at::Tensor* x = nullptr;
  c.check_arguments(call, [&] {
    x = &live(t, "t").tensor;
    if (more) more();
    out_param(out, "out");
  });
  return *x;
}

}  // namespace

extern "C" {

acc_status acc_gather(acc_accelerator* a, const acc_tensor* t, const char* name, acc_tensor** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const std::string call = name_arg(name, "gather");
    const at::Tensor& x = tensor_call_args(c, call, t, out);
    emit(out, c.gather(x, call));
  });
}

acc_status acc_gather_for_metrics(acc_accelerator* a, const acc_tensor* t, const char* name, acc_tensor** out) {
  return guarded([&] {
    auto& accelerator = accelerator_arg(a);
    const std::string call = name_arg(name, "gather_for_metrics");
    // Its first collective is a gather of that name.
    const at::Tensor& x = tensor_call_args(accelerator.collectives(), call, t, out);
    emit(out, accelerator.gather_for_metrics(x, call));
  });
}

acc_status acc_gather_object(acc_accelerator* a, const void* data, size_t size, const char* name,
                             acc_string_list** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const std::string call = name_arg(name, "gather_object");
    c.check_arguments(call, [&] {
      acc::require(data || size == 0, "data is NULL but size is ", size);
      require_object_size(size);
      out_param(out, "out");
    });
    const std::string bytes(static_cast<const char*>(data), size);
    emit(out, c.gather_object(bytes, call));
  });
}

acc_status acc_broadcast_object(acc_accelerator* a, const void* data, size_t size, int64_t src, const char* name,
                                acc_string_list** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const bool source = c.rank() == src;
    const std::string call = name_arg(name, "broadcast_object");
    c.check_arguments(call, [&] {
      acc::require(!source || data || size == 0, "data is NULL but size is ", size);
      if (source) require_object_size(size);
      out_param(out, "out");
    });
    const std::string bytes = source ? std::string(static_cast<const char*>(data), size) : std::string();
    emit(out, std::vector<std::string>{c.broadcast_object(bytes, src, call)});
  });
}

acc_status acc_reduce(acc_accelerator* a, const acc_tensor* t, acc_reduction op, const char* name, acc_tensor** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const std::string call = name_arg(name, "reduce");
    acc::Reduction reduction{};
    const at::Tensor& x = tensor_call_args(c, call, t, out, [&] { reduction = reduction_arg(op); });
    emit(out, c.reduce(x, reduction, call));
  });
}

acc_status acc_broadcast(acc_accelerator* a, const acc_tensor* t, int64_t src, const char* name, acc_tensor** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const std::string call = name_arg(name, "broadcast");
    const at::Tensor& x = tensor_call_args(c, call, t, out);
    emit(out, c.broadcast(x, src, call));
  });
}

acc_status acc_pad_across_processes(acc_accelerator* a, const acc_tensor* t, int64_t dim, double value, int pad_first,
                                    const char* name, acc_tensor** out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    const std::string call = name_arg(name, "pad_across_processes");
    const at::Tensor& x = tensor_call_args(c, call, t, out);
    emit(out, c.pad_across_processes(x, dim, value, pad_first != 0, call));
  });
}

acc_status acc_split_between_processes(const acc_accelerator* a, int64_t n, int apply_padding, int64_t* start,
                                       int64_t* end, int64_t* padding) {
  return guarded([&] {
    auto& c = accelerator_arg(a).collectives();
    out_param(start, "start");
    out_param(end, "end");
    out_param(padding, "padding");
    const auto split = c.split_between_processes(n, apply_padding != 0);
    *start = split.start;
    *end = split.end;
    *padding = split.padding;
  });
}

acc_status acc_set_trigger(acc_accelerator* a) {
  return guarded([&] { collectives_arg(a).set_trigger(); });
}

acc_status acc_check_trigger(acc_accelerator* a, int* out) {
  return guarded([&] {
    auto& c = collectives_arg(a);
    int& result = *out_param(out, "out");  // checked before the collective clears the trigger
    result = c.check_trigger("check_trigger") ? 1 : 0;
  });
}

}  // extern "C"
