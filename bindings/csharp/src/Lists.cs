// TensorList and StringList as C# collections.
using System.Collections.Generic;

namespace Accelerate {

public partial class TensorList {
  /// A list of unnamed entries (the list holds its own references).
  public static TensorList Of(params Tensor[] tensors) {
    var list = new TensorList();
    foreach (Tensor t in tensors) list.Append(null, t);
    return list;
  }
  /// New handles to every entry; the caller disposes them.
  public Tensor[] ToArray() {
    var a = new Tensor[Size()];
    for (int i = 0; i < a.Length; ++i) a[i] = Get(i);
    return a;
  }
}

public partial class StringList {
  public List<string> ToList() {
    var list = new List<string>();
    for (long i = 0, n = Size(); i < n; ++i) list.Add(Get(i));
    return list;
  }
  public byte[] GetBytes(long index) {
    var a = new byte[ByteSize(index)];
    CopyBytes(index, a, a.LongLength);
    return a;
  }
}

}
