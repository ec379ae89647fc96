// Bytes held by live CPU tensors, counted by an allocator placed under libtorch's CPU allocator:
// what a benchmark's parameters, gradients, optimizer state and activations take, without what the
// C library's allocator keeps or what collectives allocate outside ATen.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>

#include "common/compat.h"

namespace {

// libtorch's CPU allocator, counting the bytes of live allocations and their peak.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
#if ACC_TORCH_VERSION >= 203
  c10::DataPtr allocate(size_t n) override { return count(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return count(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_.load(); }

 private:
  struct Held {
    c10::DataPtr inner;
    size_t bytes;
    const CountingAllocator* owner;
  };
  static void release(void* context) {
    auto* held = static_cast<Held*>(context);
    const_cast<CountingAllocator*>(held->owner)->live_ -= static_cast<int64_t>(held->bytes);
    delete held;
  }
  c10::DataPtr count(size_t n) const {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* self = const_cast<CountingAllocator*>(this);
    const int64_t now = self->live_ += static_cast<int64_t>(n);
    int64_t peak = self->peak_;
    while (now > peak && !self->peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, new Held{std::move(inner), n, this}, &release, device};
  }

  c10::Allocator* base_;
  std::atomic<int64_t> live_{0}, peak_{0};
};

// The process's counting allocator, installed on first use (call it before any tensor exists).
CountingAllocator* counting() {
  static CountingAllocator* allocator = [] {
    auto* a = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  return allocator;
}

}  // namespace
