// Told about every batch a loader hands out (the Accelerator's gradient state listens, to know the
// end of the data loader).
#pragma once

namespace acc {

class DataLoader;

class LoaderObserver {
 public:
  virtual ~LoaderObserver() = default;
  virtual void on_batch(const DataLoader& loader, bool last_of_epoch) = 0;
  // The epoch ended (or was ended early), or the loader went away in the middle of one.
  virtual void on_epoch_end(const DataLoader& loader) = 0;
};

}  // namespace acc
