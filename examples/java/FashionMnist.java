// FashionMnist.java — examples/c/fashion_mnist.c through the Java binding: a small CNN trained on
// Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//   java -Djava.library.path=build/bindings/java -cp build/bindings/java/accelerate.jar:build/bindings/java/fashion-mnist.jar \
//        FashionMnist [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]
//                     [--data DIR] [--save FILE.pt] [--min-accuracy PCT]
//
// Exits 3 when the test accuracy is below --min-accuracy, 2 on a bad command line (before anything is
// trained: a --save path whose folder is missing too), 1 on an error; --help lists the flags.
import ai.accelerate.*;

public final class FashionMnist {
  static final String MODEL =
      "[{\"type\":\"conv2d\",\"in_channels\":1,\"out_channels\":32,\"kernel_size\":3,\"padding\":1},"
      + " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2},"
      + " {\"type\":\"conv2d\",\"in_channels\":32,\"out_channels\":64,\"kernel_size\":3,\"padding\":1},"
      + " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2},"
      + " {\"type\":\"flatten\"},"
      + " {\"type\":\"linear\",\"in_features\":3136,\"out_features\":128}, {\"type\":\"relu\"},"
      + " {\"type\":\"dropout\",\"p\":0.25},"
      + " {\"type\":\"linear\",\"in_features\":128,\"out_features\":10}]";

  int epochs = 3, batchSize = 64;
  double lr = 2e-3, minAccuracy = 0;
  long trainSamples = 0, testSamples = 0;
  String data = "/usr/share/datasets/fashion-mnist", save = "fashion_mnist.pt";

  static final String USAGE =
      "usage: FashionMnist [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]\n"
      + "                   [--data DIR] [--save FILE] [--min-accuracy PERCENT]\n"
      + "  --epochs N            training epochs (default 3)\n"
      + "  --batch-size N        batch size per process (default 64)\n"
      + "  --lr X                AdamW's learning rate (default 0.002)\n"
      + "  --train-samples N     use only the first N training samples (default 0: all)\n"
      + "  --test-samples N      use only the first N test samples (default 0: all)\n"
      + "  --data DIR            folder of the IDX files (default /usr/share/datasets/fashion-mnist)\n"
      + "  --save FILE           TorchScript file for the trained model (default fashion_mnist.pt; \"\": none)\n"
      + "  --min-accuracy PCT    exit 3 below this test accuracy in percent (default 0)\n"
      + "Exits 2 on a bad command line, before anything is trained.\n";
  static final java.util.Set<String> TAKES_VALUE = java.util.Set.of("--epochs", "--batch-size", "--lr",
      "--train-samples", "--test-samples", "--data", "--save", "--min-accuracy");

  public static void main(String[] argv) {
    FashionMnist a = new FashionMnist();
    for (int i = 0; i < argv.length; i += 2) {
      if (argv[i].equals("--help") || argv[i].equals("-h")) {
        System.out.print(USAGE);
        System.exit(0);
      }
      if (!TAKES_VALUE.contains(argv[i])) usage("unknown argument " + argv[i] + "\n" + USAGE);
      if (i + 1 >= argv.length) usage(argv[i] + " needs a value\n" + USAGE);
      String v = argv[i + 1];
      switch (argv[i]) {
        case "--epochs": a.epochs = (int) wholeNumber(argv[i], v, 1, Integer.MAX_VALUE); break;
        case "--batch-size": a.batchSize = (int) wholeNumber(argv[i], v, 1, Integer.MAX_VALUE); break;
        case "--lr": a.lr = number(argv[i], v); break;
        case "--train-samples": a.trainSamples = wholeNumber(argv[i], v, 0, Long.MAX_VALUE); break;
        case "--test-samples": a.testSamples = wholeNumber(argv[i], v, 0, Long.MAX_VALUE); break;
        case "--data": a.data = v; break;
        case "--save": a.save = v; break;
        default: a.minAccuracy = number(argv[i], v); break;  // --min-accuracy
      }
    }
    // The model is saved after training: a path that cannot take the file is refused now, not then.
    checkSavePath(a.save);
    try {
      System.exit(a.run() >= a.minAccuracy ? 0 : 3);
    } catch (AccelerateException e) {
      System.err.println("error: " + e.status() + ": " + e.getMessage());
      System.exit(1);
    }
  }

  /** A bad command line: says what is wrong on stderr and exits 2. */
  static void usage(String message) {
    System.err.print(message.endsWith("\n") ? message : message + "\n");
    System.exit(2);
  }

  /** A whole number in [least, most] for {@code flag}, else a usage error (as examples/c/fashion_mnist.c). */
  static long wholeNumber(String flag, String v, long least, long most) {
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      usage(v.matches("[+-]?[0-9]+") ? flag + " must be from " + least + " to " + most + ", got " + v
                                     : flag + " takes a whole number, got '" + v + "'");
      return 0;
    }
    if (n < least || n > most) usage(flag + " must be from " + least + " to " + most + ", got " + n);
    return n;
  }

  /** A finite decimal number for {@code flag} ("1.5", "2e-3"), else a usage error. */
  static double number(String flag, String v) {
    // Double.parseDouble alone would take "1.5d", "0x1p3", "NaN" and "Infinity".
    if (!v.matches("[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?")) {
      usage(flag + " takes a number, got '" + v + "'");
    }
    double x = Double.parseDouble(v);
    if (!Double.isFinite(x)) usage(flag + " must be a finite number, got '" + v + "'");
    return x;
  }

  /** Refuses a --save path the TorchScript file could not be written to: an existing folder, or a
   *  file whose folder does not exist. Creates nothing. */
  static void checkSavePath(String path) {
    if (path.isEmpty()) return;  // no file
    if (new java.io.File(path).isDirectory()) usage("--save " + path + " is a folder; give a file name");
    if (path.endsWith("/")) usage("--save " + path + " ends with '/'; give a file name");
    int slash = path.lastIndexOf('/');
    if (slash < 0) return;  // the current folder
    String folder = slash == 0 ? "/" : path.substring(0, slash);  // as written: "missing/../x.pt" needs missing/
    java.io.File f = new java.io.File(folder);
    if (!f.isDirectory()) {
      usage("--save " + path + (f.exists() ? ": " + folder + " is not a folder" : ": the folder " + folder + " does not exist"));
    }
  }

  Dataset loadSplit(String split, long limit) {
    Dataset ds = Dataset.fromIdx(data + "/" + split + "-images-idx3-ubyte.gz", data + "/" + split + "-labels-idx1-ubyte.gz");
    if (limit <= 0 || limit >= ds.size()) return ds;
    try (ds) {
      return ds.subset(0, limit);
    }
  }

  /** Sums values over the job's processes (a no-op on one process). */
  static double[] sumAcrossProcesses(Accelerator acc, double... values) {
    try (Tensor local = Tensor.of(values, values.length);
         Tensor total = acc.reduce(local, Reduction.SUM, "sum_across_processes")) {
      return total.toDoubleArray();
    }
  }

  /** Test accuracy in percent over every process's share of the test split. */
  static double evaluate(Accelerator acc, Model model, DataLoader loader) {
    long correct = 0, seen = 0;
    model.setTraining(false);
    // The loop owns each batch and the tensors taken from it; the scope owns what the step makes.
    for (TensorList batch : loader) {
      try (TensorScope step = Tensors.scope()) {
        Tensor y = batch.get(1);
        correct += model.forwardNoGrad(batch.get(0)).argmax(1, false).countEqual(y);
        seen += y.numel();
      }
    }
    model.setTraining(true);
    double[] counts = sumAcrossProcesses(acc, correct, seen);
    return counts[1] > 0 ? 100.0 * counts[0] / counts[1] : 0.0;
  }

  double run() {
    // 1. The accelerator: settings from the program, else from accelerate-launch's environment.
    try (Options accOpts = Options.accelerator().put("seed", 42);
         Accelerator acc = new Accelerator(accOpts);
         Dataset train = loadSplit("train", trainSamples);
         Dataset test = loadSplit("t10k", testSamples);
         Options loaderOpts = Options.dataLoader().put("batch_size", batchSize).put("shuffle", true);
         DataLoader rawTrain = new DataLoader(train, loaderOpts);
         Options testOpts = Options.dataLoader().put("batch_size", 1000).put("shuffle", false);
         DataLoader rawTest = new DataLoader(test, testOpts);
         Model rawModel = Model.fromSpec(MODEL);
         Options optOpts = Options.optimizer().put("lr", lr);
         Optimizer rawOpt = new Optimizer(rawModel, "adamw", optOpts)) {
      long stepsPerEpoch = rawTrain.length();
      try (Options schedOpts = Options.scheduler().put("num_warmup_steps", stepsPerEpoch / 10)
               .put("num_training_steps", stepsPerEpoch * epochs);
           Scheduler rawSched = new Scheduler(rawOpt, "cosine", schedOpts);
           // 2. Prepare: everything moves to the accelerator's device and gets Accelerate's semantics.
           Model model = acc.prepare(rawModel);
           Optimizer opt = acc.prepare(rawOpt);
           DataLoader trainLoader = acc.prepare(rawTrain);
           Scheduler sched = acc.prepare(rawSched);
           DataLoader testLoader = acc.prepare(rawTest)) {
        acc.print(String.format("training on %d process(es), %s: %d samples, %d steps per epoch",
            acc.numProcesses(), acc.device(), train.size(), stepsPerEpoch));
        for (int epoch = 0; epoch < epochs; ++epoch) {
          long start = System.nanoTime();
          double lossSum = 0, batches = 0, samples = 0;
          for (TensorList batch : trainLoader) {  // the loop releases each batch and its tensors
            Tensor x = batch.get(0), y = batch.get(1);
            try (TensorScope tensors = Tensors.scope(); Scope step = acc.accumulate()) {
              Tensor loss = Loss.crossEntropy(model.forward(x), y, Reduction.MEAN, 0.0);  // the scope's
              // 3. acc.backward instead of the loss's own backward.
              acc.backward(loss);
              opt.step();
              sched.step();
              opt.zeroGrad();
              lossSum += loss.item();
              batches += 1;
              samples += y.numel();
            }
          }
          double[] totals = sumAcrossProcesses(acc, lossSum, batches, samples);
          acc.print(String.format("epoch %d/%d  loss %.4f  %.0f samples/s", epoch + 1, epochs,
              totals[1] > 0 ? totals[0] / totals[1] : 0.0, totals[2] / ((System.nanoTime() - start) * 1e-9)));
        }
        double accuracy = evaluate(acc, model, testLoader);
        acc.print(String.format("test accuracy %.2f%%", accuracy));
        if (save != null && !save.isEmpty()) {
          if (acc.isMainProcess()) {  // one file for the job, as Accelerate's recipe writes it
            try (Model unwrapped = acc.unwrapModel(model)) {
              unwrapped.saveTorchscript(save);
            }
          }
          acc.print("saved the trained model to " + save + " (TorchScript)");
          acc.saveModel(model, "fashion_mnist_model", "");
          acc.print("saved the weights to fashion_mnist_model/model.safetensors");
        }
        return accuracy;
      }
    }
  }
}
