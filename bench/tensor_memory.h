// Bytes held by live CPU tensors, counted by an allocator placed under libtorch's CPU allocator:
// what a benchmark's parameters, gradients, optimizer state and activations take, without what the
// C library's allocator keeps or what collectives allocate outside ATen.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/compat.h"

namespace {

// libtorch's CPU allocator, counting the bytes of live allocations and their peak. Each allocation's
// context is its data pointer, as Allocator::raw_allocate requires (oneDNN's scratch memory under
// CPU convolutions comes through it), and the base allocation is found by that pointer.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) { instance() = this; }
#if ACC_TORCH_VERSION >= 203
  c10::DataPtr allocate(size_t n) override { return count(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return count(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_.load(); }

 private:
  struct Held {
    c10::DataPtr inner;
    size_t bytes;
  };
  static CountingAllocator*& instance() {
    static CountingAllocator* allocator = nullptr;
    return allocator;
  }
  static void release(void* data) {
    if (!data) return;  // oneDNN frees null scratch buffers through raw_deleter
    CountingAllocator* self = instance();
    c10::DataPtr inner;  // freed after the lock is let go
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->held_.find(data);
      self->live_ -= static_cast<int64_t>(it->second.bytes);
      inner = std::move(it->second.inner);
      self->held_.erase(it);
    }
  }
  c10::DataPtr count(size_t n) const {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (!data) return inner;  // nothing held (n == 0)
    const c10::Device device = inner.device();
    auto* self = const_cast<CountingAllocator*>(this);
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->held_.emplace(data, Held{std::move(inner), n});
    }
    const int64_t now = self->live_ += static_cast<int64_t>(n);
    int64_t peak = self->peak_;
    while (now > peak && !self->peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, device};
  }

  c10::Allocator* base_;
  std::atomic<int64_t> live_{0}, peak_{0};
  std::mutex mutex_;
  std::unordered_map<void*, Held> held_;
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
