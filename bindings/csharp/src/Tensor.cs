// Tensor: C# arrays in and out, the shape as long[].
namespace Accelerate {

public partial class Tensor {
  /// <summary>Takes this tensor out of the tensor scope or batch that would dispose it: its caller
  /// disposes it.</summary>
  public Tensor Keep() {
    MoveTo(null);
    return this;
  }
  public static Tensor Of(float[] data, params long[] shape) { return FromArray(data, shape, FromFloats); }
  public static Tensor Of(double[] data, params long[] shape) { return FromArray(data, shape, FromDoubles); }
  public static Tensor Of(long[] data, params long[] shape) { return FromArray(data, shape, FromLongs); }
  public static Tensor Of(int[] data, params long[] shape) { return FromArray(data, shape, FromInts); }
  /// uint8 elements.
  public static Tensor Of(byte[] data, params long[] shape) { return FromArray(data, shape, FromBytes); }
  // The arrays checked, then handed to the wrapped constructor with their lengths.
  static Tensor FromArray<T>(T[] data, long[] shape, System.Func<T[], long, long[], long, Tensor> make) {
    Arg.NotNull(data, "data");
    return make(data, data.LongLength, Arg.NotNull(shape, "shape"), shape.LongLength);
  }

  /// torch.reshape: one dim may be -1 (logits [B, T, V] become [-1, V] for the cross-entropy).
  public Tensor Reshape(params long[] dims) {
    return Reshape(Arg.NotNull(dims, "dims"), dims.LongLength);
  }

  /// Zeros on the CPU.
  public static Tensor Zeros(DType dtype, params long[] shape) { return Zeros(dtype, null, shape); }
  public static Tensor Zeros(DType dtype, string device, params long[] shape) {
    return Zeros(Arg.NotNull(shape, "shape"), shape.LongLength, dtype, device);
  }
  /// torch.rand / torch.randn: float32 CPU draws from torch's global CPU generator (Library.GetRandomState).
  public static Tensor Rand(params long[] shape) { return Rand(Arg.NotNull(shape, "shape"), shape.LongLength); }
  public static Tensor Randn(params long[] shape) { return Randn(Arg.NotNull(shape, "shape"), shape.LongLength); }
  /// Elements of a raw file mapped from `offset` (read-only, shared with the page cache).
  public static Tensor FromFileMmap(string path, long offset, DType dtype, params long[] shape) {
    return FromFileMmap(path, offset, dtype, Arg.NotNull(shape, "shape"), shape.LongLength);
  }

  public long[] Shape() {
    long[] s = new long[Ndim];
    CopyShape(s, s.LongLength);
    return s;
  }
  public float[] ToFloatArray() {
    float[] a = new float[Numel];
    CopyToFloats(a, a.LongLength);
    return a;
  }
  public double[] ToDoubleArray() {
    double[] a = new double[Numel];
    CopyToDoubles(a, a.LongLength);
    return a;
  }
  public long[] ToLongArray() {
    long[] a = new long[Numel];
    CopyToLongs(a, a.LongLength);
    return a;
  }
  public int[] ToIntArray() {
    int[] a = new int[Numel];
    CopyToInts(a, a.LongLength);
    return a;
  }
  public byte[] ToByteArray() {
    byte[] a = new byte[Numel];
    CopyToBytes(a, a.LongLength);
    return a;
  }
}

}
