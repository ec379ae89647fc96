package ai.accelerate.test;

import ai.accelerate.*;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** The golden scenario of bindings/golden/golden.c through the Java binding, printed the same way
 *  (the bits of every number), checkpoint and resume included. Also a program, for the 2-process
 *  run: Golden OUT_FILE (the checkpoint goes to OUT_FILE.ckpt, the same folder on every rank). */
public final class Golden {
  static final int N = 64, D = 8, C = 3, EPOCHS = 2, STEPS_BEFORE_SAVE = 2;
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":8,\"out_features\":16},{\"type\":\"relu\"},"
      + "{\"type\":\"linear\",\"in_features\":16,\"out_features\":3}]";

  public static void main(String[] args) throws IOException {
    if (args.length != 1) {
      System.err.println("usage: Golden OUT_FILE");
      System.exit(2);
    }
    run(args[0]);
  }

  /** The registered custom state: the step counter that numbers the lines (8 little-endian bytes,
   *  as golden.c writes it). */
  static final class StepCounter implements CheckpointState {
    long steps;

    @Override
    public byte[] save() {
      return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(steps).array();
    }

    @Override
    public void load(byte[] state) {
      if (state.length != 8) throw new IllegalArgumentException("the step counter's state is not 8 bytes");
      steps = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }
  }

  /** Model, optimizer, scheduler and loader, raw and prepared; made the same way for the first run
   *  and for the resumed one. */
  static final class Objects implements AutoCloseable {
    final Options lo = Options.dataLoader().put("batch_size", 8).put("shuffle", true).put("seed", 7);
    final Options oo = Options.optimizer().put("lr", 0.01);
    final Options so = Options.scheduler().put("num_warmup_steps", 2).put("num_training_steps", 32);
    final DataLoader rawLoader;
    final Model rawModel;
    final Optimizer rawOpt;
    final Scheduler rawSched;
    final Model model;
    final Optimizer opt;
    final DataLoader loader;
    final Scheduler sched;

    Objects(Accelerator acc, Dataset ds) {
      rawLoader = new DataLoader(ds, lo);
      rawModel = Model.fromSpec(SPEC);
      rawOpt = new Optimizer(rawModel, "adamw", oo);
      rawSched = new Scheduler(rawOpt, "linear", so);
      model = acc.prepare(rawModel);
      opt = acc.prepare(rawOpt);
      loader = acc.prepare(rawLoader);
      sched = acc.prepare(rawSched);
    }

    @Override
    public void close() {
      for (AutoCloseable c : new AutoCloseable[] {sched, loader, opt, model, rawSched, rawOpt, rawModel, rawLoader, so, oo, lo}) {
        try {
          c.close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  static void putFloats(StringBuilder out, String label, Tensor t) {
    float[] v = t.toFloatArray();
    out.append(label).append(' ').append(v.length);
    for (float f : v) out.append(String.format(" %08x", Float.floatToRawIntBits(f)));
    out.append('\n');
  }

  /** Trains on up to maxBatches batches (-1: to the end of the epoch), printing each step. */
  static void train(StringBuilder out, Accelerator acc, Objects o, StepCounter counter, int maxBatches) {
    for (int done = 0; maxBatches < 0 || done < maxBatches; ++done) {
      TensorList next = o.loader.next();
      if (next == null) return;
      try (TensorList batch = next; Tensor bx = batch.get(0); Tensor by = batch.get(1)) {
        Tensor logits, loss;
        try (Scope step = acc.accumulate()) {
          logits = o.model.forward(bx);
          loss = Loss.crossEntropy(logits, by, Reduction.MEAN, 0.0);
          acc.backward(loss);
          o.opt.step();
          o.sched.step();
          o.opt.zeroGrad();
        }
        try (logits; loss; Tensor all = acc.gather(loss, "loss");
             Tensor total = acc.reduce(logits, Reduction.SUM, "logits")) {
          long s = counter.steps;
          out.append(String.format("loss %d %016x\n", s, Double.doubleToRawLongBits(loss.item())));
          putFloats(out, "gather " + s, all);
          putFloats(out, "reduce " + s, total);
        }
        ++counter.steps;
      }
    }
  }

  static void putParams(StringBuilder out, Model model) {
    try (StringList names = model.parameterNames()) {
      for (String name : names.toList()) {
        try (Tensor p = model.parameter(name)) {
          putFloats(out, "param " + name, p);
        }
      }
    }
  }

  /** The rest of the epoch after the checkpoint and the weights it ends with. */
  static String finishEpoch(Accelerator acc, Objects o, StepCounter counter) {
    StringBuilder text = new StringBuilder();
    train(text, acc, o, counter, -1);
    putParams(text, o.model);
    return text.toString();
  }

  /** Runs the scenario and writes OUT.rank<N>; returns that path. */
  public static Path run(String outPrefix) throws IOException {
    float[] x = new float[N * D];
    long[] y = new long[N];
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < D; ++j) x[i * D + j] = (float) ((i * 7 + j * 3) % 17 - 8) / 16.0f;
      y[i] = (i * 5) % C;
    }
    String ckpt = outPrefix + ".ckpt";
    StringBuilder out = new StringBuilder();
    StepCounter counter = new StepCounter();
    long rank;
    try (Options ao = Options.accelerator().put("cpu", true).put("seed", 1234);
         Accelerator acc = new Accelerator(ao);
         Tensor xt = Tensor.of(x, N, D);
         Tensor yt = Tensor.of(y, N);
         TensorList fields = TensorList.of(xt, yt);
         Dataset ds = Dataset.fromTensors(fields)) {
      rank = acc.processIndex();
      acc.registerForCheckpointing(counter);
      String continued, resumedText;
      try (Objects first = new Objects(acc, ds)) {
        for (int epoch = 0; epoch < EPOCHS; ++epoch) train(out, acc, first, counter, -1);
        putParams(out, first.model);
        // A checkpoint in the middle of the next epoch, then the rest of that epoch twice:
        // uninterrupted, and on fresh objects (from a scrambled RNG) restored from the checkpoint.
        train(out, acc, first, counter, STEPS_BEFORE_SAVE);
        acc.saveState(ckpt);
        out.append("saved at step ").append(counter.steps).append('\n');
        // The registered state's file in hex: every language must write the same bytes.
        out.append("custom_checkpoint_0.bin ");
        for (byte b : Files.readAllBytes(Path.of(ckpt, "custom_checkpoint_0.bin"))) out.append(String.format("%02x", b));
        out.append('\n');
        continued = finishEpoch(acc, first, counter);
        out.append("continued\n").append(continued);
        acc.freeMemory();
      }
      Accelerate.setSeed(98765);
      counter.steps = -1;
      try (Objects resumed = new Objects(acc, ds)) {
        acc.loadState(ckpt);
        out.append("resumed at step ").append(counter.steps).append('\n');
        resumedText = finishEpoch(acc, resumed, counter);
        out.append("resumed\n").append(resumedText);
      }
      Path path = Path.of(outPrefix + ".rank" + rank);
      Files.writeString(path, out.toString(), StandardCharsets.UTF_8);
      if (!continued.equals(resumedText))
        throw new IllegalStateException("rank " + rank + ": the resumed run differs from the uninterrupted one (see " + path + ")");
      return path;
    }
  }
}
