package ai.accelerate.test;

import ai.accelerate.*;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** The golden scenario of bindings/golden/golden.c through the Java binding, printed the same way
 *  (the bits of every number). Also a program, for the 2-process run: Golden OUT_FILE. */
public final class Golden {
  static final int N = 64, D = 8, C = 3, EPOCHS = 2;
  static final String SPEC = "[{\"type\":\"linear\",\"in_features\":8,\"out_features\":16},{\"type\":\"relu\"},"
      + "{\"type\":\"linear\",\"in_features\":16,\"out_features\":3}]";

  public static void main(String[] args) throws IOException {
    if (args.length != 1) {
      System.err.println("usage: Golden OUT_FILE");
      System.exit(2);
    }
    run(args[0]);
  }

  static void putFloats(StringBuilder out, String label, Tensor t) {
    float[] v = t.toFloatArray();
    out.append(label).append(' ').append(v.length);
    for (float f : v) out.append(String.format(" %08x", Float.floatToRawIntBits(f)));
    out.append('\n');
  }

  /** Runs the scenario and writes OUT.rank<N>; returns that path. */
  public static Path run(String outPrefix) throws IOException {
    float[] x = new float[N * D];
    long[] y = new long[N];
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < D; ++j) x[i * D + j] = (float) ((i * 7 + j * 3) % 17 - 8) / 16.0f;
      y[i] = (i * 5) % C;
    }
    StringBuilder out = new StringBuilder();
    long rank;
    try (Options ao = Options.accelerator().put("cpu", true).put("seed", 1234);
         Accelerator acc = new Accelerator(ao);
         Tensor xt = Tensor.of(x, N, D);
         Tensor yt = Tensor.of(y, N);
         TensorList fields = TensorList.of(xt, yt);
         Dataset ds = Dataset.fromTensors(fields);
         Options lo = Options.dataLoader().put("batch_size", 8).put("shuffle", true).put("seed", 7);
         DataLoader rawLoader = new DataLoader(ds, lo);
         Model rawModel = Model.fromSpec(SPEC);
         Options oo = Options.optimizer().put("lr", 0.01);
         Optimizer rawOpt = new Optimizer(rawModel, "adamw", oo);
         Options so = Options.scheduler().put("num_warmup_steps", 2).put("num_training_steps", 20);
         Scheduler rawSched = new Scheduler(rawOpt, "linear", so);
         Model model = acc.prepare(rawModel);
         Optimizer opt = acc.prepare(rawOpt);
         DataLoader loader = acc.prepare(rawLoader);
         Scheduler sched = acc.prepare(rawSched)) {
      rank = acc.processIndex();
      long steps = 0;
      for (int epoch = 0; epoch < EPOCHS; ++epoch) {
        for (TensorList batch : loader) {
          try (batch; Tensor bx = batch.get(0); Tensor by = batch.get(1)) {
            Tensor logits, loss;
            try (Scope step = acc.accumulate()) {
              logits = model.forward(bx);
              loss = Loss.crossEntropy(logits, by, Reduction.MEAN, 0.0);
              acc.backward(loss);
              opt.step();
              sched.step();
              opt.zeroGrad();
            }
            try (logits; loss; Tensor all = acc.gather(loss, "loss");
                 Tensor total = acc.reduce(logits, Reduction.SUM, "logits")) {
              out.append(String.format("loss %d %016x\n", steps, Double.doubleToRawLongBits(loss.item())));
              putFloats(out, "gather " + steps, all);
              putFloats(out, "reduce " + steps, total);
            }
            ++steps;
          }
        }
      }
      try (StringList names = model.parameterNames()) {
        for (String name : names.toList()) {
          try (Tensor p = model.parameter(name)) {
            putFloats(out, "param " + name, p);
          }
        }
      }
    }
    Path path = Path.of(outPrefix + ".rank" + rank);
    Files.writeString(path, out.toString(), StandardCharsets.UTF_8);
    return path;
  }
}
