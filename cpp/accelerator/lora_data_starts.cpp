#include "accelerator/lora_data_starts.h"

#include <c10/util/ScopeExit.h>

#include <utility>

#include "common/error.h"

namespace acc {
namespace {

void require_between_epochs(const DataLoader& loader, const char* method) {
  require(!loader.in_epoch(), method, ": the data loader is in an epoch; end it first (acc_dataloader_end_epoch)");
}

}  // namespace

size_t initialize_lora_eva(Model& model, DataLoader& loader, const EvaReading& reading, Accelerator* accelerator) {
  require_between_epochs(loader, "EVA");
  const EvaSource source{[&] { return loader.next(); }, [&] { loader.end_epoch(); }, loader.length()};
  std::function<at::Tensor(const at::Tensor&)> gather_rows = [](const at::Tensor& rows) { return rows; };
  if (accelerator && reading.gather_distributed_inputs && accelerator->collectives().world_size() > 1)
    gather_rows = [accelerator](const at::Tensor& rows) {
      return accelerator->collectives().gather_rows(rows, "EVA's layer inputs");
    };
  return model.initialize_lora_eva(source, reading, gather_rows);
}

size_t add_lora_corda(Model& model, LoraConfig config, DataLoader& loader, int64_t inputs) {
  require_between_epochs(loader, "CorDA");
  const auto end_epoch = c10::make_scope_exit([&] { loader.end_epoch(); });  // a failure leaves it between epochs
  return model.add_lora_corda(std::move(config), [&] { return loader.next(); }, inputs);
}

}  // namespace acc
