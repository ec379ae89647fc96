#include "tensor/storage.h"

#include <c10/core/DeviceGuard.h>

#include "common/error.h"

namespace acc {

void free_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr(at::DataPtr(nullptr, t.device()));  // the old block is freed here
  storage->set_nbytes(0);
}

void restore_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.storage_offset() + t.numel()) * t.element_size();
  if (storage->nbytes() >= bytes) return;
  // The CUDA caching allocator allocates on the calling thread's current device, which a binding's
  // thread (Go, the JVM, .NET) need not have set to this tensor's.
  const c10::DeviceGuard on_its_device(t.device());
  storage->set_data_ptr(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

void take_storage(const at::Tensor& t, const at::Tensor& from) {
  require(from.is_contiguous() && t.is_contiguous() && from.storage_offset() == 0 && t.storage_offset() == 0 &&
              from.sizes() == t.sizes() && from.scalar_type() == t.scalar_type() && from.device() == t.device(),
          "take_storage: the tensors are not laid out alike");
  c10::StorageImpl* source = from.storage().unsafeGetStorageImpl();
  c10::StorageImpl* target = t.storage().unsafeGetStorageImpl();
  const size_t bytes = source->nbytes();
  target->set_data_ptr(source->set_data_ptr(at::DataPtr(nullptr, from.device())));
  target->set_nbytes(bytes);
  source->set_nbytes(0);
}

}  // namespace acc
