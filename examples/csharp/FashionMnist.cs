// FashionMnist.cs — examples/c/fashion_mnist.c through the C# binding: a small CNN trained on
// Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//   mono build/bindings/csharp/FashionMnist.exe [--epochs N] [--batch-size N] [--lr X]
//        [--train-samples N] [--test-samples N] [--data DIR] [--save FILE.pt] [--min-accuracy PCT]
//
// Exits 3 when the test accuracy is below --min-accuracy.
using System;
using System.Diagnostics;
using System.Globalization;
using Accelerate;

public sealed class FashionMnist {
  const string ModelSpec =
      "[{\"type\":\"conv2d\",\"in_channels\":1,\"out_channels\":32,\"kernel_size\":3,\"padding\":1}," +
      " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2}," +
      " {\"type\":\"conv2d\",\"in_channels\":32,\"out_channels\":64,\"kernel_size\":3,\"padding\":1}," +
      " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2}," +
      " {\"type\":\"flatten\"}," +
      " {\"type\":\"linear\",\"in_features\":3136,\"out_features\":128}, {\"type\":\"relu\"}," +
      " {\"type\":\"dropout\",\"p\":0.25}," +
      " {\"type\":\"linear\",\"in_features\":128,\"out_features\":10}]";

  int epochs = 3, batchSize = 64;
  double lr = 2e-3, minAccuracy = 0;
  long trainSamples = 0, testSamples = 0;
  string data = "/usr/share/datasets/fashion-mnist", save = "fashion_mnist.pt";

  public static int Main(string[] argv) {
    var a = new FashionMnist();
    var inv = CultureInfo.InvariantCulture;
    for (int i = 0; i < argv.Length; i += 2) {
      if (i + 1 >= argv.Length) return Usage(argv[i] + " needs a value");
      string v = argv[i + 1];
      switch (argv[i]) {
        case "--epochs": a.epochs = int.Parse(v, inv); break;
        case "--batch-size": a.batchSize = int.Parse(v, inv); break;
        case "--lr": a.lr = double.Parse(v, inv); break;
        case "--train-samples": a.trainSamples = long.Parse(v, inv); break;
        case "--test-samples": a.testSamples = long.Parse(v, inv); break;
        case "--data": a.data = v; break;
        case "--save": a.save = v; break;
        case "--min-accuracy": a.minAccuracy = double.Parse(v, inv); break;
        default: return Usage("unknown argument " + argv[i]);
      }
    }
    if (a.epochs < 1 || a.batchSize < 1) return Usage("--epochs and --batch-size must be >= 1");
    try {
      return a.Run() >= a.minAccuracy ? 0 : 3;
    } catch (AccelerateException e) {
      Console.Error.WriteLine("error: " + e.Status + ": " + e.Message);
      return 1;
    }
  }

  static int Usage(string message) {
    Console.Error.WriteLine(message);
    return 2;
  }

  Dataset LoadSplit(string split, long limit) {
    Dataset ds = Dataset.FromIdx(data + "/" + split + "-images-idx3-ubyte.gz", data + "/" + split + "-labels-idx1-ubyte.gz");
    if (limit <= 0 || limit >= ds.Count) return ds;
    using (ds) return ds.Subset(0, limit);
  }

  // Sums values over the job's processes (a no-op on one process).
  static double[] SumAcrossProcesses(Accelerator acc, params double[] values) {
    using (Tensor local = Tensor.Of(values, values.Length))
    using (Tensor total = acc.Reduce(local, Reduction.Sum, "sum_across_processes"))
      return total.ToDoubleArray();
  }

  // Test accuracy in percent over every process's share of the test split.
  static double Evaluate(Accelerator acc, Model model, DataLoader loader) {
    long correct = 0, seen = 0;
    model.SetTraining(false);
    // The loop owns each batch and the tensors taken from it; the scope owns what the step makes.
    foreach (TensorList batch in loader) {
      using (Tensors.Scope()) {
        Tensor y = batch.Get(1);
        correct += model.ForwardNoGrad(batch.Get(0)).Argmax(1, false).CountEqual(y);
        seen += y.Numel;
      }
    }
    model.SetTraining(true);
    double[] counts = SumAcrossProcesses(acc, correct, seen);
    return counts[1] > 0 ? 100.0 * counts[0] / counts[1] : 0.0;
  }

  double Run() {
    var inv = CultureInfo.InvariantCulture;
    // 1. The accelerator: settings from the program, else from accelerate-launch's environment.
    using (Options accOpts = Options.Accelerator().Put("seed", 42))
    using (var acc = new Accelerator(accOpts))
    using (Dataset train = LoadSplit("train", trainSamples))
    using (Dataset test = LoadSplit("t10k", testSamples))
    using (Options loaderOpts = Options.DataLoader().Put("batch_size", batchSize).Put("shuffle", true))
    using (var rawTrain = new DataLoader(train, loaderOpts))
    using (Options testOpts = Options.DataLoader().Put("batch_size", 1000).Put("shuffle", false))
    using (var rawTest = new DataLoader(test, testOpts))
    using (Model rawModel = Model.FromSpec(ModelSpec))
    using (Options optOpts = Options.Optimizer().Put("lr", lr))
    using (var rawOpt = new Optimizer(rawModel, "adamw", optOpts)) {
      long stepsPerEpoch = rawTrain.Length;
      using (Options schedOpts = Options.Scheduler().Put("num_warmup_steps", stepsPerEpoch / 10)
                 .Put("num_training_steps", stepsPerEpoch * epochs))
      using (var rawSched = new Scheduler(rawOpt, "cosine", schedOpts))
      // 2. Prepare: everything moves to the accelerator's device and gets Accelerate's semantics.
      using (Model model = acc.Prepare(rawModel))
      using (Optimizer opt = acc.Prepare(rawOpt))
      using (DataLoader trainLoader = acc.Prepare(rawTrain))
      using (Scheduler sched = acc.Prepare(rawSched))
      using (DataLoader testLoader = acc.Prepare(rawTest)) {
        acc.Print(string.Format(inv, "training on {0} process(es), {1}: {2} samples, {3} steps per epoch",
                                acc.NumProcesses, acc.Device, train.Count, stepsPerEpoch));
        for (int epoch = 0; epoch < epochs; ++epoch) {
          var clock = Stopwatch.StartNew();
          double lossSum = 0, batches = 0, samples = 0;
          foreach (TensorList batch in trainLoader) {  // the loop releases each batch and its tensors
            Tensor x = batch.Get(0), y = batch.Get(1);
            using (Tensors.Scope())
            using (acc.Accumulate()) {
              Tensor loss = Loss.CrossEntropy(model.Forward(x), y, Reduction.Mean, 0.0);  // the scope's
              // 3. acc.Backward instead of the loss's own backward.
              acc.Backward(loss);
              opt.Step();
              sched.Step();
              opt.ZeroGrad();
              lossSum += loss.Item();
              batches += 1;
              samples += y.Numel;
            }
          }
          double[] totals = SumAcrossProcesses(acc, lossSum, batches, samples);
          acc.Print(string.Format(inv, "epoch {0}/{1}  loss {2:F4}  {3:F0} samples/s", epoch + 1, epochs,
                                  totals[1] > 0 ? totals[0] / totals[1] : 0.0, totals[2] / clock.Elapsed.TotalSeconds));
        }
        double accuracy = Evaluate(acc, model, testLoader);
        acc.Print(string.Format(inv, "test accuracy {0:F2}%", accuracy));
        if (!string.IsNullOrEmpty(save)) {
          // One file for the job, written by the main process (Accelerate's recipe).
          if (acc.IsMainProcess)
            using (Model unwrapped = acc.UnwrapModel(model)) unwrapped.SaveTorchscript(save);
          acc.Print("saved the trained model to " + save + " (TorchScript)");
          acc.SaveModel(model, "fashion_mnist_model", null);
          acc.Print("saved the weights to fashion_mnist_model/model.safetensors");
        }
        return accuracy;
      }
    }
  }
}
