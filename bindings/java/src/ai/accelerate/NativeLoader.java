package ai.accelerate;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/** Loads the JNI library once and checks that the jar, the JNI library and libaccelerate agree on
 *  the ABI version, so a mismatch fails at load with all three versions named (Accelerate.checkBinding).
 *
 *  <p>Where the native libraries come from, first match wins:
 *  <ol>
 *    <li>the folder named by the system property {@code ai.accelerate.native.path} (it holds
 *        libaccelerate_java.so, and libaccelerate.so.0 unless the dynamic loader finds that one);
 *    <li>the jar itself: the Maven artifact carries both libraries under
 *        {@code ai/accelerate/native/linux-x86_64/}; they are copied to a temporary folder, loaded
 *        from there and deleted at once (loaded, they stay mapped), so a JVM that is killed or
 *        halted leaves no copy behind;
 *    <li>{@code java.library.path} (System.loadLibrary), as a build tree's plain jar needs.
 *  </ol>
 *  libtorch itself is found by the dynamic loader (Debian's libtorch1.13 package, or LD_LIBRARY_PATH). */
final class NativeLoader {
  static final String LIBRARY = "accelerate_java";
  static final String PROPERTY = "ai.accelerate.native.path";
  static final String RESOURCES = "/ai/accelerate/native/linux-x86_64/";
  static final String[] BUNDLED = {"libaccelerate.so.0", "libaccelerate_java.so"};
  private static boolean loaded;

  private NativeLoader() {}

  static synchronized void load() {
    if (loaded) return;
    List<String> tried = new ArrayList<>();
    String dir = System.getProperty(PROPERTY);
    try {
      if (dir != null && !dir.isEmpty()) {
        fromFolder(Path.of(dir), tried);
      } else if (NativeLoader.class.getResource(RESOURCES + BUNDLED[1]) != null) {
        fromJar(tried);
      } else {
        tried.add("System.loadLibrary(\"" + LIBRARY + "\") on java.library.path=" + System.getProperty("java.library.path"));
        System.loadLibrary(LIBRARY);
      }
    } catch (UnsatisfiedLinkError | IOException e) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError("accelerate: cannot load lib" + LIBRARY + ".so (" + e.getMessage()
          + "); tried: " + String.join("; ", tried) + ". Use the Maven artifact (it carries the libraries), or set -D"
          + PROPERTY + "=<folder with lib" + LIBRARY + ".so> or -Djava.library.path, and make libaccelerate.so.0 and"
          + " libtorch findable by the dynamic loader");
      error.initCause(e);
      throw error;
    }
    loaded = true;
    Accelerate.checkBinding("Java", NativeConstants.ACC_ABI_VERSION);  // a compile-time constant of this jar
  }

  private static void fromFolder(Path dir, List<String> tried) {
    Path core = dir.resolve(BUNDLED[0]);
    if (Files.exists(core)) {
      tried.add(core.toString());
      System.load(core.toAbsolutePath().toString());
    }
    Path wrapper = dir.resolve(BUNDLED[1]);
    tried.add(wrapper.toString());
    System.load(wrapper.toAbsolutePath().toString());
  }

  // libaccelerate.so.0 is loaded first: the dynamic loader then satisfies the wrapper's dependency on
  // it by its soname, whatever folder it came from.
  private static void fromJar(List<String> tried) throws IOException {
    Path dir = Files.createTempDirectory("accelerate-native-");
    try {
      for (String name : BUNDLED) {
        Path file = dir.resolve(name);
        try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCES + name)) {
          if (in == null) throw new IOException("the jar has no " + RESOURCES + name);
          Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        }
        tried.add("jar:" + RESOURCES + name + " -> " + file);
        System.load(file.toAbsolutePath().toString());
      }
    } finally {
      // Loaded or not, the copies go now: the process keeps what it mapped, and a JVM that never
      // exits normally (killed, halted, crashed) would leave 64 MB behind per run for good.
      for (String name : BUNDLED) Files.deleteIfExists(dir.resolve(name));
      Files.deleteIfExists(dir);
    }
  }
}
