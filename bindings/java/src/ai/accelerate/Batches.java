package ai.accelerate;

import java.util.Iterator;
import java.util.NoSuchElementException;

/** One pass over a data loader's epoch. It owns the batch it handed out last: that batch, and every
 *  tensor taken from it with get/find, is closed when the loop asks for the next one and when the
 *  epoch ends, so a loop need not close them. {@code batch.keep()} takes a batch out (its caller then
 *  closes it). A for-each over a DataLoader runs on one of these; a loop left with break leaves its
 *  epoch unfinished until this pass is closed: by the loader's next for-each or batches(), by the
 *  loader's close, or by try-with-resources:
 *  <pre>{@code
 *  try (Batches batches = loader.batches()) {
 *    for (TensorList batch : batches) { if (done) break; ... }
 *  }  // the epoch ends here, as a dropped Python iterator's does
 *  }</pre> */
public final class Batches implements Iterator<TensorList>, Iterable<TensorList>, AutoCloseable {
  private final DataLoader loader;
  private final Owner current = new Owner();
  private TensorList pending;
  private boolean done;
  private boolean closed;

  Batches(DataLoader loader) {
    this.loader = loader;
  }

  /** This pass itself (so that a for-each can run over it inside try-with-resources). */
  @Override
  public Iterator<TensorList> iterator() {
    return this;
  }

  /** Releases the previous batch (unless kept), then fetches the next; false at the end of the epoch. */
  @Override
  public boolean hasNext() {
    if (closed) return false;
    if (pending == null && !done) {
      current.closeAll();
      pending = loader.next();
      if (pending == null) {
        done = true;
      } else {
        pending.ownEntries();
        pending.swigMoveTo(current);
      }
    }
    return pending != null;
  }

  @Override
  public TensorList next() {
    if (!hasNext()) throw new NoSuchElementException();
    TensorList batch = pending;
    pending = null;
    return batch;
  }

  /** Releases the batch handed out last (unless kept) and, if the epoch is unfinished, ends it
   *  (DataLoader.endEpoch). Closing again does nothing. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    pending = null;
    try {
      current.closeAll();
    } finally {
      if (!done && !loader.isClosed()) loader.endEpoch();
    }
  }
}
