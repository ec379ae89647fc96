package ai.accelerate;

/** A scoped section (accumulate, noSync, mainProcessFirst) for try-with-resources: close() ends
 *  it once; closing again does nothing (after a close that failed, it tries again). */
public final class Scope implements AutoCloseable {
  private Runnable end;

  Scope(Runnable end) {
    this.end = end;
  }

  @Override
  public void close() {
    Runnable e = end;
    if (e == null) return;
    e.run();  // an end that failed (on another thread than its begin) is tried again by the next close
    end = null;
  }
}
