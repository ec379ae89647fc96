#include "model/peft/eva.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/error.h"
#include "model/peft/incremental_pca.h"

namespace acc {

const OptionTable<EvaReading>& eva_option_table() {
  using E = EvaReading;
  constexpr int64_t kMostFields = 1 << 20;
  static const OptionTable<E> table(OptionsKind::Eva, [](OptionTable<E>& t) {
    t.bind("inputs", "the batch's first fields, which the model's forward takes", &E::inputs)
        .at_least(1)
        .at_most(kMostFields);
    t.bind("labels",
           "the batch's field of labels (-1: none): positions whose label is the adapters' eva_label_mask_value "
           "are left out (with eva_use_label_mask)",
           &E::labels)
        .at_least(-1)
        .at_most(kMostFields);
    t.bind("attention_mask", "the batch's field of the attention mask (-1: none): only its non-zero positions count",
           &E::attention_mask)
        .at_least(-1)
        .at_most(kMostFields);
    t.bind("gather_distributed_inputs", "on several processes, each layer's inputs gathered from all of them",
           &E::gather_distributed_inputs);
    t.bind("max_batches", "forward passes before EVA gives up on layers that have not converged",
           &E::max_batches)
        .at_least(1);
  });
  return table;
}

namespace {

// Which positions of the layers' inputs count on a batch (PEFT's
// prepare_model_inputs_fn_language_modeling): a bool mask over their leading dimensions, or
// undefined for all of them (its prepare_layer_inputs_fn None: the leading dimensions flattened).
at::Tensor counted_positions(const std::vector<at::Tensor>& batch, const EvaReading& reading,
                             const EvaConfig& config) {
  if (reading.attention_mask < 0 && reading.labels < 0) return {};
  for (int64_t field : {reading.attention_mask, reading.labels})
    if (field >= 0 && batch[field].sizes() != batch[0].sizes())
      fail(Status::InvalidArgument, "EVA: field ", field, " (", field == reading.labels ? "labels" : "attention_mask",
           ") is ", batch[field].sizes(), ": it must be shaped as the batch's first field (the input ids), ",
           batch[0].sizes());
  at::Tensor mask = (reading.attention_mask >= 0 ? batch[reading.attention_mask] : at::ones_like(batch[0]))
                        .to(at::kBool);
  if (reading.labels >= 0 && config.use_label_mask)
    mask = at::logical_and(mask, batch[reading.labels] != config.label_mask_value);
  return mask;
}

// A layer's input as the rows EVA's SVD takes (PEFT's prepare_layer_inputs_fn).
at::Tensor layer_rows(const at::Tensor& input, const at::Tensor& positions, const std::string& layer) {
  if (!positions.defined()) {
    require(input.dim() >= 2, "EVA: the input of '", layer, "' has ", input.dim(),
            " dimension(s); it needs samples x features");
    return input.dim() > 2 ? input.reshape({-1, input.size(-1)}) : input;
  }
  require(input.dim() == positions.dim() + 1 && input.sizes().slice(0, positions.dim()) == positions.sizes(),
          "EVA: the input of '", layer, "' is ", input.sizes(), ": the labels and attention mask (", positions.sizes(),
          ") must be its leading dimensions (or name neither: every position counts)");
  return input.index({positions.to(input.device())});
}

// A layer that has a computation of its own (PEFT's SVDHook), and its hook's state.
struct Hooked {
  size_t layer;
  IncrementalPca pca;
  at::Tensor converged;     // per component
  bool active = true;       // the hook is on (PEFT's handle)
  bool converged_flag = false;  // PEFT's convergence_dict
};

// itertools.cycle over the loader: its first epoch's batches as they come (kept), then those again.
class Cycle {
 public:
  explicit Cycle(const EvaSource& source) : source_(source) {}
  ~Cycle() {
    if (reading_) source_.drop_iterator();  // a loop left in the first epoch drops its iterator
  }
  Cycle(const Cycle&) = delete;
  Cycle& operator=(const Cycle&) = delete;
  const std::vector<at::Tensor>& next() {
    if (reading_) {
      if (auto batch = source_.next()) {
        seen_.push_back(std::move(*batch));
        return seen_.back();
      }
      reading_ = false;  // the loader ended its epoch
      require(!seen_.empty(), "EVA: the data loader gave no batch");
    }
    return seen_[replayed_++ % seen_.size()];
  }

 private:
  const EvaSource& source_;
  bool reading_ = true;
  std::vector<std::vector<at::Tensor>> seen_;
  size_t replayed_ = 0;
};

// Takes every layer's adapter off on the way out (the caller puts the layers' own back).
struct HooksOff {
  const std::vector<EvaLayer>& layers;
  ~HooksOff() {
    for (const auto& layer : layers) layer.set_output_adapter(nullptr);
  }
};

std::vector<at::Tensor> model_inputs(const std::vector<at::Tensor>& batch, const EvaReading& reading) {
  return std::vector<at::Tensor>(batch.begin(), batch.begin() + reading.inputs);
}

void check_fields(const std::vector<at::Tensor>& batch, const EvaReading& reading) {
  const auto fields = static_cast<int64_t>(batch.size());
  require(reading.inputs <= fields, "EVA: the forward takes the batch's first ", reading.inputs,
          " field(s), but a batch has ", fields);
  require(reading.labels < fields, "EVA: labels is field ", reading.labels, ", but a batch has ", fields);
  require(reading.attention_mask < fields, "EVA: attention_mask is field ", reading.attention_mask,
          ", but a batch has ", fields);
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> eva_components(const EvaJob& job, const EvaSource& source) {
  const std::vector<EvaLayer>& layers = job.layers;
  const size_t n = layers.size();
  require(n > 0, "EVA: no layer to compute");
  require(source.length != 0, "EVA: the data loader is empty");
  double rho = job.config.rho;
  if (rho > 1000) rho = std::min(rho, static_cast<double>(job.largest_parameter_size / job.r));  // PEFT's ceiling
  std::vector<int64_t> max_components(n);
  int64_t rank_budget = 0;
  for (size_t k = 0; k < n; ++k) {
    // Python's round: halves to even, as nearbyint in the default rounding mode.
    max_components[k] = static_cast<int64_t>(std::nearbyint(static_cast<double>(layers[k].rank) * rho));
    require(max_components[k] <= layers[k].in_features, "EVA: '", layers[k].name, "' would need ",
            max_components[k], " components (round(r * eva_rho)) of inputs with ", layers[k].in_features,
            " features (PEFT's IncrementalPCA refuses it); lower its r or eva_rho");
    rank_budget += layers[k].rank;
  }
  HooksOff hooks_off{layers};
  at::Tensor positions;  // of the batch being run, for the hooks

  // PEFT's first pass (HashHook): which layers see the same input, on the loader's first batch.
  std::optional<std::vector<at::Tensor>> first = source.next();
  source.drop_iterator();
  require(first.has_value(), "EVA: the data loader is empty");
  check_fields(*first, job.reading);
  positions = counted_positions(*first, job.reading, job.config);
  std::vector<at::Tensor> first_inputs(n);
  for (size_t k = 0; k < n; ++k)
    layers[k].set_output_adapter([&, k](const at::Tensor& input, const at::Tensor& output, bool) {
      if (!first_inputs[k].defined())
        first_inputs[k] = job.gather_rows(layer_rows(input.detach(), positions, layers[k].name));
      return output;
    });
  job.forward(model_inputs(*first, job.reading));
  std::vector<size_t> leader(n);
  for (size_t k = 0; k < n; ++k) {
    require(first_inputs[k].defined(), "EVA: the model's forward did not call '", layers[k].name,
            "' on the first batch");
    leader[k] = k;
    for (size_t j = 0; j < k; ++j) {
      const at::Tensor &a = first_inputs[j], &b = first_inputs[k];
      if (leader[j] == j && a.numel() == b.numel() && a.scalar_type() == b.scalar_type() &&
          at::equal(a.reshape({-1}), b.reshape({-1}))) {
        leader[k] = j;
        break;
      }
    }
  }
  first_inputs.clear();
  for (size_t k = 0; k < n; ++k)  // a group computes as many components as its largest member needs
    if (leader[k] != k) max_components[leader[k]] = std::max(max_components[leader[k]], max_components[k]);
  for (size_t k = 0; k < n; ++k) max_components[k] = max_components[leader[k]];
  // PEFT's layer_hook_map order: the layers computed, then the others by group.
  std::vector<std::unique_ptr<Hooked>> hooked;
  std::vector<Hooked*> hook_of(n, nullptr);
  for (size_t k = 0; k < n; ++k)
    if (leader[k] == k) {
      hooked.push_back(std::make_unique<Hooked>(
          Hooked{k, IncrementalPca(max_components[k]), at::zeros({max_components[k]}, at::kBool)}));
      hook_of[k] = hooked.back().get();
    }
  std::vector<size_t> order, followers;
  for (const auto& h : hooked) order.push_back(h->layer);
  for (size_t k = 0; k < n; ++k)
    if (leader[k] != k) followers.push_back(k);
  std::stable_sort(followers.begin(), followers.end(), [&](size_t a, size_t b) { return leader[a] < leader[b]; });
  order.insert(order.end(), followers.begin(), followers.end());
  for (size_t k : followers) hook_of[k] = hook_of[leader[k]];

  const double tau = job.config.tau;
  auto install = [&](Hooked& h) {
    const EvaLayer& layer = layers[h.layer];
    layer.set_output_adapter([&](const at::Tensor& input, const at::Tensor& output, bool) {
      const at::Tensor states = job.gather_rows(layer_rows(input.detach(), positions, layer.name));
      if (states.size(0) < h.pca.n_components()) return output;  // PEFT skips such a batch
      const at::Tensor previous = h.pca.fitted() ? h.pca.components().clone() : at::Tensor();
      h.pca.partial_fit(states.to(at::kFloat));
      if (previous.defined()) h.converged = at::cosine_similarity(h.pca.components(), previous, 1, 1e-8) >= tau;
      return output;
    });
  };
  for (size_t k = 0; k < n; ++k) layers[k].set_output_adapter(nullptr);
  for (auto& h : hooked) install(*h);

  // PEFT's _get_rank_distribution: the rank budget (the layers' ranks summed) goes to the components
  // that explain the largest shares of their layer's input variance; a layer sharing another's
  // computation gives it the larger count.
  auto rank_distribution = [&] {
    std::vector<at::Tensor> values;
    std::vector<size_t> owner;
    for (size_t k : order) {
      const at::Tensor ratios = hook_of[k]->pca.explained_variance_ratio().slice(0, 0, max_components[k]);
      for (int64_t i = 0; i < ratios.size(0); ++i) {
        values.push_back(ratios[i]);
        owner.push_back(k);
      }
    }
    const at::Tensor sorted = at::argsort(at::stack(values), -1, /*descending=*/true).to(at::kCPU).contiguous();
    const int64_t taken = std::min<int64_t>(rank_budget, sorted.size(0));
    const auto* index = sorted.data_ptr<int64_t>();
    std::vector<int64_t> counts(n, 0);
    for (int64_t i = 0; i < taken; ++i) ++counts[owner[index[i]]];
    for (size_t k : followers)
      if (counts[leader[k]] < counts[k]) std::swap(counts[leader[k]], counts[k]);
    return counts;
  };
  auto all_converged = [](const Hooked& h, int64_t rank) {
    return at::all(h.converged.slice(0, 0, rank)).item<bool>();
  };

  std::vector<int64_t> rank_dist = max_components;
  int64_t forwards = 0;
  {
    Cycle cycle(source);
    while (true) {
      const std::vector<at::Tensor>& batch = cycle.next();
      check_fields(batch, job.reading);
      positions = counted_positions(batch, job.reading, job.config);
      for (auto& h : hooked) {
        const bool converged = all_converged(*h, rank_dist[h->layer]);
        if (!h->converged_flag && converged && h->active) {
          h->active = false;
          layers[h->layer].set_output_adapter(nullptr);
          h->converged_flag = true;
        } else if (h->converged_flag && !converged) {
          h->active = true;
          install(*h);
          h->converged_flag = false;
        }
      }
      if (std::all_of(hooked.begin(), hooked.end(), [](const auto& h) { return h->converged_flag; })) break;
      if (forwards == job.reading.max_batches) {
        std::string pending;
        for (const auto& h : hooked)
          if (!h->converged_flag) pending += (pending.empty() ? "'" : ", '") + layers[h->layer].name + "'";
        fail(Status::InvalidArgument, "EVA: after ", forwards, " batches (max_batches) the components of ", pending,
             " have not converged (cosine similarity eva_tau ", tau, " between batches); give more batches or a "
             "lower eva_tau");
      }
      ++forwards;
      job.forward(model_inputs(batch, job.reading));
      if (std::all_of(hooked.begin(), hooked.end(), [](const auto& h) { return h->pca.fitted(); }))
        rank_dist = rank_distribution();
    }
  }

  std::vector<std::pair<std::string, at::Tensor>> components;
  for (size_t k : order) {
    Hooked& h = *hook_of[k];
    const int64_t rank = rank_dist[k];
    if (!all_converged(h, rank))
      fail(Status::Internal, "EVA: '", layers[k].name, "' has not converged but was given rank ", rank);
    at::Tensor u = h.pca.components().slice(0, 0, rank);
    // In place, as PEFT's `u /= ...`: layers sharing a computation divide its rows once each.
    if (job.config.whiten) u.div_(h.pca.singular_values().slice(0, 0, rank).sqrt().reshape({-1, 1}));
    components.emplace_back(layers[k].name, u);
  }
  return components;
}

}  // namespace acc
