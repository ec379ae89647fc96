// The ABI check, run once by NativePINVOKE's static initialiser before its first native call: the
// assembly, its wrapper library and the loaded libaccelerate must agree, or every use fails with
// both versions named (inside a TypeInitializationException, as for any failed type initialiser).
namespace Accelerate {

internal static class NativeLoader {
  internal static bool CheckAbi() {
    int assembly = Native.ACC_ABI_VERSION;  // a compile-time constant of this assembly
    int wrapper = NativePINVOKE.Library_CompiledAbiVersion();
    int library = NativePINVOKE.Library_AbiVersion();
    if (assembly != library || wrapper != library)
      throw new AccelerateVersionMismatchException(
          "accelerate: the C# binding was built for ABI version " + assembly + " (wrapper library: " + wrapper +
          ") but the loaded libaccelerate has ABI version " + library + "; use the binding built with this library");
    NativePINVOKE.Library_CheckAbi(assembly);  // the library's own check, for its message
    if (NativePINVOKE.SWIGPendingException.Pending) throw NativePINVOKE.SWIGPendingException.Retrieve();
    return true;
  }
}

}
