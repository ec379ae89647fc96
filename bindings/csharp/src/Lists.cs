// TensorList and StringList as C# collections.
using System.Collections.Generic;

namespace Accelerate {

public partial class TensorList {
  /// <summary>Takes this list out of the tensor scope or pass over a loader that would dispose it:
  /// its caller disposes it (and, for a batch, with it the tensors taken from it).</summary>
  public TensorList Keep() {
    MoveTo(null);
    return this;
  }
  Tensor Entry(Tensor t) {
    Owner entries = swigEntries;
    if (entries != null && t != null) t.MoveTo(entries);
    return t;
  }
  /// <summary>A new handle to entry <paramref name="index"/>. Of a batch from a pass over a loader it
  /// is the batch's, disposed with it (unless kept); otherwise the caller disposes it (or its tensor
  /// scope does).</summary>
  public Tensor Get(long index) { return Entry(GetEntry(index)); }
  /// <summary>A new handle to the entry called <paramref name="name"/>, owned as Get's is.</summary>
  public Tensor Find(string name) { return Entry(FindEntry(name)); }
  /// A list of unnamed entries (the list holds its own references).
  public static TensorList Of(params Tensor[] tensors) {
    Arg.NotNull(tensors, "tensors");
    var list = new TensorList();
    foreach (Tensor t in tensors) list.Append(null, t);
    return list;
  }
  /// New handles to every entry; the caller disposes them.
  public Tensor[] ToArray() {
    var a = new Tensor[Count];
    for (int i = 0; i < a.Length; ++i) a[i] = Get(i);
    return a;
  }
}

public partial class StringList {
  public List<string> ToList() {
    var list = new List<string>();
    for (long i = 0, n = Count; i < n; ++i) list.Add(Get(i));
    return list;
  }
  public byte[] GetBytes(long index) {
    var a = new byte[ByteSize(index)];
    CopyBytes(index, a, a.LongLength);
    return a;
  }
}

}
