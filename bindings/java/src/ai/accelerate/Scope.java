package ai.accelerate;

/** A scoped section (accumulate, noSync, mainProcessFirst) for try-with-resources: close() ends
 *  it once; closing again does nothing. */
public final class Scope implements AutoCloseable {
  private Runnable end;

  Scope(Runnable end) {
    this.end = end;
  }

  @Override
  public void close() {
    Runnable e = end;
    end = null;
    if (e != null) e.run();
  }
}
