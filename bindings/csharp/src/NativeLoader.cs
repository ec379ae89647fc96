// The ABI check, run once by NativePINVOKE's static initialiser before its first native call: the
// assembly, its wrapper library and the loaded libaccelerate must agree, or every use fails with
// both versions named (inside a TypeInitializationException, as for any failed type initialiser).
namespace Accelerate {

internal static class NativeLoader {
  internal static bool CheckAbi() {
    NativePINVOKE.Library_CheckBinding("C#", Native.ACC_ABI_VERSION);  // a compile-time constant of this assembly
    if (NativePINVOKE.SWIGPendingException.Pending) throw NativePINVOKE.SWIGPendingException.Retrieve();
    return true;
  }
}

}
