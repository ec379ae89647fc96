// The histogram of torch's SummaryWriter.add_histogram (torch.utils.tensorboard.summary.histogram),
// computed as torch computes it: the values as float64, numpy's bins (SummaryWriter's "tensorflow"
// bins by default: 0 and +-1e-12 * 1.1^k up to 1e20; or n equal-width bins over [min, max], as
// np.histogram makes them), max_bins' merging, then only the bins from the first to the last that
// hold values, with one empty bin before them, whose right limits TensorBoard shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace acc::tracking {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;  // HistogramProto's: right limits and counts
};

// The same histogram as np.histogram's (counts, edges) over the span it keeps: TensorBoard's right
// limits are the edges of the bins from the first to the last that hold values, the first limit
// being that bins' left edge (its count a 0 placeholder). What trackio.Histogram and wandb.Histogram
// take as np_histogram.
struct NumpyHistogram {
  std::vector<int64_t> counts;
  std::vector<double> edges;  // one more than counts
};
NumpyHistogram numpy_histogram(const Histogram& histogram);

// How the values are binned: `equal_bins` 0 for the "tensorflow" bins, else that many equal-width
// bins; `max_bins` 0 for no limit.
struct HistogramBins {
  int64_t equal_bins = 0;
  int64_t max_bins = 0;
};

// `bins` as add_histogram takes it: "tensorflow" (or "": the default) or a bin count in decimal.
// numpy's named strategies ("auto", "fd", ...) are Unsupported; anything else InvalidArgument.
HistogramBins parse_histogram_bins(const std::string& bins, int64_t max_bins);

// InvalidArgument, naming `name`, for a tensor torch refuses or cannot take: no values, a complex or
// non-numeric dtype (a check of its shape and dtype alone, made on every process).
void check_histogram_values(const at::Tensor& values, const std::string& name);

// The histogram of values check_histogram_values took. InvalidArgument (with equal-width bins) for a
// non-finite minimum or maximum, as np.histogram refuses that range; and
// a histogram with no value inside the bins (all NaN, or all beyond +-1e20 for the tensorflow bins).
// NaN values otherwise count in num, sum and min/max (as numpy's reductions propagate them) but in no
// bin.
Histogram make_histogram(const at::Tensor& values, const HistogramBins& bins);

// SummaryWriter's default_bins: -1e20 < ... < -1e-12, 0, 1e-12 < ... < 1e20 (factors of 1.1).
const std::vector<double>& tensorflow_bins();

}  // namespace acc::tracking
