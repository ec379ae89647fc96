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
    var candidates = new List<string>();
    // .NET Core: the folders its host searches (from the app's deps.json, e.g. the Accelerate package's
    // runtimes/linux-x64/native); Mono has none of these.
    string searched = AppDomain.CurrentDomain.GetData("NATIVE_DLL_SEARCH_DIRECTORIES") as string;
    if (!string.IsNullOrEmpty(searched))
      foreach (string d in searched.Split(Path.PathSeparator))
        if (d.Length > 0) AddCandidate(candidates, Path.Combine(d, Wrapper));
    string dir = null;
    try {
      dir = Path.GetDirectoryName(typeof(NativeLoader).Assembly.Location);
    } catch (Exception) {
    }
    if (!string.IsNullOrEmpty(dir)) {
      AddCandidate(candidates, Path.Combine(dir, Wrapper));
      AddCandidate(candidates, Path.Combine(Path.Combine(dir, "runtimes/linux-x64/native"), Wrapper));
    }
    candidates.Add(Wrapper);  // the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig)
    var tried = new List<string>();
    try {
      // The runtime binds a P/Invoke on its first call, through dlsym, which clears the error that
      // dlopen left for dlerror: bind dlerror now.
      dlerror();
    } catch (Exception) {
    }
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
           " next to Accelerate.dll (.NET Core: reference the Accelerate package, which carries it in " +
           "runtimes/linux-x64/native), and libaccelerate.so.0 beside it or where the dynamic loader finds it " +
           "(its folder in LD_LIBRARY_PATH, or installed with ldconfig)";
  }

  static void AddCandidate(List<string> candidates, string path) {
    path = Path.GetFullPath(path);
    if (!candidates.Contains(path)) candidates.Add(path);
  }

  internal static bool CheckAbi() {
    NativePINVOKE.Library_CheckBinding("C#", Native.ACC_ABI_VERSION);  // a compile-time constant of this assembly
    if (NativePINVOKE.SWIGPendingException.Pending) throw NativePINVOKE.SWIGPendingException.Retrieve();
    return true;
  }
}

}
