package consumer;

import ai.accelerate.*;

/** Trains a small model for one epoch through the installed artifact (no -Djava.library.path: the
 *  jar carries its native libraries) and prints one line the test checks. Runs on 1 or N processes. */
public final class Main {
  /** The file a loaded library was mapped from (/proc/self/maps: the file a symlink such as
   *  libaccelerate.so.0 points to), for the test to check. */
  static String loadedFrom(String name) {
    try {
      for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps"))) {
        int at = line.indexOf('/');
        if (at >= 0 && line.substring(at).contains("/" + name)) return line.substring(at);
      }
    } catch (java.io.IOException e) {
      return "? (" + e.getMessage() + ")";
    }
    return "?";
  }

  public static void main(String[] args) {
    float[] x = new float[64 * 4];
    long[] y = new long[64];
    for (int i = 0; i < x.length; ++i) x[i] = (i % 13) / 13f;
    for (int i = 0; i < y.length; ++i) y[i] = i % 2;
    String spec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":2}]";
    try (Accelerator acc = new Accelerator(Options.accelerator().put("seed", 5));
         Tensor xt = Tensor.of(x, 64, 4);
         Tensor yt = Tensor.of(y, 64);
         TensorList fields = TensorList.of(xt, yt);
         Dataset ds = Dataset.fromTensors(fields);
         Options lo = Options.dataLoader().put("batch_size", 8);
         DataLoader loader = acc.prepare(new DataLoader(ds, lo));
         Model model = acc.prepare(Model.fromSpec(spec));
         Optimizer opt = acc.prepare(new Optimizer(model, "sgd", Options.optimizer().put("lr", 0.1)))) {
      int steps = 0;
      for (TensorList batch : loader) {
        try (TensorScope step = Tensors.scope()) {
          Tensor loss = Loss.crossEntropy(model.forward(batch.get(0)), batch.get(1), Reduction.MEAN, 0.0);
          acc.backward(loss);
          opt.step();
          opt.zeroGrad();
        }
        ++steps;
      }
      System.out.println("java consumer: accelerate " + Accelerate.version() + ", rank " + acc.processIndex() + " of "
          + acc.numProcesses() + ", " + steps + " steps, libaccelerate from " + loadedFrom("libaccelerate.so"));
    }
  }
}
