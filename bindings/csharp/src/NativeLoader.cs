// Loading the native side: NativePINVOKE's static initialisers load it before the first native call,
// and the entry classes (NativeProbe.cs) run them first through Ensure. A library that cannot be loaded is reported with the library really missing and every path
// tried (the runtime's own DllNotFoundException names only libaccelerate_csharp, even when what is
// missing is libaccelerate.so.0 or libtorch). Then the ABI check: the assembly, its wrapper library
// and the loaded libaccelerate must agree, or every use fails with both versions named (inside a
// TypeInitializationException, as for any failed type initialiser).
using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.InteropServices;

namespace Accelerate {

internal static class NativeLoader {
  internal const string Wrapper = "libaccelerate_csharp.so";

  [DllImport("libdl.so.2")] static extern IntPtr dlopen(string file, int mode);
  [DllImport("libdl.so.2")] static extern IntPtr dlerror();
  [DllImport("libdl.so.2")] static extern int dlclose(IntPtr handle);
  const int RTLD_NOW = 2;

  // Runs NativePINVOKE's static initialisers; a failure to load the wrapper library becomes a
  // DllNotFoundException that says why (the ABI check's own failure passes through unchanged).
  internal static void Ensure() {
    try {
      System.Runtime.CompilerServices.RuntimeHelpers.RunClassConstructor(typeof(NativePINVOKE).TypeHandle);
    } catch (TypeInitializationException e) {
      // SWIG's helpers are nested types: the load failure may sit several initialisers deep.
      for (Exception inner = e.InnerException; inner != null; inner = inner.InnerException)
        if (inner is DllNotFoundException || inner is EntryPointNotFoundException)
          throw new DllNotFoundException(Explain(), inner);
      throw;
    }
  }

  // Where the wrapper was looked for, and what the dynamic loader said about each place.
  static string Explain() {
    var tried = new List<string>();
    string dir = null;
    try {
      dir = Path.GetDirectoryName(typeof(NativeLoader).Assembly.Location);
    } catch (Exception) {
    }
    var candidates = new List<string>();
    if (!string.IsNullOrEmpty(dir)) {
      candidates.Add(Path.Combine(dir, Wrapper));
      candidates.Add(Path.Combine(Path.Combine(dir, "runtimes/linux-x64/native"), Wrapper));
    }
    candidates.Add(Wrapper);  // the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig)
    foreach (string path in candidates) {
      if (path.Contains("/") && !File.Exists(path)) {
        tried.Add(path + ": no such file");
        continue;
      }
      string why;
      try {
        IntPtr h = dlopen(path, RTLD_NOW);
        if (h != IntPtr.Zero) {
          dlclose(h);
          why = "loads (the runtime's own search did not find it: put it next to Accelerate.dll)";
        } else {
          IntPtr msg = dlerror();
          why = msg == IntPtr.Zero ? "not loadable" : Marshal.PtrToStringAnsi(msg);
        }
      } catch (Exception e) {
        why = "not probed (" + e.Message + ")";
      }
      tried.Add(path + ": " + why);
    }
    return "accelerate: cannot load " + Wrapper + " (the C# binding's native library, which needs libaccelerate.so.0 " +
           "and libtorch). Tried: " + string.Join("; ", tried.ToArray()) + ". Put " + Wrapper +
           " next to Accelerate.dll, and libaccelerate.so.0 where the dynamic loader finds it (its folder in " +
           "LD_LIBRARY_PATH, or installed with ldconfig)";
  }

  internal static bool CheckAbi() {
    NativePINVOKE.Library_CheckBinding("C#", Native.ACC_ABI_VERSION);  // a compile-time constant of this assembly
    if (NativePINVOKE.SWIGPendingException.Pending) throw NativePINVOKE.SWIGPendingException.Retrieve();
    return true;
  }
}

}
