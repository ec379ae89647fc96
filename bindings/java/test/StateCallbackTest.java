package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Checkpoint state, pre-hooks, program trackers and LR lambdas as Java lambdas: called as the C
 *  API documents; an exception comes back as AccelerateIOException with its message. */
class StateCallbackTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  static Accelerator newAccelerator(Path dir) {
    try (Options o = Options.accelerator().put("cpu", true).put("project_dir", dir.toString())) {
      return new Accelerator(o);
    }
  }

  @Test
  void customStateAndHooksGoThroughSaveAndLoad() throws Exception {
    List<String> hooks = new ArrayList<>();
    byte[][] loaded = {null};
    try (Accelerator acc = newAccelerator(dir)) {
      acc.registerForCheckpointing(new CheckpointState() {
        public byte[] save() { return new byte[] {1, 2, 3}; }
        public void load(byte[] state) { loaded[0] = state; }
      });
      acc.registerSaveStatePreHook(d -> hooks.add("save " + d));
      acc.registerLoadStatePreHook(d -> hooks.add("load " + d));
      assertEquals(0, acc.iteration());
      String written = acc.saveState(dir.resolve("ckpt").toString());
      assertEquals(1, acc.iteration());
      acc.loadState(written);
      assertArrayEquals(new byte[] {1, 2, 3}, loaded[0]);
      assertEquals(List.of("save " + written, "load " + written), hooks);
    }
  }

  @Test
  void hooksWithTheirModelsSaveAndLoadAModelThemselves() throws Exception {
    List<Long> seen = new ArrayList<>();
    CheckpointModels[] kept = {null};
    try (Accelerator acc = newAccelerator(dir);
         Model raw0 = Model.fromSpec(SPEC); Model raw1 = Model.fromSpec(SPEC);
         Model first = acc.prepare(raw0); Model second = acc.prepare(raw1)) {
      acc.registerSaveStatePreHook((models, d) -> {
        kept[0] = models;
        for (int i = 0; i < models.size(); ++i) seen.add(models.index(i));
        try (Model m = models.get(0); TensorList state = m.stateDict()) {
          state.saveSafetensors(d + "/own.safetensors");
        }
        models.remove(0);  // Accelerate's weights.pop(0)
      });
      acc.registerLoadStatePreHook((models, d) -> {
        try (Model m = models.get(0)) {
          m.loadSafetensors(d + "/own.safetensors", true).close();
        }
        models.remove(0);
      });
      String written = acc.saveState(dir.resolve("ckpt").toString());
      assertEquals(List.of(0L, 1L), seen);
      assertTrue(Files.exists(Path.of(written, "own.safetensors")));
      assertTrue(Files.exists(Path.of(written, "model.safetensors")));  // the second model's
      assertFalse(Files.exists(Path.of(written, "model_1.safetensors")));
      assertThrows(IllegalStateException.class, () -> kept[0].size());
      float[] before;
      try (Tensor w = first.parameter("0.weight")) {
        before = w.toFloatArray();
      }
      try (TensorList zeros = TensorList.of(); Tensor z = Tensor.of(new float[2], 1, 2)) {
        zeros.append("0.weight", z);
        first.loadStateDict(zeros, false);
      }
      acc.loadState(written);
      try (Tensor w = first.parameter("0.weight")) {
        assertArrayEquals(before, w.toFloatArray());
      }
    }
  }

  @Test
  void aThrowingHookAbortsTheSaveWithItsMessage() throws Exception {
    try (Accelerator acc = newAccelerator(dir)) {
      acc.registerSaveStatePreHook(d -> { throw new IllegalStateException("disk quota"); });
      AccelerateIOException e = assertThrows(AccelerateIOException.class, () -> acc.saveState(dir.resolve("ckpt").toString()));
      assertTrue(e.getMessage().contains("disk quota"), e.getMessage());
      assertFalse(Files.exists(dir.resolve("ckpt")));
    }
  }

  @Test
  void aRemovedHookRunsNoMore() throws Exception {
    List<String> hooks = new ArrayList<>();
    RemovableHandle save;
    try (Accelerator acc = newAccelerator(dir)) {
      save = acc.registerSaveStatePreHook(d -> hooks.add("save"));
      RemovableHandle load = acc.registerLoadStatePreHook(d -> hooks.add("load"));
      String written = acc.saveState(dir.resolve("a").toString());
      save.remove();
      load.remove();
      save.remove();  // again: nothing
      acc.saveState(dir.resolve("b").toString());
      acc.loadState(written);
      assertEquals(List.of("save"), hooks);
    }
    save.remove();  // the closed accelerator's hooks went with it
  }

  @Test
  void aProgramTrackerReceivesTheRun() throws Exception {
    List<String> calls = new ArrayList<>();
    boolean[] fail = {false};
    try (Accelerator acc = newAccelerator(dir)) {
      acc.addTracker("mine", new TrackerCallbacks() {
        public void init(String project, String config) { calls.add("init " + project + " " + config); }
        public void log(Map<String, Double> values, long step) throws Exception {
          if (fail[0]) throw new java.io.IOException("tracker offline");
          values.forEach((k, v) -> calls.add("log " + step + " " + k + "=" + v));
        }
        public void finish() { calls.add("finish"); }
      });
      try (StringList names = acc.trackerNames()) {
        assertEquals(List.of("mine"), names.toList());
      }
      acc.initTrackers("run1", "{\"lr\":0.5}");
      acc.log(Map.of("loss", 1.5), -1);
      acc.logScalar("acc", 0.25, 7);
      fail[0] = true;
      AccelerateIOException e = assertThrows(AccelerateIOException.class, () -> acc.logScalar("loss", 1, -1));
      assertTrue(e.getMessage().contains("tracker offline"), e.getMessage());
      acc.endTraining();
    }
    assertEquals(List.of("init run1 {\"lr\":0.5}", "log 0 loss=1.5", "log 7 acc=0.25", "finish"), calls);
  }

  // backward(loss, retainGraph, createGraph): two losses of one forward back-propagate in turn;
  // without retaining the graph the second is refused.
  @Test
  void backwardRetainsTheGraphOnRequest() {
    try (Accelerator acc = newAccelerator(dir);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         Tensor x = Tensor.of(new float[] {1, 2}, 1, 2);
         Tensor out = model.forward(x);
         Tensor first = out.sum();
         Tensor second = out.mean()) {
      acc.backward(first, true, false);
      acc.backward(second);
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> acc.backward(first));
      assertTrue(e.getMessage().contains("second time"), e.getMessage());
    }
  }

  // Texts reach a tracker's logText as they were given (a line break, a character outside the BMP);
  // its log sees numbers only, and a tracker without logText leaves texts.
  @Test
  void textsReachTheTrackersLogText() throws Exception {
    List<String> calls = new ArrayList<>();
    String sample = "once upon a time\nthere was a \ud83d\ude80";
    try (Accelerator acc = newAccelerator(dir)) {
      acc.addTracker("texts", new TrackerCallbacks() {
        public void log(Map<String, Double> values, long step) { calls.add("log " + step); }
        public void logText(Map<String, String> texts, long step) {
          texts.forEach((k, v) -> calls.add("text " + step + " " + k + "=" + v));
        }
      });
      acc.addTracker("numbers", (values, step) -> calls.add("numbers " + step));
      acc.initTrackers("run", null);
      acc.logScalar("loss", 0.5, -1);
      acc.logText("sample", sample, -1);
      InvalidArgumentException nul = assertThrows(InvalidArgumentException.class, () -> acc.logText("a", "b\0c", 5));
      assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
      acc.endTraining();
    }
    assertEquals(List.of("log 0", "numbers 0", "text 1 sample=" + sample), calls);
  }

  // Images reach TensorBoard's event file and a tracker's logImages as PNGs under their names; a
  // tracker without logImages does not see them, though the step advances; a layout the tensor does
  // not have is refused.
  @Test
  void imagesReachTensorBoardAndImageTrackers() throws Exception {
    List<String> calls = new ArrayList<>();
    String events;
    try (Options o = Options.accelerator().put("cpu", true).put("project_dir", dir.toString())
                         .put("log_with", "tensorboard");
         Accelerator acc = new Accelerator(o);
         Tensor batch = Tensor.of(new float[] {0f, 0.25f, 0.5f, 1f, 0.75f, 0.5f, 0.25f, 0f}, 2, 1, 2, 2)) {
      acc.addTracker("numbers", (values, step) -> calls.add("numbers " + step));
      acc.addTracker("pictures", new TrackerCallbacks() {
        public void log(Map<String, Double> values, long step) {}
        public void logImages(Map<String, byte[]> images, long step) {
          images.forEach((k, png) -> calls.add(
              "image " + step + " " + k + " " + new String(png, 0, 4, java.nio.charset.StandardCharsets.ISO_8859_1)));
        }
      });
      acc.initTrackers("run", null);
      acc.logImages("samples", batch, 3, null);
      acc.logImages(Map.of("gray", batch), -1, "NCWH");
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> acc.logImages("bad", batch, -1, "CHW"));
      assertTrue(e.getMessage().contains("dataformats"), e.getMessage());
      acc.logScalar("loss", 0.5, -1);
      acc.endTraining();
      events = new String(Files.readAllBytes(Path.of(acc.trackerPath("tensorboard"))),
                          java.nio.charset.StandardCharsets.ISO_8859_1);
    }
    assertEquals(List.of("image 3 samples \u0089PNG", "image 4 gray \u0089PNG", "numbers 5"), calls);
    assertTrue(events.contains("samples") && events.contains("gray") && events.contains("\u0089PNG"));
  }

  // logHistogram: an event of TensorBoard's with the histogram, at its step, and the same histogram
  // to a tracker's logHistogram (a tracker without one sees none); bins of numpy's strategies are
  // refused as not built.
  @Test
  void histogramsReachTensorBoardAndHistogramTrackers() throws Exception {
    String events;
    List<String> calls = new ArrayList<>();
    List<Histogram> received = new ArrayList<>();
    try (Options o = Options.accelerator().put("cpu", true).put("project_dir", dir.toString())
                         .put("log_with", "tensorboard");
         Accelerator acc = new Accelerator(o);
         Tensor w = Tensor.of(new float[] {0.5f, -1f, 2f, 2f}, 2, 2)) {
      acc.addTracker("numbers", (values, step) -> calls.add("numbers " + step));
      acc.addTracker("histograms", new TrackerCallbacks() {
        public void log(Map<String, Double> values, long step) {}
        public void logHistogram(String name, Histogram histogram, long step) {
          calls.add("histogram " + step + " " + name);
          received.add(histogram);
        }
      });
      acc.initTrackers("run", null);
      acc.logHistogram("layer/weights", w, 3);
      acc.logHistogram("coarse", w, -1, "4", 0);
      // Accelerate's log_kwargs: SummaryWriter's walltime is taken; a keyword jsonl's log lacks, refused.
      acc.log(Map.of("loss", 0.5), 5, "{\"tensorboard\": {\"walltime\": 1234.5}}");
      InvalidArgumentException k = assertThrows(InvalidArgumentException.class,
          () -> acc.log(Map.of("loss", 0.5), 6, "{\"tensorboard\": {\"when\": 1}}"));
      assertTrue(k.getMessage().contains("takes no keyword argument \"when\""), k.getMessage());
      // Texts and groups take log_kwargs too: add_text's walltime; add_scalars refuses add_scalar's new_style.
      acc.logText(Map.of("note", "hi"), 6, "{\"tensorboard\": {\"walltime\": 1.5}}");
      InvalidArgumentException g = assertThrows(InvalidArgumentException.class,
          () -> acc.logScalars("loss", Map.of("train", 0.5), 7, "{\"tensorboard\": {\"new_style\": true}}"));
      assertTrue(g.getMessage().contains("takes no keyword argument \"new_style\""), g.getMessage());
      UnsupportedException e = assertThrows(UnsupportedException.class, () -> acc.logHistogram("w", w, -1, "auto", 0));
      assertTrue(e.getMessage().contains("bin-width strategies"), e.getMessage());
      acc.endTraining();
      events = new String(Files.readAllBytes(Path.of(acc.trackerPath("tensorboard"))),
                          java.nio.charset.StandardCharsets.ISO_8859_1);
    }
    assertTrue(events.contains("layer/weights") && events.contains("coarse"), "both histograms are in the events");
    assertEquals(List.of("histogram 3 layer/weights", "histogram 4 coarse", "numbers 5"), calls);
    // 4 equal-width bins over [-1, 2]: -1 | (none) | 0.5 | 2, 2; an empty bin leads, as in torch.
    Histogram coarse = received.get(1);
    assertArrayEquals(new double[] {-1, -0.25, 0.5, 1.25, 2}, coarse.bucketLimits());
    assertArrayEquals(new double[] {0, 1, 0, 1, 2}, coarse.bucketCounts());
    assertEquals(-1, coarse.min);
    assertEquals(2, coarse.max);
    assertEquals(4, coarse.num);
    assertEquals(3.5, coarse.sum);
    assertEquals(9.25, coarse.sumSquares);
  }

  // log_with "mlflow" with init_kwargs: the run's name and parameters in MLflow's file store, a
  // number as a metric line at its step; a keyword the tracker does not take is refused.
  @Test
  void mlflowRunsTakeInitKwargs() throws Exception {
    String runDir;
    try (Options o = Options.accelerator().put("cpu", true).put("project_dir", dir.toString())
                         .put("log_with", "mlflow,tensorboard");
         Accelerator acc = new Accelerator(o)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> acc.initTrackers("run", null, "{\"mlflow\": {\"run_nme\": \"x\"}}"));
      assertTrue(e.getMessage().contains("run_nme"), e.getMessage());
      acc.initTrackers("run", "{\"lr\": 0.5}", "{\"mlflow\": {\"run_name\": \"baseline\"}}");
      acc.logScalar("loss", 1.25, 3);
      Path config = Files.writeString(dir.resolve("config.yaml"), "lr: 0.5\n");
      acc.logArtifact("mlflow", config.toString(), "configs");
      UnsupportedException u = assertThrows(UnsupportedException.class,
          () -> acc.logArtifact("tensorboard", config.toString(), null));
      assertTrue(u.getMessage().contains("keeps no artifacts"), u.getMessage());
      acc.endTraining();
      runDir = acc.trackerPath("mlflow");
    }
    assertEquals("lr: 0.5\n", Files.readString(Path.of(runDir, "artifacts", "configs", "config.yaml")));
    assertEquals("baseline", Files.readString(Path.of(runDir, "tags", "mlflow.runName")));
    assertEquals("0.5", Files.readString(Path.of(runDir, "params", "lr")));
    assertTrue(Files.readString(Path.of(runDir, "metrics", "loss")).matches("\\d+ 1\\.25 3\\n"));
    assertTrue(Files.readString(Path.of(runDir, "meta.yaml")).contains("status: 3"));
  }

  // A dict value (logScalars) reaches a tracker as "main/name" values, and TensorBoard as add_scalars'
  // folder per name.
  @Test
  void aGroupOfScalarsIsLoggedUnderItsMainTag() throws Exception {
    List<String> calls = new ArrayList<>();
    try (Options o = Options.accelerator().put("cpu", true).put("project_dir", dir.toString())
                         .put("log_with", "tensorboard");
         Accelerator acc = new Accelerator(o)) {
      acc.addTracker("mine", (values, step) -> calls.add(step + " " + new java.util.TreeMap<>(values)));
      acc.initTrackers("run", null);
      acc.logScalars("loss", Map.of("train", 0.5, "eval", 0.25), -1);
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> acc.logScalars("loss", Map.of("../x", 1.0), -1));
      assertTrue(e.getMessage().contains("out of the run's folder"), e.getMessage());
      acc.endTraining();
    }
    assertEquals(List.of("0 {loss/eval=0.25, loss/train=0.5}"), calls);
    assertTrue(Files.isDirectory(dir.resolve("run/loss_train")) && Files.isDirectory(dir.resolve("run/loss_eval")));
  }

  // Metric names and the project cross as they are: a newline, a character outside the BMP.
  @Test
  void aTrackerReceivesNamesAsTheyWereGiven() throws Exception {
    List<String> seen = new ArrayList<>();
    String smile = "loss \ud83d\ude00";
    try (Accelerator acc = newAccelerator(dir)) {
      acc.addTracker("mine", new TrackerCallbacks() {
        public void init(String project, String config) { seen.add(project); }
        public void log(Map<String, Double> values, long step) { seen.addAll(new java.util.TreeSet<>(values.keySet())); }
        public void finish() {}
      });
      acc.initTrackers("run \ud83d\ude80", null);
      acc.log(Map.of(smile, 1.0, "a\nb", 2.0), 0);
      InvalidArgumentException nul = assertThrows(InvalidArgumentException.class, () -> acc.log(Map.of("a\0b", 1.0), 1));
      assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
    }
    assertEquals(List.of("run \ud83d\ude80", "a\nb", smile), seen);
  }

  // A tracker refused for a NUL in its name is not kept anywhere: the library never took it, so
  // nothing would ever release it.
  @Test
  void aTrackerRefusedForItsNameIsNotKept() throws Exception {
    try (Accelerator acc = newAccelerator(dir)) {
      java.lang.ref.WeakReference<TrackerCallbacks> refused = refuseTrackerNamedWithNul(acc);
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (refused.get() != null && System.nanoTime() < deadline) {
        System.gc();
        Thread.sleep(10);
      }
      assertNull(refused.get(), "the refused tracker is still reachable");
      try (StringList names = acc.trackerNames()) {
        assertEquals(0, names.size());
      }
    }
  }

  private static java.lang.ref.WeakReference<TrackerCallbacks> refuseTrackerNamedWithNul(Accelerator acc) {
    TrackerCallbacks tracker = new TrackerCallbacks() {  // a new object (a lambda without captures is shared)
      public void log(Map<String, Double> values, long step) {}
    };
    InvalidArgumentException nul = assertThrows(InvalidArgumentException.class, () -> acc.addTracker("a\0b", tracker));
    assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
    return new java.lang.ref.WeakReference<>(tracker);
  }

  // Names cross whole (a newline is part of a name, never a separator), and a negative group index
  // is refused by its own value.
  @Test
  void parameterNamesCrossWholeAndNegativeIndicesAreRefused() {
    try (Model model = Model.fromSpec(SPEC); Optimizer opt = new Optimizer(model, "sgd", null)) {
      InvalidArgumentException joined =
          assertThrows(InvalidArgumentException.class, () -> opt.addParamGroup(List.of("0.weight\n0.bias"), null));
      assertTrue(joined.getMessage().contains("0.weight\n0.bias"), joined.getMessage());
      assertEquals(1, opt.numParamGroups());
      InvalidArgumentException negative = assertThrows(InvalidArgumentException.class, () -> opt.getLr(-1));
      assertTrue(negative.getMessage().contains("group is negative: -1"), negative.getMessage());
      opt.addParamGroup(List.of("0.bias"), null);
      assertEquals(2, opt.numParamGroups());
    }
  }

  @Test
  void anLrLambdaSetsTheRates() {
    try (Model model = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 0.8);
         Optimizer opt = new Optimizer(model, "sgd", oo);
         Scheduler sched = Scheduler.fromLambda(opt, step -> {
           if (step == 3) throw new IllegalArgumentException("no step 3");
           return Math.pow(0.5, step);
         })) {
      assertEquals(0.8, opt.getLr(0));
      sched.step();
      sched.step();
      assertEquals(0.2, opt.getLr(0));
      AccelerateIOException e = assertThrows(AccelerateIOException.class, sched::step);
      assertTrue(e.getMessage().contains("no step 3"), e.getMessage());
      assertEquals(0.2, opt.getLr(0));
    }
  }

  @Test
  void aMultiplicativeScheduleChainedWithAnotherMovesTheRateBefore() {
    try (Model model = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 0.8);
         Optimizer opt = new Optimizer(model, "sgd", oo);
         Options co = Options.scheduler().put("factor", 0.5).put("total_iters", 2);
         Scheduler sched = Scheduler.fromMultiplicative(opt, step -> {
           if (step == 4) throw new IllegalArgumentException("no step 4");
           return 0.5;
         })) {
      sched.chain("constant_lr", co);  // PyTorch's ChainedScheduler([MultiplicativeLR, ConstantLR])
      assertEquals(0.4, opt.getLr(0));
      sched.step();
      assertEquals(0.2, opt.getLr(0));
      sched.step();
      assertEquals(0.2, opt.getLr(0));  // halved, then the constant's factor undone
      sched.step();
      assertEquals(0.1, sched.getLastLr(0));
      AccelerateIOException e = assertThrows(AccelerateIOException.class, sched::step);
      assertTrue(e.getMessage().contains("no step 4"), e.getMessage());
      assertEquals(0.1, opt.getLr(0));
      assertThrows(InvalidArgumentException.class, () -> sched.chain("exponential", null));
    }
  }

  @Test
  void eachGroupHasItsOwnFunctionAndACyclicScheduleTakesAScale() {
    try (Model model = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 0.8).put("momentum", 0.9);
         Optimizer opt = new Optimizer(model, "sgd", oo);
         Options bias = Options.optimizer().put("lr", 0.4)) {
      opt.addParamGroup(List.of("0.bias"), bias);
      List<LrLambdaFunction> fns = List.of(step -> 0.5, step -> {
        if (step == 1) throw new IllegalArgumentException("no step 1");
        return 0.25;
      });
      try (Scheduler sched = Scheduler.fromLambdas(opt, fns)) {  // PyTorch's LambdaLR(opt, [f0, f1])
        assertEquals(0.4, opt.getLr(0));
        assertEquals(0.1, opt.getLr(1));
        AccelerateIOException e = assertThrows(AccelerateIOException.class, sched::step);
        assertTrue(e.getMessage().contains("parameter group 1 at step 1"), e.getMessage());
        assertEquals(0.4, opt.getLr(0));
      }
      InvalidArgumentException wrongCount =
          assertThrows(InvalidArgumentException.class, () -> Scheduler.fromMultiplicatives(opt, List.of(step -> 0.5)));
      assertTrue(wrongCount.getMessage().contains("expected 2 factors"), wrongCount.getMessage());
      try (Options co = Options.scheduler().put("base_lr", 0.1).put("max_lr", 0.5).put("step_size_up", 2)
                            .put("scale_mode", "iterations");
           Scheduler cyclic = Scheduler.fromCyclic(opt, co, x -> 0.5)) {
        cyclic.step();  // halfway up, the height halved: 0.1 + (0.5 - 0.1) * 0.5 * 0.5
        assertEquals(0.2, opt.getLr(0), 1e-15);
        assertEquals(0.9 - (0.9 - 0.8) * 0.5 * 0.5, opt.getHyperparameter(0, "momentum"), 1e-15);
      }
    }
  }

  @Test
  void saveStateDictProgressAndAutocast() throws Exception {
    try (Accelerator acc = newAccelerator(dir);
         Model raw = Model.fromSpec(SPEC);
         Model model = acc.prepare(raw);
         TensorList state = acc.getStateDict(model, true)) {
      assertEquals("0.weight", state.name(0));
      String file = dir.resolve("w.safetensors").toString();
      acc.save(state, file);
      try (TensorList back = TensorList.loadSafetensors(file); Tensor w = back.find("0.weight");
           Tensor p = model.parameter("0.weight")) {
        assertArrayEquals(p.toFloatArray(), w.toFloatArray());
      }
      try (Progress p = new Progress(acc, 4, "steps")) {
        p.update(2);
        p.setPostfix("loss 0.5");
        p.finish();
      }
      try (Scope s = acc.autocast(false); Tensor t = Tensor.of(new float[] {1, 2}, 2); Tensor sum = t.sum()) {
        assertEquals(3.0, sum.item());
      }
    }
  }
}
