// FashionMnist.java — examples/c/fashion_mnist.c through the Java binding: a small CNN trained on
// Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//   java -Djava.library.path=build/bindings/java -cp build/bindings/java/accelerate.jar:build/bindings/java/fashion-mnist.jar \
//        FashionMnist [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]
//                     [--data DIR] [--save FILE.pt] [--min-accuracy PCT]
//
// Exits 3 when the test accuracy is below --min-accuracy.
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

  public static void main(String[] argv) {
    FashionMnist a = new FashionMnist();
    for (int i = 0; i < argv.length; i += 2) {
      if (i + 1 >= argv.length) usage(argv[i] + " needs a value");
      String v = argv[i + 1];
      switch (argv[i]) {
        case "--epochs": a.epochs = Integer.parseInt(v); break;
        case "--batch-size": a.batchSize = Integer.parseInt(v); break;
        case "--lr": a.lr = Double.parseDouble(v); break;
        case "--train-samples": a.trainSamples = Long.parseLong(v); break;
        case "--test-samples": a.testSamples = Long.parseLong(v); break;
        case "--data": a.data = v; break;
        case "--save": a.save = v; break;
        case "--min-accuracy": a.minAccuracy = Double.parseDouble(v); break;
        default: usage("unknown argument " + argv[i]);
      }
    }
    if (a.epochs < 1 || a.batchSize < 1) usage("--epochs and --batch-size must be >= 1");
    try {
      System.exit(a.run() >= a.minAccuracy ? 0 : 3);
    } catch (AccelerateException e) {
      System.err.println("error: " + e.status() + ": " + e.getMessage());
      System.exit(1);
    }
  }

  static void usage(String message) {
    System.err.println(message);
    System.exit(2);
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
