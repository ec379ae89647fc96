#include "tracking/histogram.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"
#include "common/text.h"

namespace acc::tracking {
namespace {

// np.add.reduce of float64: numpy's pairwise summation (blocks of up to 128 values summed in 8 lanes).
double pairwise_sum(const double* a, int64_t n) {
  if (n < 8) {
    double sum = 0.;
    for (int64_t i = 0; i < n; ++i) sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += a[i];
    return sum;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}

// np.linspace(first, last, n + 1) as np.histogram makes its equal-width edges.
std::vector<double> equal_width_edges(double first, double last, int64_t n) {
  std::vector<double> edges(static_cast<size_t>(n) + 1);
  const double delta = last - first;
  const double step = delta / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    const double at =
        step == 0 ? static_cast<double>(i) / static_cast<double>(n) * delta : static_cast<double>(i) * step;
    edges[static_cast<size_t>(i)] = at + first;
  }
  edges.back() = last;
  return edges;
}

// np.histogram's counts: bin i holds edges[i] <= x < edges[i + 1], the last one its right edge too;
// values outside the edges and NaN are in none.
std::vector<double> counts_in(const double* values, int64_t n, const std::vector<double>& edges) {
  std::vector<double> counts(edges.size() - 1, 0.);
  for (int64_t i = 0; i < n; ++i) {
    const double x = values[i];
    if (!(x >= edges.front() && x <= edges.back())) continue;
    size_t bin = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
    bin = std::min(bin, counts.size()) - 1;
    counts[bin] += 1;
  }
  return counts;
}

}  // namespace

const std::vector<double>& tensorflow_bins() {
  static const std::vector<double> bins = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    std::vector<double> out;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) out.push_back(-*it);
    out.push_back(0.);
    out.insert(out.end(), positive.begin(), positive.end());
    return out;
  }();
  return bins;
}

HistogramBins parse_histogram_bins(const std::string& bins, int64_t max_bins) {
  require(max_bins >= 0, "max_bins is ", max_bins, "; 0 for no limit, or the most bins to show");
  HistogramBins out;
  out.max_bins = max_bins;
  if (bins.empty() || bins == "tensorflow") return out;
  for (const char* strategy : {"auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"})
    if (bins == strategy)
      fail(Status::Unsupported, "bins \"", bins, "\": numpy's bin-width strategies are not built; give \"tensorflow\" ",
           "(SummaryWriter's default) or a number of bins");
  const auto count = parse_integer(bins);
  require(count && *count >= 1 && *count <= (int64_t{1} << 24), "bins is \"tensorflow\" or a number of bins from 1 ",
          "to 16777216, not \"", bins, "\"");
  out.equal_bins = *count;
  return out;
}

void check_histogram_values(const at::Tensor& values, const std::string& name) {
  require(values.defined() && values.numel() > 0, "the tensor of the histogram \"", name, "\" is empty");
  require(!values.is_complex() && (values.is_floating_point() || at::isIntegralType(values.scalar_type(), true)),
          "the histogram \"", name, "\" takes real numbers, not ", values.scalar_type());
}

Histogram make_histogram(const at::Tensor& tensor, const HistogramBins& bins) {
  // values.astype(float): every value as float64 (exact for every dtype but int64's largest).
  const at::Tensor flat = tensor.detach().reshape({-1}).to(at::kCPU).to(at::kDouble).contiguous();
  const double* data = flat.data_ptr<double>();
  const int64_t n = flat.numel();

  Histogram h;
  h.num = static_cast<double>(n);
  // numpy's min and max propagate NaN.
  h.min = std::numeric_limits<double>::infinity();
  h.max = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const double x = data[i];
    if (std::isnan(x))
      nan = true;
    else
      h.min = std::min(h.min, x), h.max = std::max(h.max, x);
  }
  if (nan) h.min = h.max = std::numeric_limits<double>::quiet_NaN();
  h.sum = pairwise_sum(data, n);
  double squares = 0;  // values.dot(values): BLAS's order, to rounding
  for (int64_t i = 0; i < n; ++i) squares += data[i] * data[i];
  h.sum_squares = squares;

  std::vector<double> edges;
  if (bins.equal_bins == 0) {
    edges = tensorflow_bins();
  } else {
    require(
        std::isfinite(h.min) && std::isfinite(h.max), "the values' range [", h.min, ", ", h.max,
        "] is not finite, so equal-width bins cannot be made (np.histogram refuses it too); use the tensorflow bins");
    double first = h.min, last = h.max;
    if (first == last) first -= 0.5, last += 0.5;
    edges = equal_width_edges(first, last, bins.equal_bins);
  }
  std::vector<double> counts = counts_in(data, n, edges);
  // max_bins: every `subsampling` bins merged, the last group padded with empty ones.
  if (bins.max_bins > 0 && static_cast<int64_t>(counts.size()) > bins.max_bins) {
    const size_t subsampling = counts.size() / static_cast<size_t>(bins.max_bins);
    const size_t remainder = counts.size() % subsampling;
    if (remainder != 0) counts.resize(counts.size() + subsampling - remainder, 0.);
    std::vector<double> merged(counts.size() / subsampling, 0.);
    for (size_t i = 0; i < counts.size(); ++i) merged[i / subsampling] += counts[i];
    std::vector<double> merged_edges;
    for (size_t i = 0; i + 1 < edges.size(); i += subsampling) merged_edges.push_back(edges[i]);
    merged_edges.resize(merged.size());
    merged_edges.push_back(edges.back());
    counts = std::move(merged);
    edges = std::move(merged_edges);
  }
  // The support: from the first bin holding values to the last, with the empty bin before it.
  size_t start = counts.size(), last = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) start = std::min(start, i), last = i;
  require(start < counts.size(), "no value lies inside the histogram's bins (NaN, or beyond +-1e20 for the ",
          "tensorflow bins): the histogram would be empty");
  const size_t end = last + 1;
  if (start > 0)
    h.bucket.assign(counts.begin() + static_cast<std::ptrdiff_t>(start - 1),
                    counts.begin() + static_cast<std::ptrdiff_t>(end));
  else {
    h.bucket.push_back(0.);
    h.bucket.insert(h.bucket.end(), counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(end));
  }
  h.bucket_limit.assign(edges.begin() + static_cast<std::ptrdiff_t>(start),
                        edges.begin() + static_cast<std::ptrdiff_t>(end + 1));
  return h;
}

NumpyHistogram numpy_histogram(const Histogram& histogram) {
  NumpyHistogram numpy;
  for (size_t i = 1; i < histogram.bucket.size(); ++i)
    numpy.counts.push_back(static_cast<int64_t>(histogram.bucket[i]));
  numpy.edges = histogram.bucket_limit;
  return numpy;
}

}  // namespace acc::tracking
