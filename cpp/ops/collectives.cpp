#include "ops/collectives.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/exception_status.h"

namespace acc {
namespace {

constexpr int64_t kMaxDims = 16;  // sizes compared one by one; beyond them, the element count
constexpr int64_t kNoDimension = INT64_MIN;  // announced by a process whose pad names no dimension

// Gloo on libtorch 1.13 has no bool: booleans travel as bytes (0 or 1), and come back as bool. A sum
// of them is then a logical or, as torch's allreduce of bool tensors.
at::Tensor on_the_wire(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kBool ? tensor.to(at::kByte) : tensor;
}
at::Tensor off_the_wire(const at::Tensor& received, at::ScalarType dtype) {
  return dtype == at::kBool ? received.ne(0) : received;
}

}  // namespace

std::vector<at::Tensor> Collectives::all_gather(const at::Tensor& tensor, const std::string& name) {
  return all_gather_on(*dist_->group(), tensor, name);
}

std::vector<at::Tensor> Collectives::all_gather_on(c10d::ProcessGroup& group, const at::Tensor& tensor,
                                                   const std::string& name) {
  if (tensor.numel() == 0) {
    // Gloo divides by the element count: take part with one placeholder element, return empties.
    all_gather_on(group, at::zeros({1}, tensor.options()), name);
    return std::vector<at::Tensor>(static_cast<size_t>(world_size()), tensor.clone());
  }
  at::Tensor input = on_the_wire(tensor.detach().to(dist_->device())).contiguous();
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int64_t r = 0; r < world_size(); ++r) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  wait_collective(group.allgather(outputs, inputs), name);
  for (auto& t : outputs[0]) t = off_the_wire(t, tensor.scalar_type()).to(tensor.device());
  return outputs[0];
}

namespace {

constexpr int64_t kCallMagic = 0x61636331;  // "acc1": an announcement of this library's

// FNV-1a: the same on every machine (std::hash need not be), as a signed 64-bit value.
constexpr uint64_t kFnvBasis = 14695981039346656037ull;
uint64_t fnv1a(uint64_t h, uint8_t byte) { return (h ^ byte) * 1099511628211ull; }
int64_t name_hash(const std::string& name) {
  uint64_t h = kFnvBasis;
  for (const unsigned char ch : name) h = fnv1a(h, ch);
  return static_cast<int64_t>(h);
}
int64_t hash_of_sizes(c10::IntArrayRef sizes) {  // each size's bytes, least significant first
  uint64_t h = kFnvBasis;
  for (const int64_t size : sizes)
    for (int byte = 0; byte < 8; ++byte) h = fnv1a(h, static_cast<uint8_t>(static_cast<uint64_t>(size) >> (8 * byte)));
  return static_cast<int64_t>(h);
}

}  // namespace

Collectives::Layout Collectives::Layout::of(const at::Tensor& tensor) {
  return {tensor.dim(), tensor.sizes().slice(0, std::min(tensor.dim(), kMaxDims)).vec(), tensor.numel(),
          static_cast<int64_t>(tensor.scalar_type()), hash_of_sizes(tensor.sizes())};
}

Collectives::Layout Collectives::Layout::of_bytes(size_t count) {
  const auto n = static_cast<int64_t>(count);
  return {1, {n}, n, static_cast<int64_t>(at::kByte), hash_of_sizes({n})};
}

const char* Collectives::call_name(int64_t kind, int64_t parameter) {
  using Kind = CallKind;
  switch (static_cast<Kind>(kind)) {
    case Kind::Barrier:
      return "barrier";
    case Kind::Gather:
      return "gather";
    case Kind::GatherObject:
      return "gather_object";
    case Kind::BroadcastObject:
      return "broadcast_object";
    case Kind::Reduce:
      return parameter == static_cast<int64_t>(Reduction::Mean)   ? "reduce (mean)"
             : parameter == static_cast<int64_t>(Reduction::None) ? "reduce (none)"
                                                                  : "reduce (sum)";
    case Kind::Broadcast:
      return "broadcast";
    case Kind::Pad:
      return "pad_across_processes";
    case Kind::Refused:
      return "a collective it refused";
  }
  return "an unknown collective";
}

std::vector<Collectives::Layout> Collectives::announce(CallKind kind, int64_t parameter, const Layout& layout,
                                                       bool same_layout, const std::string& name) {
  // [magic, name's hash, kind, parameter, dims, size 0, ..., size kMaxDims - 1, element count, dtype,
  //  hash of every size]
  at::Tensor call = at::full({kMaxDims + 8}, -1, at::TensorOptions().dtype(at::kLong));
  int64_t* c = call.data_ptr<int64_t>();
  c[0] = kCallMagic;
  c[1] = name_hash(name);
  c[2] = static_cast<int64_t>(kind);
  c[3] = parameter;
  c[4] = layout.dims;
  std::copy(layout.shape.begin(), layout.shape.end(), c + 5);
  c[kMaxDims + 5] = layout.numel;
  c[kMaxDims + 6] = layout.dtype;
  c[kMaxDims + 7] = layout.sizes_hash;
  const auto calls = all_gather_on(*dist_->announcement_group(), call, name + " (the call)");
  std::vector<Layout> layouts;
  for (const auto& l : calls) {
    const int64_t* v = l.data_ptr<int64_t>();
    const int64_t dims = std::max<int64_t>(v[4], 0);
    layouts.push_back({v[4], std::vector<int64_t>(v + 5, v + 5 + std::min(dims, kMaxDims)), v[kMaxDims + 5],
                       v[kMaxDims + 6], v[kMaxDims + 7]});
  }
  const std::string mine = concat("collective '", name, "' (", call_name(c[2], c[3]), ")");
  for (size_t r = 0; r < calls.size(); ++r) {
    const int64_t* v = calls[r].data_ptr<int64_t>();
    require(v[0] == kCallMagic, mine, ": process ", r, " sent something other than an announcement");
    require(v[2] != static_cast<int64_t>(CallKind::Refused) || kind == CallKind::Refused, mine, ": process ", r,
            " refused its arguments to this call (its own error says why)");
    const bool broadcasts = kind == CallKind::Broadcast || kind == CallKind::BroadcastObject;
    require(!(broadcasts && v[2] == c[2] && v[3] != c[3]), mine, ": process ", r, " broadcasts from process ", v[3],
            ", this one from process ", c[3], " (every process must name the same source)");
    if (kind == CallKind::Pad && v[2] == c[2] && v[3] != c[3]) {
      auto pads = [](int64_t dim) {
        return dim == kNoDimension ? std::string("no dimension") : concat("dimension ", dim);
      };
      fail(Status::InvalidArgument, mine, ": process ", r, " pads ", pads(v[3]), ", this one ", pads(c[3]),
           " (every process must pad the same dimension of a tensor with as many dimensions)");
    }
    require(v[2] == c[2] && v[3] == c[3], mine, ": process ", r, " calls ", call_name(v[2], v[3]),
            " at the same point (every process must make the same collective calls in the same order)");
    require(v[1] == c[1], mine, ": process ", r, " calls a ", call_name(v[2], v[3]), " named otherwise at the same ",
            "point (a process skipped or added a collective: every process must make the same calls, with the same ",
            "names, in the same order)");
  }
  if (!same_layout) return layouts;
  const bool same = std::all_of(layouts.begin(), layouts.end(), [&](const Layout& l) { return l == layouts[0]; });
  if (same) return layouts;
  std::string detail;
  for (size_t r = 0; r < layouts.size(); ++r)
    detail += concat(r ? ", " : "", "rank ", r, " ", c10::IntArrayRef(layouts[r].shape),
                     layouts[r].dims > kMaxDims ? concat(" (", layouts[r].dims, " dims, ", layouts[r].numel, " elements)")
                                                : std::string(),
                     " ", static_cast<c10::ScalarType>(layouts[r].dtype));
  fail(Status::InvalidArgument, "collective '", name, "' needs the same shape and dtype on every process, got ", detail,
       " (pad_across_processes evens out a dimension)");
}

void Collectives::check_arguments(const std::string& name, const std::function<void()>& checks) {
  try {
    checks();
  } catch (...) {
    if (dist_) {
      try {
        announce(CallKind::Refused, 0, Layout(), false, name);
      } catch (...) {  // the others made the call: they fail at it; this process reports its own error
      }
    }
    throw;
  }
}

void Collectives::barrier(const std::string& name) {
  if (!dist_) return;
  announce(CallKind::Barrier, 0, Layout(), false, name);
  // NCCL's barrier is an allreduce on a GPU: this process's, not the calling thread's current one or
  // the rank-modulo-GPUs guess ProcessGroupNCCL falls back on.
  c10d::BarrierOptions options;
  if (dist_->device().is_cuda()) options.device_ids = {dist_->device().index()};
  wait_collective(dist_->group()->barrier(options), name);
}

at::Tensor Collectives::gather(const at::Tensor& tensor, const std::string& name, Layouts layouts) {
  if (!dist_) return tensor.clone();  // as Accelerate's, a 0-d tensor stays one
  at::Tensor input = tensor.dim() == 0 ? tensor.unsqueeze(0) : tensor;
  if (layouts == Layouts::Compared) announce(CallKind::Gather, 0, Layout::of(input), true, name);
  return at::cat(all_gather(input, name), 0);
}

std::vector<std::string> Collectives::gather_object(const std::string& bytes, const std::string& name) {
  if (!dist_) return {bytes};
  std::vector<int64_t> lengths;  // the byte counts travel in the announcement
  for (const Layout& l : announce(CallKind::GatherObject, 0, Layout::of_bytes(bytes.size()), false, name))
    lengths.push_back(l.numel);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  at::Tensor buffer = at::zeros({std::max<int64_t>(longest, 1)}, at::TensorOptions().dtype(at::kByte));
  std::copy(bytes.begin(), bytes.end(), buffer.data_ptr<uint8_t>());
  std::vector<std::string> out;
  const auto gathered = all_gather(buffer, name);
  for (size_t r = 0; r < gathered.size(); ++r) {
    const auto* data = reinterpret_cast<const char*>(gathered[r].data_ptr<uint8_t>());
    out.emplace_back(data, static_cast<size_t>(lengths[r]));
  }
  return out;
}

void Collectives::agree(const std::string& what, const std::function<void()>& step, const std::string& name) {
  std::string failure;
  Status status = Status::Ok;
  try {
    step();
  } catch (...) {  // as the C API would report it on one process
    ExceptionReport report = describe_current_exception();
    failure = std::move(report.message);
    status = report.status;
  }
  // A step whose own collective lost a peer (timed out, or the peer went away) fails with that error
  // at once: sharing the outcome would wait a second timeout for the same peer, and report that wait
  // instead of the collective that failed. Every process that waited on the peer fails alike; one
  // whose step completed times out in the outcome's gather below.
  if (!dist_ || status == Status::Timeout || status == Status::Aborted) {
    if (status != Status::Ok) fail(status, failure);
    return;
  }
  // Each process sends its status code (one byte) and message.
  const auto outcomes = gather_object(std::string(1, static_cast<char>(status)) + failure, name.empty() ? what : name);
  std::string message;
  Status first = Status::Ok;
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    const auto code = static_cast<Status>(outcomes[rank].empty() ? 0 : outcomes[rank][0]);
    if (code == Status::Ok) continue;
    if (first == Status::Ok) first = code;
    message += concat(message.empty() ? "" : "; ", "process ", rank, ": ", outcomes[rank].substr(1));
  }
  if (first != Status::Ok) fail(first, what, " failed: ", message);
}

std::string Collectives::differences_from_process_0(const std::string& text, const std::string& name, size_t most) {
  const auto all = gather_object(text, name);
  const auto lines = [](const std::string& t) {
    std::vector<std::string> out;
    std::istringstream in(t);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const std::vector<std::string> first = lines(all[0]);
  std::string differences;
  for (size_t rank = 1; rank < all.size(); ++rank) {
    if (all[rank] == all[0]) continue;
    const std::vector<std::string> other = lines(all[rank]);
    size_t found = 0;
    for (size_t i = 0; i < std::max(first.size(), other.size()) && found < most; ++i) {
      const std::string a = i < first.size() ? first[i] : "nothing", b = i < other.size() ? other[i] : "nothing";
      if (a == b) continue;
      differences += concat(differences.empty() ? "" : "; ", "process 0 has ", a, ", process ", rank, " ", b);
      ++found;
    }
  }
  return differences;
}

at::Tensor Collectives::reduce(const at::Tensor& tensor, Reduction op, const std::string& name, Layouts layouts) {
  if (!dist_) return tensor.clone();
  // Announced with None too: a process reducing with None where the others sum fails with them.
  if (layouts == Layouts::Compared)
    announce(CallKind::Reduce, static_cast<int64_t>(op), Layout::of(tensor), true, name);
  if (op == Reduction::None) return tensor.clone();
  if (tensor.numel() == 0) {  // as in all_gather: Gloo cannot take empty tensors
    reduce(at::zeros({1}, tensor.options()), op, name, Layouts::AgreedByCaller);
    return tensor.clone();
  }
  // One copy onto the collective device (a new tensor: the input is never overwritten).
  at::Tensor buffer =
      on_the_wire(tensor.detach().to(dist_->device(), tensor.scalar_type(), /*non_blocking=*/false, /*copy=*/true));
  std::vector<at::Tensor> tensors{buffer};
  wait_collective(dist_->group()->allreduce(tensors), name);
  if (op == Reduction::Mean) {
    require(buffer.is_floating_point(), "collective '", name, "': a mean needs a floating tensor");
    buffer.div_(static_cast<double>(world_size()));
  }
  return off_the_wire(buffer, tensor.scalar_type()).to(tensor.device());
}

namespace {
void require_source(int64_t src, int64_t world_size, const std::string& name) {
  require(src >= 0 && src < world_size, "collective '", name, "': source process ", src, " is not in a job of ",
          world_size);
}
}  // namespace

std::string Collectives::broadcast_object(const std::string& bytes, int64_t src, const std::string& name) {
  if (!dist_) {
    require_source(src, world_size(), name);
    return bytes;
  }
  const bool mine = rank() == src;
  // The source's byte count travels in the announcement; the source is announced before it is
  // checked, so that a process naming another fails with the rest at this call.
  const Layout sent = Layout::of_bytes(mine ? bytes.size() : 0);
  const auto layouts = announce(CallKind::BroadcastObject, src, sent, false, name);
  require_source(src, world_size(), name);
  const int64_t size = layouts[static_cast<size_t>(src)].numel;
  if (size == 0) return {};
  at::Tensor buffer = at::empty({size}, at::TensorOptions().dtype(at::kByte));
  if (mine) std::copy(bytes.begin(), bytes.end(), buffer.data_ptr<uint8_t>());
  buffer = broadcast(buffer, src, name, Layouts::AgreedByCaller);  // sized by the broadcast length
  return std::string(reinterpret_cast<const char*>(buffer.data_ptr<uint8_t>()), static_cast<size_t>(size));
}

at::Tensor Collectives::broadcast(const at::Tensor& tensor, int64_t src, const std::string& name, Layouts layouts) {
  if (!dist_) {
    require_source(src, world_size(), name);
    return tensor.clone();
  }
  if (layouts == Layouts::Compared) announce(CallKind::Broadcast, src, Layout::of(tensor), true, name);
  require_source(src, world_size(), name);
  if (tensor.numel() == 0) {  // as in all_gather: Gloo cannot take empty tensors
    broadcast(at::zeros({1}, tensor.options()), src, name, Layouts::AgreedByCaller);
    return tensor.clone();
  }
  // One copy onto the collective device (a new tensor: the input is never overwritten).
  at::Tensor buffer =
      on_the_wire(tensor.detach().to(dist_->device(), tensor.scalar_type(), /*non_blocking=*/false, /*copy=*/true));
  std::vector<at::Tensor> tensors{buffer};
  c10d::BroadcastOptions options;
  options.rootRank = src;
  wait_collective(dist_->group()->broadcast(tensors, options), name);
  return off_the_wire(buffer, tensor.scalar_type()).to(tensor.device());
}

at::Tensor Collectives::gather_rows(const at::Tensor& rows, const std::string& name) {
  if (world_size() == 1) return rows;
  const at::Tensor counts =
      gather(at::full({1}, rows.size(0), rows.options().dtype(at::kLong)), name + " (row counts)").to(at::kCPU);
  const at::Tensor padded = pad_across_processes(rows, 0, 0.0, false, name);
  const at::Tensor all = gather(padded, name);
  const int64_t longest = padded.size(0);
  std::vector<at::Tensor> parts;
  for (int64_t rank = 0; rank < world_size(); ++rank)
    parts.push_back(all.slice(0, rank * longest, rank * longest + counts[rank].item<int64_t>()));
  return at::cat(parts);
}

at::Tensor Collectives::pad_across_processes(const at::Tensor& tensor, int64_t dim, double value, bool pad_first,
                                             const std::string& name) {
  // A dim the tensor lacks pads nothing, as Accelerate's _pad_across_processes returns such a tensor
  // as it is (a 0-d loss beside padded logits).
  const bool valid = tensor.dim() > 0 && dim < tensor.dim() && dim >= -tensor.dim();
  if (!dist_) return tensor;
  if (valid && dim < 0) dim += tensor.dim();
  // The padded dim is the call's parameter, announced first: processes padding different dims (or
  // one none, where Accelerate's would wait for it forever) all fail at this call, none at the next.
  const auto layouts = announce(CallKind::Pad, valid ? dim : kNoDimension, Layout::of(tensor), false, name);
  if (!valid) return tensor;
  int64_t longest = 0;
  require(tensor.dim() <= kMaxDims || dim < kMaxDims, "collective '", name, "': pads one of the first ", kMaxDims,
          " dimensions");  // alike on every process: the same call
  for (const auto& layout : layouts) {
    require(layout.dims == tensor.dim(), "collective '", name,
            "': tensors have different numbers of dimensions across processes");
    require(layout.dtype == static_cast<int64_t>(tensor.scalar_type()), "collective '", name,
            "': tensors have different dtypes across processes");
    longest = std::max(longest, layout.shape[dim]);
  }
  if (longest == tensor.size(dim)) return tensor;
  auto sizes = tensor.sizes().vec();
  sizes[dim] = longest;
  // Accelerate's `tensor.new_zeros(size) + pad_index`, with PyTorch's type promotion: an integral
  // value is Python's int (an integer tensor keeps its dtype, wrapping as it does; a bool tensor
  // becomes int64), another a float (an integer tensor becomes the default float dtype).
  const bool integral = std::nearbyint(value) == value && std::fabs(value) < 0x1p63;
  const at::Scalar pad = integral ? at::Scalar(static_cast<int64_t>(value)) : at::Scalar(value);
  at::Tensor out = at::zeros(sizes, tensor.options()).add(pad);
  const int64_t offset = pad_first ? longest - tensor.size(dim) : 0;
  out.narrow(dim, offset, tensor.size(dim)).copy_(tensor);
  return out;
}

ProcessSplit Collectives::split_between_processes(int64_t n, bool apply_padding) const {
  require(n >= 0, "split_between_processes needs a count >= 0, got ", n);
  const int64_t p = world_size(), r = rank(), per = n / p, extra = n % p;
  ProcessSplit split;
  split.start = r * per + std::min(r, extra);
  split.end = split.start + per + (r < extra ? 1 : 0);
  // Accelerate's: every share padded to per + 1 items with the last of all n, an empty share too.
  if (apply_padding && extra > 0 && r >= extra) split.padding = 1;
  return split;
}

bool Collectives::check_trigger(const std::string& name) {
  at::Tensor flag = at::scalar_tensor(trigger_ ? 1 : 0, at::kLong).unsqueeze(0);
  trigger_ = false;
  if (!dist_) return flag.item<int64_t>() > 0;
  return reduce(flag, Reduction::Sum, name).item<int64_t>() > 0;
}

}  // namespace acc
