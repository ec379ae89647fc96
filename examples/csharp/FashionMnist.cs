// FashionMnist.cs — examples/c/fashion_mnist.c through the C# binding: a small CNN trained on
// Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//   mono build/bindings/csharp/FashionMnist.exe [--epochs N] [--batch-size N] [--lr X]
//        [--train-samples N] [--test-samples N] [--data DIR] [--save FILE.pt] [--min-accuracy PCT]
//
// Exits 3 when the test accuracy is below --min-accuracy, 2 on a bad command line (before anything is
// trained: a --save path whose folder is missing too), 1 on an error; --help lists the flags.
using System;
using System.Diagnostics;
using System.Globalization;
using System.IO;
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

  const string UsageText =
      "usage: FashionMnist.exe [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]\n" +
      "                        [--data DIR] [--save FILE] [--min-accuracy PERCENT]\n" +
      "  --epochs N            training epochs (default 3)\n" +
      "  --batch-size N        batch size per process (default 64)\n" +
      "  --lr X                AdamW's learning rate (default 0.002)\n" +
      "  --train-samples N     use only the first N training samples (default 0: all)\n" +
      "  --test-samples N      use only the first N test samples (default 0: all)\n" +
      "  --data DIR            folder of the IDX files (default /usr/share/datasets/fashion-mnist)\n" +
      "  --save FILE           TorchScript file for the trained model (default fashion_mnist.pt; \"\": none)\n" +
      "  --min-accuracy PCT    exit 3 below this test accuracy in percent (default 0)\n" +
      "Exits 2 on a bad command line, before anything is trained.\n";
  static readonly string[] TakesValue = {"--epochs", "--batch-size", "--lr", "--train-samples", "--test-samples",
                                         "--data", "--save", "--min-accuracy"};

  // A bad command line: what is wrong, on stderr; Main returns 2.
  sealed class UsageException : Exception {
    public UsageException(string message) : base(message) {}
  }

  public static int Main(string[] argv) {
    var a = new FashionMnist();
    try {
      for (int i = 0; i < argv.Length; i += 2) {
        if (argv[i] == "--help" || argv[i] == "-h") {
          Console.Out.Write(UsageText);
          return 0;
        }
        if (Array.IndexOf(TakesValue, argv[i]) < 0) throw new UsageException("unknown argument " + argv[i] + "\n" + UsageText);
        if (i + 1 >= argv.Length) throw new UsageException(argv[i] + " needs a value\n" + UsageText);
        string v = argv[i + 1];
        switch (argv[i]) {
          case "--epochs": a.epochs = (int)WholeNumber(argv[i], v, 1, int.MaxValue); break;
          case "--batch-size": a.batchSize = (int)WholeNumber(argv[i], v, 1, int.MaxValue); break;
          case "--lr": a.lr = Number(argv[i], v); break;
          case "--train-samples": a.trainSamples = WholeNumber(argv[i], v, 0, long.MaxValue); break;
          case "--test-samples": a.testSamples = WholeNumber(argv[i], v, 0, long.MaxValue); break;
          case "--data": a.data = v; break;
          case "--save": a.save = v; break;
          default: a.minAccuracy = Number(argv[i], v); break;  // --min-accuracy
        }
      }
      // The model is saved after training: a path that cannot take the file is refused now, not then.
      CheckSavePath(a.save);
    } catch (UsageException e) {
      Console.Error.Write(e.Message.EndsWith("\n") ? e.Message : e.Message + "\n");
      return 2;
    }
    try {
      return a.Run() >= a.minAccuracy ? 0 : 3;
    } catch (AccelerateException e) {
      Console.Error.WriteLine("error: " + e.Status + ": " + e.Message);
      return 1;
    }
  }

  // A whole number in [least, most] for flag (as examples/c/fashion_mnist.c), else a usage error.
  static long WholeNumber(string flag, string v, long least, long most) {
    long n;
    if (!long.TryParse(v, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out n)) {
      throw new UsageException(IsInteger(v) ? flag + " must be from " + least + " to " + most + ", got " + v
                                            : flag + " takes a whole number, got '" + v + "'");
    }
    if (n < least || n > most) throw new UsageException(flag + " must be from " + least + " to " + most + ", got " + n);
    return n;
  }

  // Whether v is written as a whole number (then one that TryParse refuses is out of range).
  static bool IsInteger(string v) {
    int first = v.Length > 1 && (v[0] == '+' || v[0] == '-') ? 1 : 0;
    if (v.Length == first) return false;
    for (int i = first; i < v.Length; ++i)
      if (v[i] < '0' || v[i] > '9') return false;
    return true;
  }

  // A finite number for flag, in the invariant culture's notation ("1.5", "2e-3"; no thousands
  // separators: "1,5" is not 15), else a usage error.
  static double Number(string flag, string v) {
    double x;
    if (!double.TryParse(v, NumberStyles.Float, CultureInfo.InvariantCulture, out x))
      throw new UsageException(flag + " takes a number, got '" + v + "'");
    if (double.IsNaN(x) || double.IsInfinity(x)) throw new UsageException(flag + " must be a finite number, got '" + v + "'");
    return x;
  }

  // Refuses a --save path the TorchScript file could not be written to: an existing folder, or a file
  // whose folder does not exist. Creates nothing.
  static void CheckSavePath(string path) {
    if (path.Length == 0) return;  // no file
    if (Directory.Exists(path)) throw new UsageException("--save " + path + " is a folder; give a file name");
    if (path.EndsWith("/")) throw new UsageException("--save " + path + " ends with '/'; give a file name");
    int slash = path.LastIndexOf('/');
    if (slash < 0) return;  // the current folder
    string folder = slash == 0 ? "/" : path.Substring(0, slash);  // as written: "missing/../x.pt" needs missing/
    if (!Directory.Exists(folder))
      throw new UsageException("--save " + path + (File.Exists(folder) ? ": " + folder + " is not a folder"
                                                                        : ": the folder " + folder + " does not exist"));
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
