package ai.accelerate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/** Native objects held by one owner (a tensor scope, a batch for the tensors taken from it, a loop
 *  over a loader for its current batch), closed together by closeAll. An object has at most one
 *  owner; closing it on its own, or keep(), takes it out. */
class Owner {
  private final Set<AutoCloseable> items = Collections.newSetFromMap(new IdentityHashMap<>());

  synchronized void add(AutoCloseable item) {
    items.add(item);
  }

  synchronized void remove(AutoCloseable item) {
    items.remove(item);
  }

  synchronized int size() {
    return items.size();
  }

  /** Closes every object held; the first failure is rethrown after all were tried. */
  void closeAll() {
    List<AutoCloseable> held;
    synchronized (this) {
      held = new ArrayList<>(items);
      items.clear();
    }
    RuntimeException first = null;
    for (AutoCloseable item : held) {
      try {
        item.close();
      } catch (Exception e) {
        if (first == null) first = e instanceof RuntimeException ? (RuntimeException) e : new IllegalStateException(e);
      }
    }
    if (first != null) throw first;
  }
}
