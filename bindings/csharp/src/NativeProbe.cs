// The classes a program starts from load the native side through NativeLoader.Ensure, so that a
// missing library is reported with its name and the paths tried (see NativeLoader).
namespace Accelerate {

public partial class Accelerator { static Accelerator() { NativeLoader.Ensure(); } }
public partial class Options { static Options() { NativeLoader.Ensure(); } }
public partial class Tensor { static Tensor() { NativeLoader.Ensure(); } }
public partial class TensorList { static TensorList() { NativeLoader.Ensure(); } }
public partial class Model { static Model() { NativeLoader.Ensure(); } }
public partial class Dataset { static Dataset() { NativeLoader.Ensure(); } }
public partial class DataLoader { static DataLoader() { NativeLoader.Ensure(); } }
public partial class Library { static Library() { NativeLoader.Ensure(); } }
public partial class Loss { static Loss() { NativeLoader.Ensure(); } }

}
