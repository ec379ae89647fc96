// Accelerate's collectives over the job's process group. On one process (no group) each is the
// identity, as in Accelerate. Every collective takes a name that errors (and debug mode) report.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "state/distributed.h"
#include "tensor/reduction.h"

namespace acc {

struct ProcessSplit {
  int64_t start = 0;    // [start, end) of the items this process takes
  int64_t end = 0;
  int64_t padding = 0;  // copies of the last item to append for equal lengths (apply_padding)
};

class Collectives {
 public:
  // dist: null on one process.
  explicit Collectives(std::shared_ptr<Distributed> dist) : dist_(std::move(dist)) {}

  int64_t rank() const { return dist_ ? dist_->rank() : 0; }
  int64_t world_size() const { return dist_ ? dist_->world_size() : 1; }

  void barrier(const std::string& name);
  // Whether gather, reduce and broadcast first announce the call (below: one small allgather that
  // also compares every process's shape and dtype), or the caller's own code keeps the processes in
  // step (internal sequences of collectives).
  enum class Layouts { Compared, AgreedByCaller };
  // Every process's tensor (same shape on all), concatenated on dim 0; 0-dim tensors count as [1].
  at::Tensor gather(const at::Tensor& tensor, const std::string& name, Layouts layouts = Layouts::Compared);
  // Every process's bytes, in rank order.
  std::vector<std::string> gather_object(const std::string& bytes, const std::string& name);
  // Process `src`'s bytes, on every process (the others' `bytes` are not read): Accelerate's
  // broadcast_object_list for what a host language serialised.
  std::string broadcast_object(const std::string& bytes, int64_t src, const std::string& name);
  // Runs `step` on every process, then every process fails alike if any failed: with the status of
  // the first process that failed and every failing process's message ("<what> failed: process 1:
  // ..."). A collective, so that no process waits for a peer that gave up. `name`: the collective's
  // name (default `what`), for a `what` that may differ between processes (a path each one names).
  void agree(const std::string& what, const std::function<void()>& step, const std::string& name = "");
  // Every process's `text` compared line by line with process 0's: the first `most` differences of
  // each process, as "process 0 has A, process r B" ("nothing" past the shorter text), joined by
  // "; "; empty when every process holds the same. A collective: every process gets the same answer.
  std::string differences_from_process_0(const std::string& text, const std::string& name, size_t most);
  // Sum or mean over processes; Reduction::None returns the input unchanged (as documented; Accelerate
  // itself sums there).
  at::Tensor reduce(const at::Tensor& tensor, Reduction op, const std::string& name,
                    Layouts layouts = Layouts::Compared);
  // Process `src`'s tensor, on every process (a new tensor; the input is not changed).
  at::Tensor broadcast(const at::Tensor& tensor, int64_t src, const std::string& name,
                       Layouts layouts = Layouts::Compared);
  // Pads `dim` to the largest size across processes with `value`, at the end or (pad_first) the start.
  at::Tensor pad_across_processes(const at::Tensor& tensor, int64_t dim, double value, bool pad_first,
                                  const std::string& name);
  // Every process's rows (dim 0, whose counts may differ), concatenated in rank order: padded to
  // the longest, gathered, the padding cut off (PEFT's gather_layer_inputs).
  at::Tensor gather_rows(const at::Tensor& rows, const std::string& name);
  // This process's share of n items (Accelerate's split_between_processes).
  ProcessSplit split_between_processes(int64_t n, bool apply_padding) const;

  // Runs a public collective's argument checks. Where they fail in a job of several processes, this
  // process still announces the call (as one it refuses) before rethrowing, so every other process
  // fails at the same call, naming it, and none pairs it with its next collective.
  void check_arguments(const std::string& name, const std::function<void()>& checks);

  // A flag any process can raise; check_trigger tells every process whether one did, and lowers it.
  void set_trigger() { trigger_ = true; }
  bool check_trigger(const std::string& name);

 private:
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& name);
  std::vector<at::Tensor> all_gather_on(c10d::ProcessGroup& group, const at::Tensor& tensor, const std::string& name);
  // What a collective's tensor is, as the processes compare it; -1 where a call has no tensor.
  struct Layout {
    int64_t dims = -1;
    std::vector<int64_t> shape;  // the first kMaxComparedDims sizes
    int64_t numel = -1;
    int64_t dtype = -1;  // c10::ScalarType
    int64_t sizes_hash = 0;  // of every size: tells apart shapes that differ past the first ones
    static Layout of(const at::Tensor& tensor);
    static Layout of_bytes(size_t count);  // an object's bytes, as a 1-D byte tensor (none allocated)
    bool operator==(const Layout& o) const {
      return dims == o.dims && shape == o.shape && numel == o.numel && dtype == o.dtype && sizes_hash == o.sizes_hash;
    }
  };
  // Each public collective starts by announcing itself: one allgather of a fixed size holding the
  // call's name (hashed), kind, parameter (reduction, source or padded dim) and layout. Any two
  // announcements meet without Gloo overrunning a buffer (which aborts the process from its own
  // thread), so a process in another collective, with another reduction, source or name (a skipped
  // call), is an error on every process naming both; with `same_layout`, so is another shape or
  // dtype. Returns every process's layout (gather_object's byte counts among them).
  enum class CallKind : int64_t { Barrier = 1, Gather, GatherObject, BroadcastObject, Reduce, Broadcast, Pad, Refused };
  std::vector<Layout> announce(CallKind kind, int64_t parameter, const Layout& layout, bool same_layout,
                               const std::string& name);
  // An announced call as its messages name it ("reduce (mean)").
  static const char* call_name(int64_t kind, int64_t parameter);

  std::shared_ptr<Distributed> dist_;
  bool trigger_ = false;
};

}  // namespace acc
