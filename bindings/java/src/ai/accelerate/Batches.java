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
  private volatile boolean closed;
  private volatile boolean superseded;  // closed by a newer pass of its loader, not by its caller
  private volatile boolean loaderClosed;  // closed with its loader (on another thread, maybe, mid-loop)
  private long epoch = -1;     // the loader's epoch this pass runs in, from its first batch on

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
    if (closed) return closedUnderTheLoop();
    if (pending == null && !done) {
      current.closeAll();
      // An epoch ended under this pass (by another pass over the same native loader) would be
      // followed silently by the next one: a nested loop would never end.
      if (epoch < 0) {
        epoch = loader.epoch();
      } else if (loader.epoch() != epoch || !loader.inEpoch()) {
        throw endedElsewhere();
      }
      // Fetched into a local: close() on another thread clears `pending` at any moment.
      TensorList batch = loader.next();
      if (batch == null) {
        done = true;
      } else {
        batch.ownEntries();
        batch.swigMoveTo(current);
        if (closed) {  // closed on another thread while next ran: the batch goes with the pass
          current.closeAll();
          return closedUnderTheLoop();
        }
        pending = batch;
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

  // What a closed pass answers: no more batches, or, where it was closed before its epoch's end by
  // a newer pass or with its loader, why not.
  private boolean closedUnderTheLoop() {
    if (superseded && !done) throw endedElsewhere();
    if (loaderClosed && !done) throw new InvalidHandleException("the data loader was closed during this loop");
    return false;
  }

  private static IllegalStateException endedElsewhere() {
    return new IllegalStateException("this pass over the data loader was ended by another pass over it (a loop over "
        + "the same loader inside this one, or on another thread) before its epoch ended; loops over one loader cannot "
        + "nest");
  }

  // Closed because a newer pass of the loader starts: a later hasNext throws instead of ending quietly.
  void supersede() {
    superseded = true;
    close();
  }

  /** Releases the batch handed out last (unless kept) and, if the epoch is unfinished, ends it
   *  (DataLoader.endEpoch; not when the loader itself is being closed: freeing it ends its epoch).
   *  Closing again does nothing. */
  @Override
  public void close() {
    if (closed) return;
    loaderClosed = loader.isClosed();  // before closed: a loop on another thread reads them in that order
    closed = true;
    pending = null;
    try {
      current.closeAll();
    } finally {
      if (!done && !loaderClosed) loader.endEpoch();
    }
  }
}
