package ai.accelerate;

import java.util.Map;

/** A tracker written in Java (Accelerator.addTracker), called on the main process only. An
 *  exception fails the call that triggered it with its message (AccelerateIOException). */
public interface TrackerCallbacks {
  /** A run starts: its project name and hyper-parameters as a JSON object ("{}" when none). */
  default void init(String project, String configJson) throws Exception {}

  void log(Map<String, Double> values, long step) throws Exception;

  /** Texts of Accelerator.logText, by name at step; a tracker without this method leaves them. */
  default void logText(Map<String, String> texts, long step) throws Exception {}

  /** Images of Accelerator.logImages, by name at step, each a PNG file's bytes; a tracker without
   *  this method leaves them (and none are encoded for it). */
  default void logImages(Map<String, byte[]> images, long step) throws Exception {}

  /** A histogram of Accelerator.logHistogram, by name at step; a tracker without this method leaves
   *  them (and none is computed for it). */
  default void logHistogram(String name, Histogram histogram, long step) throws Exception {}

  /** The run ends. */
  default void finish() throws Exception {}
}
