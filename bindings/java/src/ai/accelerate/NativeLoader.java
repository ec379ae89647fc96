package ai.accelerate;

/** Loads the JNI library once and checks that the jar, the JNI library and libaccelerate agree on
 *  the ABI version, so a mismatch fails at load with all three versions named (Accelerate.checkBinding). */
final class NativeLoader {
  static final String LIBRARY = "accelerate_java";
  private static boolean loaded;

  private NativeLoader() {}

  static synchronized void load() {
    if (loaded) return;
    try {
      System.loadLibrary(LIBRARY);
    } catch (UnsatisfiedLinkError e) {
      throw new UnsatisfiedLinkError("accelerate: cannot load lib" + LIBRARY + ".so (" + e.getMessage()
          + "); add its folder to -Djava.library.path, and make libaccelerate.so.0 findable by the dynamic loader");
    }
    loaded = true;
    Accelerate.checkBinding("Java", NativeConstants.ACC_ABI_VERSION);  // a compile-time constant of this jar
  }
}
