package ai.accelerate;

import java.lang.ref.Cleaner;
import java.util.function.LongConsumer;

/** The safety net for objects that are never closed: frees the native handle once the proxy is
 *  unreachable. The action captures only the address, never the proxy, or it would never run. */
final class NativeCleaner {
  private static final Cleaner CLEANER = Cleaner.create();

  private NativeCleaner() {}

  static Cleaner.Cleanable register(Object owner, long address, LongConsumer free) {
    return CLEANER.register(owner, () -> free.accept(address));
  }
}
