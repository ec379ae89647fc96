package ai.accelerate;

/** Runs when a profile's recorded cycle ends, with the step at which it ended (torch.profiler's
 *  on_trace_ready); an exception fails that profile step or end, with its message
 *  (AccelerateIOException). */
@FunctionalInterface
public interface TraceReadyFunction {
  void ready(long step) throws Exception;
}
