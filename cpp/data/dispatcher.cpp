#include "data/dispatcher.h"

#include <algorithm>
#include <limits>

#include "common/checked_math.h"
#include "common/error.h"
#include "common/exception_status.h"
#include "common/random.h"
#include "data/map_dataloader.h"

namespace acc {
namespace {

// [what, last or status, the epoch's count, the batch's position, per field: dtype, ndim, sizes...]
constexpr int64_t kFieldsAt = 4;
constexpr int64_t kMaxFields = 8, kMaxDims = 8, kHeader = kFieldsAt + kMaxFields * (2 + kMaxDims);

// What the header's first value says.
constexpr int64_t kBatch = 0, kStop = 1, kFailed = 2;

at::Tensor empty_header() { return at::zeros({kHeader}, at::TensorOptions().dtype(at::kLong)); }

// [kBatch, last, per field: dtype, ndim, sizes...]: what the other processes need to receive a batch;
// [kStop]: the epoch ended.
at::Tensor encode_header(const std::vector<at::Tensor>* batch, bool last) {
  at::Tensor header = empty_header();
  auto* h = header.data_ptr<int64_t>();
  h[0] = batch ? kBatch : kStop;
  h[1] = last ? 1 : 0;
  if (!batch) return header;
  require(static_cast<int64_t>(batch->size()) <= kMaxFields, "dispatch_batches supports up to ", kMaxFields, " fields");
  for (size_t f = 0; f < batch->size(); ++f) {
    const at::Tensor& t = (*batch)[f];
    require(t.dim() <= kMaxDims, "dispatch_batches supports tensors of up to ", kMaxDims, " dimensions");
    int64_t* field = h + kFieldsAt + static_cast<int64_t>(f) * (2 + kMaxDims);
    field[0] = static_cast<int64_t>(t.scalar_type()) + 1;
    field[1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) field[2 + d] = t.size(d);
  }
  return header;
}

// [kFailed, status]: process 0 could not read or send the batch.
at::Tensor failure_header(Status status) {
  at::Tensor header = empty_header();
  header.data_ptr<int64_t>()[0] = kFailed;
  header.data_ptr<int64_t>()[1] = static_cast<int64_t>(status);
  return header;
}

}  // namespace

DispatchingDataLoader::DispatchingDataLoader(std::shared_ptr<DataLoader> base, std::shared_ptr<Distributed> dist,
                                             bool split_batches)
    : DataLoader(base->options()),
      base_(std::move(base)),
      collectives_(std::move(dist)),
      split_(split_batches),
      base_skips_unread_(dynamic_cast<const MapDataLoader*>(base_.get()) != nullptr) {
  base_->serve(*this);  // the base's callbacks (on its workers too) are this loader's
}

int64_t DispatchingDataLoader::length() const {
  const int64_t n = base_->length(), p = collectives_.world_size();
  if (n < 0 || split_) return n;
  return options().drop_last ? n / p : ceil_div(n, p);
}

std::optional<std::vector<at::Tensor>> DispatchingDataLoader::read_global() {
  // One batch with split_batches; else P batches of the base loader, concatenated.
  const int64_t wanted = split_ ? 1 : collectives_.world_size();
  std::vector<std::vector<at::Tensor>> parts;
  while (!base_done_ && static_cast<int64_t>(parts.size()) < wanted) {
    auto batch = base_->next();
    if (!batch) {
      base_done_ = true;
      break;
    }
    parts.push_back(std::move(*batch));
  }
  // With drop_last an incomplete round of P batches is dropped, as the base loader drops a short batch.
  if (parts.empty() || (options().drop_last && static_cast<int64_t>(parts.size()) < wanted)) return std::nullopt;
  std::vector<at::Tensor> global;
  for (size_t f = 0; f < parts[0].size(); ++f) {
    std::vector<at::Tensor> pieces;
    for (const auto& part : parts) pieces.push_back(part[f]);
    global.push_back(at::cat(pieces, 0));
  }
  return global;
}

std::vector<at::Tensor> DispatchingDataLoader::receive(const std::vector<at::Tensor>& mine, bool& stop, bool& last,
                                                       std::exception_ptr failure) {
  const bool root = collectives_.rank() == 0;
  // The header has one size everywhere and describes the tensors that follow: nothing to compare.
  // It names the epoch and batch process 0 sends, which the others check against their own (not
  // announced: a round trip per batch would end process 0's reading ahead).
  at::Tensor header;
  if (root && !failure) {
    try {
      header = encode_header(stop ? nullptr : &mine, last);
    } catch (...) {
      failure = std::current_exception();  // a batch the header cannot describe
    }
  }
  const std::optional<ExceptionReport> report = failure ? std::optional(describe_exception(failure)) : std::nullopt;
  if (report) header = failure_header(report->status);
  if (!header.defined()) header = empty_header();  // received into
  if (root) {                                      // where process 0 is: the epoch's count and the batch's position
    header.data_ptr<int64_t>()[2] = epochs_begun_;
    header.data_ptr<int64_t>()[3] = position_;
  }
  header = collectives_.broadcast(header, 0, "dispatch_batches (header)", Collectives::Layouts::AgreedByCaller);
  const auto* h = header.data_ptr<int64_t>();
  const bool elsewhere = h[2] != epochs_begun_ || h[3] != position_;
  if (h[0] == kFailed) {
    // Every process fails at this batch, at once and in step (the others would otherwise wait for it
    // until the timeout): process 0 with its own error, the others with its status and message.
    const std::string message = collectives_.broadcast_object(report ? report->message : std::string(), 0,
                                                              "dispatch_batches (process 0's error)");
    if (root) std::rethrow_exception(failure);
    fail(static_cast<Status>(h[1]), "process 0, which reads the batches of every process (dispatch_batches), ",
         "could not read the next one: ", message);
  }
  stop = h[0] == kStop;
  last = h[1] != 0;
  std::vector<at::Tensor> batch;
  for (int64_t f = 0; !stop && f < kMaxFields; ++f) {  // (received where the header is elsewhere too: in step)
    const int64_t* field = h + kFieldsAt + f * (2 + kMaxDims);
    if (field[0] == 0) break;
    at::Tensor tensor = root ? mine[static_cast<size_t>(f)]
                             : at::empty(std::vector<int64_t>(field + 2, field + 2 + field[1]),
                                         at::TensorOptions().dtype(static_cast<at::ScalarType>(field[0] - 1)));
    batch.push_back(collectives_.broadcast(tensor, 0, "dispatch_batches", Collectives::Layouts::AgreedByCaller));
  }
  // A process that left an epoch the others go on with (or went on alone) would take another
  // epoch's batches as the rest of its own.
  if (elsewhere)
    fail(Status::InvalidArgument, "dispatch_batches: process 0 sends ",
         h[0] == kStop ? std::string("the end") : concat("batch ", h[3]), " of the loader's epoch ", h[2],
         " while this process reads batch ", position_, " of its epoch ", epochs_begun_,
         " (epochs counted as the loader began them; every process must leave each epoch at the same batch, ",
         "acc_dataloader_end_epoch on all of them)");
  return batch;
}

void DispatchingDataLoader::read_ahead() {
  // The base reads on this thread, drawing from torch's global generator, when it recorded the
  // state of the epoch's first batch (a map-style base without workers, or a stream).
  const bool draws = !first_random_state_.empty();
  // In the skip of a resumed epoch, the global batch the checkpoint had read ahead (position_ + 1:
  // the one after the batch being skipped now) is read under the state it was read under.
  if (resume_next_random_state_.defined() && position_ + 1 == resume_position_)
    set_global_random_state(std::exchange(resume_next_random_state_, at::Tensor()));
  lookahead_random_state_ = draws ? global_random_state() : at::Tensor();
  lookahead_ = read_global();
}

std::optional<std::vector<at::Tensor>> DispatchingDataLoader::fetch_global(bool& last) {
  std::vector<at::Tensor> mine;
  bool stop = false;
  last = false;
  std::exception_ptr failure;  // process 0's read, told to every process
  if (collectives_.rank() == 0) {
    try {
      if (!lookahead_) {
        lookahead_ = read_global();
        // The epoch's first read: the state its first batch was read under (the last pads with it).
        first_random_state_ = base_->first_batch_random_state();
      }
      if (lookahead_) {
        mine = std::move(*lookahead_);
        // As Accelerate's dispatcher, the next global batch is read before this one is handed out: its
        // failure fails this call.
        read_ahead();
        last = !lookahead_.has_value();
      } else {
        stop = true;
      }
    } catch (...) {
      failure = std::current_exception();
    }
  }
  auto batch = receive(mine, stop, last, failure);
  if (stop) return std::nullopt;
  return batch;
}

LoaderState DispatchingDataLoader::state() const {
  LoaderState state = DataLoader::state();
  if (state.position > 0) state.unread_skip = unread_skip_;
  if (collectives_.rank() == 0) {
    // In an epoch, the seed of the base loader's epoch (it may have ended while the last batches
    // are handed out); between epochs, the one a loaded state left pending for the next; none
    // once the epoch is done (the state is the next epoch's start).
    const LoaderState base = base_->state();
    const bool started = in_epoch() && !epoch_done();
    if (!epoch_done()) {
      state.epoch_seed = started ? base_->epoch_seed() : base.epoch_seed;
      state.iterator_seed = started ? base_->iterator_seed() : base.iterator_seed;
    }
    // A loader's own generator: as the epoch found it, or as the next one will.
    state.generator_state = started ? base_->epoch_generator_state() : base.generator_state;
    state.seed = base_->options().seed;
    if (started && lookahead_ && lookahead_random_state_.defined()) {
      state.next_batch_random_state = generator_state_bytes(lookahead_random_state_);
      state.first_batch_random_state = first_random_state_;
    }
  }
  return state;
}

void DispatchingDataLoader::load_state(const LoaderState& state) {
  DataLoader::load_state(state);
  resume_unread_skip_ = state.position > 0 ? std::optional(state.unread_skip) : std::nullopt;
  if (collectives_.rank() == 0) {
    // The base loader reads the epoch again from its start (the skipped batches are read and
    // dropped), so its workers, seeded from the epoch's base seed, draw again what they drew.
    // Its first batch is read under the state it was first read under (the last batch pads with
    // it); the batch read ahead, under its own (read_ahead).
    const bool mid_epoch = state.position > 0;
    LoaderState base;
    base.epoch = state.epoch;
    base.epoch_seed = state.epoch_seed;
    base.seed = state.seed;
    base.generator_state = state.generator_state;
    // At position 0, the state of the batch to read next is the first batch's (see LoaderState).
    if (mid_epoch) base.next_batch_random_state = state.first_batch_random_state;
    base_->load_state(base);
    if (mid_epoch) base_->resume_started_epoch(state.iterator_seed);
    resume_position_ = state.position;
    resume_next_random_state_ = mid_epoch && !state.next_batch_random_state.empty()
                                    ? generator_state_tensor(state.next_batch_random_state)
                                    : at::Tensor();
  }
}

void DispatchingDataLoader::drop_loaded_resume() {
  DataLoader::drop_loaded_resume();
  resume_unread_skip_.reset();
  resume_position_ = 0;
  resume_next_random_state_ = at::Tensor();
  // (process 0's base drops its own when this loader names the epoch to it, at the epoch's start)
}

void DispatchingDataLoader::check_fetch_random_state(const std::vector<uint8_t>& bytes, const std::string& what) const {
  if (collectives_.rank() != 0) return DataLoader::check_fetch_random_state(bytes, what);
  base_->check_fetch_random_state(bytes, what);
}

void DispatchingDataLoader::check_generator_state(const std::vector<uint8_t>& bytes) const {
  if (collectives_.rank() != 0) return DataLoader::check_generator_state(bytes);
  LoaderState probe;
  probe.generator_state = bytes;
  base_->check_state(probe);
}

void DispatchingDataLoader::abandon_epoch() {
  // Every process leaves at the same batch (the loops are the same program): nothing is in flight.
  // Process 0 drops the global batch it read ahead and ends its base loader's epoch.
  lookahead_.reset();
  first_.clear();
  if (collectives_.rank() == 0) base_->end_epoch();
}

void DispatchingDataLoader::take_iterator_draws_of_an_unread_base() {
  const bool resumed = resumes_started_epoch();
  take_iterator_draw();
  // With workers, PyTorch's iterator asks the sampler for its first batches as it is made; a shuffle
  // without a seed or generator of its own then draws its seed from torch's generator, here too.
  const DataLoaderOptions& base = base_->options();
  if (!resumed && base.num_workers > 0 && base.shuffle && !base.seed && !base.generator.defined() &&
      base.batches.empty())
    (void)draw_seed();
}

std::optional<std::vector<at::Tensor>> DispatchingDataLoader::next() {
  refuse_from_callbacks("next");
  if (take_empty_pass()) return std::nullopt;
  if (!in_epoch()) {
    // Every process creates the base loader's iterator (Accelerate, torch >= 2.0.1); on process 0
    // the base loader takes that draw itself when it starts its epoch.
    if (collectives_.rank() == 0)
      base_->set_epoch(epoch());
    else
      take_iterator_draws_of_an_unread_base();
    lookahead_.reset();
    first_.clear();
    remainder_ = -1;
    position_ = 0;
    dispatched_last_ = false;
    base_done_ = false;
    begin_epoch();  // in an epoch whose last batch is still to come
    ++epochs_begun_;
    bool skipped_last = false;
    // A resumed epoch's skip reads its batches again: the first global batch from the state it was
    // first read under, the one read ahead under its own, the others under whatever comes; the
    // state loaded with the checkpoint is put back afterwards.
    const bool resumed = collectives_.rank() == 0 && resume_position_ > 0;
    const at::Tensor resumed_state = resumed ? global_random_state() : at::Tensor();
    int64_t skip = take_skip_batches();
    const std::optional<int64_t> resumed_unread = std::exchange(resume_unread_skip_, std::nullopt);
    unread_skip_ = resumed_unread ? *resumed_unread : base_skips_unread_ ? skip : 0;
    if (unread_skip_ > 0) {
      if (collectives_.rank() == 0) {
        const int64_t per = split_ ? 1 : collectives_.world_size();      // base batches per global batch
        const int64_t most = std::numeric_limits<int64_t>::max() / per;  // past any end either way
        base_->skip_first_batches(std::min(unread_skip_, most) * per);
      }
      position_ = unread_skip_;
      skip -= unread_skip_;
    }
    for (; skip > 0 && !skipped_last; --skip) {
      auto skipped = fetch_global(skipped_last);
      if (!skipped) break;
      ++position_;
      if (first_.empty()) first_ = *skipped;
    }
    resume_next_random_state_ = at::Tensor();
    resume_position_ = 0;
    if (resumed) set_global_random_state(resumed_state);
    dispatched_last_ = skipped_last;  // everything was skipped
  }
  bool last = false;
  auto global = dispatched_last_ ? std::nullopt : fetch_global(last);
  if (!global) {
    epoch_finished();
    return std::nullopt;
  }
  if (first_.empty()) first_ = *global;
  const int64_t p = collectives_.world_size(), observed = (*global)[0].size(0);
  int64_t per = observed / p;
  if (last) remainder_ = observed;
  // The last global batch of an epoch, if it does not divide evenly, is completed with the first
  // P samples of the epoch's first global batch (read after a skip). Where that batch has fewer (the
  // last one itself, after a skip of all the others), they are taken again in turn, so that every
  // process still gets a sample: Accelerate's slices come out empty there.
  if (last && !options().drop_last && observed % p != 0) {
    for (size_t f = 0; f < global->size(); ++f) {
      const at::Tensor rows = at::arange(p, at::TensorOptions().dtype(at::kLong).device(first_[f].device()));
      (*global)[f] = at::cat({(*global)[f], first_[f].index_select(0, rows.remainder(first_[f].size(0)))}, 0);
    }
    ++per;
  }
  std::vector<at::Tensor> slice;
  const int64_t rank = collectives_.rank();
  for (auto& field : *global) {
    const int64_t begin = std::min(rank * per, field.size(0)), end = std::min((rank + 1) * per, field.size(0));
    slice.push_back(field.narrow(0, begin, end - begin));
  }
  ++position_;
  dispatched_last_ = last;
  batch_handed_out(last);
  return to_device(std::move(slice));
}

}  // namespace acc
