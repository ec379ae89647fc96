package ai.accelerate;

/** A histogram of Accelerator.logHistogram as a tracker receives it (TensorBoard's HistogramProto,
 *  computed as torch's add_histogram computes it): the values' minimum, maximum, count, sum and sum
 *  of squares, and its buckets, bucket i holding bucketCounts[i] values above bucketLimits[i - 1] up
 *  to bucketLimits[i] (the first bucket, empty, ends where the values begin). */
public final class Histogram {
  public final double min, max, num, sum, sumSquares;
  private final double[] bucketLimits, bucketCounts;

  Histogram(HistogramView view) {
    min = view.min();
    max = view.max();
    num = view.num();
    sum = view.sum();
    sumSquares = view.sumSquares();
    int n = Math.toIntExact(view.size());
    bucketLimits = new double[n];
    bucketCounts = new double[n];
    view.copyLimits(bucketLimits);
    view.copyCounts(bucketCounts);
  }

  /** The buckets' right edges, ascending (a copy). */
  public double[] bucketLimits() {
    return bucketLimits.clone();
  }

  /** How many values each bucket holds (a copy). */
  public double[] bucketCounts() {
    return bucketCounts.clone();
  }
}
