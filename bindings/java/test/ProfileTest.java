package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** profile as a try-with-resources scope: the trace file and the operators' table. */
class ProfileTest {
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  @Test
  void profileWritesTheTraceAndTheTable(@TempDir Path dir) throws Exception {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         Options p = Options.profile().put("output_trace_dir", dir.toString()).put("record_shapes", true)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, acc::profileSummary);
      assertTrue(e.getMessage().contains("no profile has ended yet"), e.getMessage());
      try (Profile profile = acc.profile(p)) {
        try (Tensor x = Tensor.of(new float[] {1, 2}, 1, 2); Tensor y = model.forward(x)) {
          profile.step();
        }
        e = assertThrows(InvalidArgumentException.class, () -> acc.profile());
        assertTrue(e.getMessage().contains("already running"), e.getMessage());
      }
      String trace = Files.readString(dir.resolve("profile_0.json"));
      assertTrue(trace.contains("\"aten::addmm\""), trace.substring(0, Math.min(300, trace.length())));
      assertTrue(acc.profileSummary().contains("aten::addmm"));
    }
  }

  @Test
  void onTraceReadyReadsTheCycleThatEnded(@TempDir Path dir) throws Exception {
    try (Options o = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(o);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw)) {
      java.util.List<Long> steps = new java.util.ArrayList<>();
      String[] table = {""};
      acc.onTraceReady(step -> {
        steps.add(step);
        table[0] = acc.profileSummary();
        acc.exportChromeTrace(dir.resolve("cycle.json").toString());
      });
      try (Profile profile = acc.profile()) {
        try (Tensor x = Tensor.of(new float[] {1, 2}, 1, 2); Tensor y = model.forward(x)) {
          profile.step();
        }
      }
      assertEquals(java.util.List.of(1L), steps);
      assertTrue(table[0].contains("aten::addmm"), table[0]);
      assertTrue(Files.readString(dir.resolve("cycle.json")).contains("\"aten::addmm\""));
    }
  }
}
