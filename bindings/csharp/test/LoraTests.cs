// LoRA adapters (Model.AddLora): only they train, PEFT's files round-trip, merging keeps outputs.
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class LoraTests {
  static Model NewModel() {
    Library.SetSeed(3);
    return Model.FromSpec(FreezeTests.Spec);
  }

  static float[] Output(Model model) {
    using (Tensor x = Tensor.Of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4))
    using (Tensor y = model.Forward(x)) return y.ToFloatArray();
  }

  // A loader over 24 rows of 4 features (varied enough for a covariance of full rank), batches of 6.
  static DataLoader RowsLoader() {
    var x = new float[24 * 4];
    for (int i = 0; i < x.Length; ++i) x[i] = ((i * 7) % 11) - 5 + (i % 4) * 0.25f;
    using (Tensor t = Tensor.Of(x, 24, 4))
    using (TensorList fields = TensorList.Of(t))
    using (Dataset ds = Dataset.FromTensors(fields))
    using (Options lo = Options.DataLoader().Put("batch_size", 6)) return new DataLoader(ds, lo);
  }

  // Every lora_A's values, in the model's order (EVA may take a layer's adapter away).
  static float[] LoraA(Model model) {
    var all = new System.Collections.Generic.List<float>();
    using (StringList names = model.ParameterNames())
      foreach (string name in names.ToList())
        if (name.EndsWith(".lora_A.weight")) all.AddRange(FreezeTests.Param(model, name));
    return all.ToArray();
  }

  // transformers' load_in_4bit: QLoRA's base model keeps 4-bit weights, and its adapters train.
  [Test]
  public void AFourBitBaseModelTrainsItsAdapters() {
    TrainsAdaptersOverQuantisedLayers(model => {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.Quantize4bit("{\"load_in_8bit\": true}"));
      StringAssert.Contains("load_in_8bit", e.Message);
      // The output layer stays as it is, as transformers leaves it.
      Assert.AreEqual(1, model.Quantize4bit("{\"load_in_4bit\": true, \"bnb_4bit_quant_type\": \"nf4\"}"));
      Assert.AreEqual(0, model.PrepareForKbitTraining());  // a float32 model: nothing to cast, all frozen
    });
  }

  // transformers' load_in_8bit: LLM.int8 layers keep int8 weights, and LoRA's adapters on them train.
  [Test]
  public void AnEightBitBaseModelTrainsItsAdapters() {
    TrainsAdaptersOverQuantisedLayers(
        model => Assert.AreEqual(1, model.Quantize("{\"load_in_8bit\": true, \"llm_int8_threshold\": 6.0}")));
  }

  // The test model saved as TorchScript and loaded back, quantised by `quantize`, then LoRA on its
  // first layer trains.
  static void TrainsAdaptersOverQuantisedLayers(System.Action<Model> quantize) {
    string file = Path.Combine(TestDirs.Temp(), "quantised.pt");
    using (Model spec = NewModel()) spec.SaveTorchscript(file);
    using (Model model = Model.LoadTorchscript(file))
    using (Options o = Options.Lora().Put("r", 2).Put("lora_alpha", 4.0)) {
      quantize(model);
      Assert.AreEqual(1, model.AddLora("0", o));
      float[] b = FreezeTests.Param(model, "0.lora_B.weight");
      using (Options lr = Options.Optimizer().Put("lr", 0.1))
      using (Optimizer opt = new Optimizer(model, "adamw", lr))
        for (int i = 0; i < 3; ++i) FreezeTests.TrainStep(model, opt);
      Assert.That(FreezeTests.Param(model, "0.lora_B.weight"), Is.Not.EqualTo(b));
    }
  }

  // PEFT's replace_lora_weights_loftq: the 4-bit layer's adapters restart from LoftQ's factors of its
  // quantisation error against the unquantised weights of a safetensors file (lora_B no longer zero).
  [Test]
  public void LoftqRestartsTheAdaptersOfFourBitLayers() {
    string file = Path.Combine(TestDirs.Temp(), "loftq.pt"), weights = Path.Combine(TestDirs.Temp(), "loftq.safetensors");
    using (Model spec = NewModel()) {
      spec.SaveTorchscript(file);
      using (TensorList state = spec.StateDict()) state.SaveSafetensors(weights);
    }
    using (Model model = Model.LoadTorchscript(file))
    using (Options o = Options.Lora().Put("r", 2).Put("lora_alpha", 4.0)) {
      Assert.AreEqual(1, model.Quantize4bit("{\"load_in_4bit\": true}"));
      Assert.AreEqual(1, model.AddLora("0", o));
      float[] before = FreezeTests.Param(model, "0.lora_B.weight");
      Assert.AreEqual(1, model.ReplaceLoraWeightsLoftq(weights, null));
      Assert.That(FreezeTests.Param(model, "0.lora_B.weight"), Is.Not.EqualTo(before));
      Assert.Throws<AccelerateInvalidArgumentException>(() => model.ReplaceLoraWeightsLoftq(weights, "other"));
    }
  }

  // EVA: adapters made with init_lora_weights "eva" take their layers' input components from a
  // loader; adapters of another start are refused.
  [Test]
  public void EvaStartsTheAdaptersFromTheData() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 1).Put("init_lora_weights", "eva"))
    using (DataLoader dl = RowsLoader())
    using (Options eva = Options.Eva().Put("max_batches", 500)) {
      model.AddLora("0,1", o);
      float[] before = LoraA(model);
      Assert.That(model.InitializeLoraEva(dl, eva, null), Is.GreaterThanOrEqualTo(1));
      Assert.That(LoraA(model), Is.Not.EqualTo(before));
      using (Model plain = NewModel()) {
        plain.AddLora("0", null);
        var e = Assert.Throws<AccelerateInvalidArgumentException>(() => plain.InitializeLoraEva(dl, null, null));
        StringAssert.Contains("eva", e.Message);
      }
    }
  }

  // CorDA: the adapters start from the weights' components along the inputs' covariance, the
  // weights keeping the residual, so the model computes as before (to rounding).
  [Test]
  public void CordaStartKeepsTheOutputs() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2).Put("corda_method", "kpm"))
    using (DataLoader dl = RowsLoader()) {
      float[] before = Output(model);
      Assert.That(model.AddLoraCorda("0,1", o, dl, 1), Is.EqualTo(2));
      Assert.That(Output(model), Is.EqualTo(before).Within(1e-4f));
      Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddLoraCorda("0", o, dl, 1));
    }
  }

  // LoRA-GA: gradients accumulated over the caller's own backward passes start the adapters, the
  // weights keeping the residual, so the model computes as before (to rounding).
  [Test]
  public void LoraGaStartsFromTheGradients() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 1)) {
      float[] before = Output(model);
      model.BeginLoraGa("0,1", o);
      for (int i = 0; i < 2; ++i)
        using (Tensor x = Tensor.Of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4))
        using (Tensor target = Tensor.Of(new float[] {1, 0, 0, 1}, 2, 2))
        using (Tensor y = model.Forward(x))
        using (Tensor loss = Loss.Mse(y, target, Reduction.Mean)) loss.Backward();
      Assert.That(model.AddLoraGa(), Is.EqualTo(2));
      Assert.That(Output(model), Is.EqualTo(before).Within(1e-4f));
      Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddLoraGa());
    }
  }

  // LoftQ: the weights become their NF4 approximation, the adapters start from the error; the
  // quantisation takes 4 or 8 bits only.
  [Test]
  public void LoftqQuantisesTheWeightsAndStartsFromTheError() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 1).Put("init_lora_weights", "loftq").Put("loftq_iter", 2))
    using (Options bad = Options.Lora()) {
      float[] weight = FreezeTests.Param(model, "0.weight");
      Assert.That(model.AddLora("0,1", o), Is.EqualTo(2));
      float[] quantised = FreezeTests.Param(model, "0.weight");
      Assert.That(quantised, Is.Not.EqualTo(weight));
      Assert.That(quantised, Is.EqualTo(weight).Within(0.2f));
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => bad.Put("loftq_bits", 5));
      StringAssert.Contains("must be one of 4, 8", e.Message);
    }
  }

  [Test]
  public void AdaptersTrainAloneAndRoundTripThroughPeftFiles() {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-lora-" + System.Guid.NewGuid().ToString("N"));
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2L).Put("lora_alpha", 4.0)) {
      Assert.AreEqual(2, model.AddLora("0,1", o));
      Assert.AreEqual(2, model.LoraCount);
      float[] baseWeight = FreezeTests.Param(model, "1.weight"), b = FreezeTests.Param(model, "1.lora_B.weight");
      using (Options lr = Options.Optimizer().Put("lr", 0.1))
      using (var opt = new Optimizer(model, "adamw", lr))
        for (int i = 0; i < 3; ++i) FreezeTests.TrainStep(model, opt);
      Assert.AreEqual(baseWeight, FreezeTests.Param(model, "1.weight"));
      CollectionAssert.AreNotEqual(b, FreezeTests.Param(model, "1.lora_B.weight"));
      float[] trained = Output(model);
      model.SaveLora(dir);
      Assert.IsTrue(File.Exists(Path.Combine(dir, "adapter_config.json")));
      using (Model fresh = NewModel()) {
        fresh.LoadLora(dir);
        Assert.AreEqual(trained, Output(fresh));
        fresh.MergeLora();
        Assert.AreEqual(0, fresh.LoraCount);
        float[] merged = Output(fresh);
        for (int i = 0; i < trained.Length; ++i) Assert.AreEqual(trained[i], merged[i], 1e-5);
      }
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddLora("0", null));
      StringAssert.Contains("already has", e.Message);
    }
    Directory.Delete(dir, true);
  }

  // PEFT's merge_and_unload(adapter_names=...): an adapter kept aside, merged by name, computes as it did.
  [Test]
  public void NamedAdaptersMergeByName() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2L).Put("init_lora_weights", "false")) {
      model.AddLora("0,1", o);
      model.AddLoraNamed("second", "1", o);
      model.SetAdapter("second");
      float[] second = Output(model);
      model.SetAdapter("default");
      model.MergeLoraAdapters(new[] {"second"});
      Assert.AreEqual(0, model.LoraCount);
      float[] merged = Output(model);
      for (int i = 0; i < merged.Length; ++i) Assert.AreEqual(second[i], merged[i], 1e-5);
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.MergeLoraAdapters(new[] {"third"}));
      StringAssert.Contains("no adapter named 'third'", e.Message);
    }
  }

  // PEFT's adapter_names: each sample of one batch computes with its own adapter ("__base__": none).
  [Test]
  public void NamedAdaptersMixedBatch() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2L).Put("init_lora_weights", "false")) {
      model.AddLora("0,1", o);
      model.AddLoraNamed("second", "0,1", o);
      model.SetTraining(false);
      model.SetAdapter("second");
      float[] second = Output(model);
      model.SetAdapter("default");
      using (Tensor x = Tensor.Of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4))
      using (TensorList outputs = model.ForwardAdapters(new[] {"second", "second"}, x))
      using (Tensor y = outputs.Get(0)) {
        float[] mixed = y.ToFloatArray();
        for (int i = 0; i < mixed.Length; ++i) Assert.AreEqual(second[i], mixed[i], 1e-6);
        var e = Assert.Throws<AccelerateInvalidArgumentException>(
            () => model.ForwardAdapters(new[] {"second", "nope"}, x));
        StringAssert.Contains("non-existing adapter(s): nope", e.Message);
      }
    }
  }

  // PEFT's several named adapters: one active, the others kept aside; switching draws nothing.
  [Test]
  public void NamedAdaptersSwitchKeepTheirValuesAndSaveWherePeftDoes() {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-named-" + System.Guid.NewGuid().ToString("N"));
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2L).Put("init_lora_weights", "false")) {
      float[] baseOutput = Output(model);
      model.AddLora("0,1", o);
      float[] first = Output(model);
      Assert.AreEqual(1, model.AddLoraNamed("second", "1", o));
      Assert.AreEqual("default", model.ActiveAdapter);
      Assert.AreEqual(first, Output(model), "the new adapter is kept aside");
      model.SetAdapter("second");
      Assert.AreEqual("second", model.ActiveAdapter);
      float[] second = Output(model);
      CollectionAssert.AreNotEqual(first, second);
      using (StringList names = model.AdapterNames())
        CollectionAssert.AreEqual(new[] {"default", "second"}, names.ToList());
      model.SaveLora(dir);
      Assert.IsTrue(File.Exists(Path.Combine(dir, "second", "adapter_config.json")));
      model.SetAdapter("default");
      Assert.AreEqual(first, Output(model));
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.SetAdapter("third"));
      StringAssert.Contains("no adapter named 'third'", e.Message);
      model.DeleteAdapter("default");
      Assert.AreEqual("second", model.ActiveAdapter);
      Assert.AreEqual(second, Output(model));
      using (Model fresh = NewModel()) {
        fresh.LoadLoraNamed(Path.Combine(dir, "second"), "loaded");
        Assert.AreEqual("loaded", fresh.ActiveAdapter);
        Assert.AreEqual(second, Output(fresh));
      }
      // PEFT's add_weighted_adapter: "cat" of an adapter with itself, weights 1 and -1, adds nothing.
      Assert.AreEqual(1, model.AddWeightedAdapter(new[] {"second", "second"}, new[] {1.0, -1.0}, "none", "cat"));
      model.SetAdapter("none");
      float[] none = Output(model);
      for (int i = 0; i < none.Length; ++i) Assert.AreEqual(baseOutput[i], none[i], 1e-6);
      // "ties" of an adapter with itself, weights 1 and 1, nothing pruned: the adapter again.
      using (Options keywords = Options.WeightedAdapter().Put("density", 1.0))
        Assert.AreEqual(1, model.AddWeightedAdapter(new[] {"second", "second"}, new[] {1.0, 1.0}, "tied", "ties",
                                                    keywords));
      model.SetAdapter("tied");
      float[] tied = Output(model);
      for (int i = 0; i < tied.Length; ++i) Assert.AreEqual(second[i], tied[i], 1e-5);
      e = Assert.Throws<AccelerateInvalidArgumentException>(
          () => model.AddWeightedAdapter(new[] {"second", "second"}, new[] {1.0, 1.0}, "x", "ties", (Options)null));
      StringAssert.Contains("needs a density", e.Message);
      // Found by a hunt: null weights were a NullReferenceException; and the overloads taking an
      // array and its count apart (a count past the array read past it) are not the API.
      Assert.Throws<System.ArgumentNullException>(
          () => model.AddWeightedAdapter(new[] {"second"}, null, "y", "linear", (Options)null));
      var flags = System.Reflection.BindingFlags.Public | System.Reflection.BindingFlags.Instance;
      Assert.IsNull(typeof(Model).GetMethod("MergeLoraAdapters", flags, null, new[] {typeof(byte[]), typeof(long)}, null));
      foreach (var method in typeof(Model).GetMethods(flags))
        if (method.Name == "AddWeightedAdapter")
          Assert.AreNotEqual(typeof(byte[]), method.GetParameters()[0].ParameterType);
      model.UnloadLora();
      Assert.AreEqual(0, model.LoraCount);
      Assert.AreEqual(baseOutput, Output(model));
    }
    Directory.Delete(dir, true);
  }

  // PEFT's disable_adapter(): the base model's outputs while the scope is open.
  [Test]
  public void DisablingTheAdaptersGivesTheBaseModel() {
    using (Model model = NewModel())
    using (Options o = Options.Lora().Put("r", 2L).Put("init_lora_weights", "false")) {
      float[] baseOutput = Output(model);
      model.AddLora("0,1", o);
      Assert.IsTrue(model.IsLoraEnabled);
      float[] adapted = Output(model);
      CollectionAssert.AreNotEqual(baseOutput, adapted);
      using (model.DisableLora()) {
        Assert.IsFalse(model.IsLoraEnabled);
        Assert.AreEqual(baseOutput, Output(model));
      }
      Assert.IsTrue(model.IsLoraEnabled);
      Assert.AreEqual(adapted, Output(model));
      model.SetLoraEnabled(false);
      using (model.DisableLora()) Assert.AreEqual(baseOutput, Output(model));
      Assert.IsFalse(model.IsLoraEnabled, "disabled before the scope, disabled after it");
    }
    using (Model plain = NewModel()) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => plain.DisableLora());
      StringAssert.Contains("no LoRA adapters", e.Message);
    }
  }

  [Test]
  public void TargetsThatAreNoLinearLayerAreRefused() {
    using (Model model = NewModel()) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddLora("q_proj", null));
      StringAssert.Contains("matches no linear layer", e.Message);
      Assert.AreEqual(0, model.LoraCount);
    }
  }

  const string TokenSpec = "[{\"type\":\"embedding\",\"num_embeddings\":6,\"embedding_dim\":4}," +
                           "{\"type\":\"linear\",\"in_features\":4,\"out_features\":6}]";

  static float[] TokenOutput(Model model) {
    using (Tensor ids = Tensor.Of(new long[] {1, 4, 2, 0}, 2, 2))
    using (Tensor y = model.Forward(ids)) return y.ToFloatArray();
  }

  // PEFT's TrainableTokensConfig: rows of the input embedding train alone, PEFT's files round-trip.
  [Test]
  public void TrainableTokensTrainAloneAndRoundTrip() {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-tokens-" + System.Guid.NewGuid().ToString("N"));
    Library.SetSeed(5);
    using (Model model = Model.FromSpec(TokenSpec))
    using (Options o = Options.TrainableTokens().Put("token_indices", "1,4").Put("init_weights", false)) {
      float[] baseOutput = TokenOutput(model);
      Assert.AreEqual(1, model.AddTrainableTokens(null, o));
      Assert.AreEqual(0, model.LoraCount);
      using (StringList names = model.ParameterNames())
        Assert.AreEqual(new[] {"0.weight", "0.trainable_tokens_delta", "1.weight", "1.bias"}, names.ToList());
      float[] changed = TokenOutput(model);
      CollectionAssert.AreNotEqual(baseOutput, changed);
      model.SaveLora(dir);
      Library.SetSeed(5);
      using (Model fresh = Model.FromSpec(TokenSpec)) {
        fresh.LoadLora(dir);
        Assert.AreEqual(changed, TokenOutput(fresh));
        using (fresh.DisableLora()) Assert.AreEqual(baseOutput, TokenOutput(fresh));
      }
      Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddLora("1", null));
    }
    Directory.Delete(dir, true);
  }

  // PEFT's IA3: a vector scaling the linear layer's input (a feedforward module) trains alone.
  [Test]
  public void Ia3ScalesAndRoundTrips() {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-ia3-" + System.Guid.NewGuid().ToString("N"));
    Library.SetSeed(5);
    using (Model model = Model.FromSpec(TokenSpec))
    using (Options o = Options.Ia3().Put("feedforward_modules", "1").Put("init_ia3_weights", false)) {
      float[] baseOutput = TokenOutput(model);
      Assert.AreEqual(1, model.AddIa3("1", o));
      Assert.AreEqual(1, model.LoraCount);
      using (StringList names = model.ParameterNames())
        Assert.AreEqual(new[] {"0.weight", "1.weight", "1.bias", "1.ia3_l"}, names.ToList());
      float[] changed = TokenOutput(model);
      CollectionAssert.AreNotEqual(baseOutput, changed);
      model.SaveLora(dir);
      Library.SetSeed(5);
      using (Model fresh = Model.FromSpec(TokenSpec)) {
        fresh.LoadLora(dir);
        Assert.AreEqual(changed, TokenOutput(fresh));
        using (fresh.DisableLora()) Assert.AreEqual(baseOutput, TokenOutput(fresh));
      }
      Assert.Throws<AccelerateInvalidArgumentException>(() => model.AddIa3("0", null));  // an embedding
    }
    Directory.Delete(dir, true);
  }

  // PEFT's LoHa on the linear layer: drawn factors change the outputs; PEFT's files round-trip.
  [Test]
  public void LohaTrainsAndRoundTrips() {
    using (Options o = Options.Loha().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddLoha("1", o), "1.hada_w1_a", "1.hada_w1_b", "1.hada_w2_a", "1.hada_w2_b");
  }

  // PEFT's LoKr on the linear layer (6 x 4: w1 2 x 2 whole, w2 3 x 2 a rank-1 product).
  [Test]
  public void LokrTrainsAndRoundTrips() {
    using (Options o = Options.Lokr().Put("r", 1).Put("init_weights", "false"))
      RoundTrips(model => model.AddLokr("1", o), "1.lokr_w1", "1.lokr_w2_a", "1.lokr_w2_b");
  }

  // PEFT's VeRA on the linear layer: its two vectors (the projections are frozen buffers).
  [Test]
  public void VeraTrainsAndRoundTrips() {
    using (Options o = Options.Vera().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddVera("1", o), "1.vera_lambda_b", "1.vera_lambda_d");
  }

  // PEFT's OFT on the linear layer (4 inputs: 2 blocks of 2).
  [Test]
  public void OftTrainsAndRoundTrips() {
    using (Options o = Options.Oft().Put("oft_block_size", 2).Put("init_weights", false))
      RoundTrips(model => model.AddOft("1", o), "1.oft_R.weight");
  }

  // PEFT's BOFT on the linear layer (4 inputs: blocks of 2, two butterfly factors).
  [Test]
  public void BoftTrainsAndRoundTrips() {
    using (Options o = Options.Boft().Put("boft_block_size", 2).Put("boft_n_butterfly_factor", 2)
                           .Put("init_weights", false))
      RoundTrips(model => model.AddBoft("1", o), "1.boft_R", "1.boft_s");
  }

  // PEFT's HRA on the linear layer (r 2, each reflection drawn).
  [Test]
  public void HraTrainsAndRoundTrips() {
    using (Options o = Options.Hra().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddHra("1", o), "1.hra_u");
  }

  // PEFT's FourierFT on the linear layer (8 of its spectrum's entries).
  [Test]
  public void FourierftTrainsAndRoundTrips() {
    using (Options o = Options.Fourierft().Put("n_frequency", 8).Put("scaling", 10.0))
      RoundTrips(model => model.AddFourierft("1", o), "1.fourierft_spectrum");
  }

  // PEFT's MiSS on the linear layer (r 2, the shard drawn).
  [Test]
  public void MissTrainsAndRoundTrips() {
    using (Options o = Options.Miss().Put("r", 2).Put("init_weights", "false"))
      RoundTrips(model => model.AddMiss("1", o), "1.miss_block");
  }

  // PEFT's C3A on the linear layer (blocks of 2, the kernel drawn).
  [Test]
  public void C3aTrainsAndRoundTrips() {
    using (Options o = Options.C3a().Put("block_size", 2))
      RoundTrips(model => model.AddC3a("1", o), "1.c3a_kernel");
  }

  // PEFT's SHiRA on the linear layer (r 1, the entries drawn).
  [Test]
  public void ShiraTrainsAndRoundTrips() {
    using (Options o = Options.Shira().Put("r", 1).Put("random_seed", 3).Put("init_weights", false))
      RoundTrips(model => model.AddShira("1", o), "1.shira_weight");
  }

  // PEFT's RandLoRA on the linear layer (r 2, lambda drawn; the bases are frozen buffers).
  [Test]
  public void RandloraTrainsAndRoundTrips() {
    using (Options o = Options.Randlora().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddRandlora("1", o), "1.randlora_lambda", "1.randlora_gamma");
  }

  // PEFT's DeLoRA on the linear layer (r 2, B drawn; the column norms are a frozen buffer).
  [Test]
  public void DeloraTrainsAndRoundTrips() {
    using (Options o = Options.Delora().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddDelora("1", o), "1.delora_A", "1.delora_B", "1.delora_lambda");
  }

  // PEFT's RoAd on the linear layer (pairs of 2 of its 6 outputs, the angles and scales drawn).
  [Test]
  public void RoadTrainsAndRoundTrips() {
    using (Options o = Options.Road().Put("group_size", 2).Put("init_weights", false))
      RoundTrips(model => model.AddRoad("1", o), "1.road_theta", "1.road_alpha");
  }

  // PEFT's GraLoRA on the linear layer (2 x 2 blocks of rank 1, a hybrid pair of rank 1, B drawn).
  [Test]
  public void GraloraTrainsAndRoundTrips() {
    using (Options o = Options.Gralora().Put("r", 2).Put("hybrid_r", 1).Put("init_weights", false))
      RoundTrips(model => model.AddGralora("1", o), "1.gralora_A", "1.gralora_B", "1.gralora_A_general.weight",
                 "1.gralora_B_general.weight");
  }

  // PEFT's HiRA on the linear layer (r 2, A and B as torch.randn drew them).
  [Test]
  public void HiraTrainsAndRoundTrips() {
    using (Options o = Options.Hira().Put("r", 2).Put("init_weights", "false"))
      RoundTrips(model => model.AddHira("1", o), "1.hira_A", "1.hira_B");
  }

  // PEFT's PVeRA on the linear layer (r 2, the vectors as torch.randn drew them).
  [Test]
  public void PveraTrainsAndRoundTrips() {
    using (Options o = Options.Pvera().Put("r", 2).Put("init_weights", false))
      RoundTrips(model => model.AddPvera("1", o), "1.pvera_lambda_b", "1.pvera_lambda_d");
  }

  // PEFT's LN tuning on the linear layer (any module can be tuned): it trains in place and PEFT's
  // files round-trip.
  [Test]
  public void LnTuningRoundTrips() {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-ln-" + System.Guid.NewGuid().ToString("N"));
    using (Model model = Model.FromSpec(TokenSpec)) {
      Assert.AreEqual(1, model.AddLnTuning("1", null));
      model.SaveLora(dir);
      using (Model fresh = Model.FromSpec(TokenSpec)) {
        fresh.LoadLora(dir);
        Assert.AreEqual(1, fresh.LoraCount);
      }
    }
    StringAssert.Contains("\"LN_TUNING\"", File.ReadAllText(Path.Combine(dir, "adapter_config.json")));
    Directory.Delete(dir, true);
  }

  // PEFT's AdaLoRA on the linear layer: trained on the regularized loss through its schedule (rank 4
  // pruned to 2 by step 3), the pattern is saved as rank_pattern and PEFT's files round-trip.
  [Test]
  public void AdaloraTrainsPrunesAndRoundTrips() {
    string config;
    using (Options o = Options.Adalora().Put("total_step", 4).Put("init_r", 4).Put("target_r", 2)
                           .Put("tinit", 0).Put("tfinal", 1).Put("deltaT", 1))
      config = RoundTrips(model => {
        long n = model.AddAdalora("1", o);
        using (Options lr = Options.Optimizer().Put("lr", 0.1))
        using (Optimizer opt = new Optimizer(model, "adamw", lr))
          for (int step = 0; step < 4; ++step) {
            using (Tensor ids = Tensor.Of(new long[] {1, 4, 2, 0}, 2, 2))
            using (Tensor target = Tensor.Of(new float[2 * 2 * 6], 2, 2, 6))
            using (Tensor y = model.Forward(ids))
            using (Tensor loss = Loss.Mse(y, target, Reduction.Mean))
            using (Tensor regularized = model.AdaloraLoss(loss)) {
              Assert.Greater(regularized.Item(), loss.Item(), "the orthogonal regularization is positive");
              regularized.Backward();
              opt.Step();
              model.AdaloraUpdateAndAllocate(step);
              opt.ZeroGrad();
            }
          }
        Assert.Throws<AccelerateInvalidArgumentException>(() => model.AdaloraUpdateAndAllocate(-1));
        return n;
      }, "1.lora_A", "1.lora_B", "1.lora_E", "1.ranknum");
    StringAssert.Contains("\"ADALORA\"", config);
    StringAssert.Contains("\"rank_pattern\"", config);
    StringAssert.DoesNotContain("\"rank_pattern\": null", config);
    StringAssert.Contains("\"1.lora_E\"", config);
  }

  // A PEFT method `add` puts on TokenSpec's linear layer, drawn (or trained) so that it changes the
  // outputs: its tensors `adapterNames` follow the layer's own, and PEFT's files round-trip. Returns
  // the adapter_config.json written.
  static string RoundTrips(System.Func<Model, long> add, params string[] adapterNames) {
    string dir = Path.Combine(Path.GetTempPath(), "acc-cs-adapter-" + System.Guid.NewGuid().ToString("N"));
    Library.SetSeed(5);
    using (Model model = Model.FromSpec(TokenSpec)) {
      float[] baseOutput = TokenOutput(model);
      Assert.AreEqual(1, add(model));
      var expected = new System.Collections.Generic.List<string> {"0.weight", "1.weight", "1.bias"};
      expected.AddRange(adapterNames);
      using (StringList names = model.ParameterNames())
        Assert.AreEqual(expected.ToArray(), names.ToList());
      float[] changed = TokenOutput(model);
      CollectionAssert.AreNotEqual(baseOutput, changed);
      model.SaveLora(dir);
      Library.SetSeed(5);
      using (Model fresh = Model.FromSpec(TokenSpec)) {
        fresh.LoadLora(dir);
        Assert.AreEqual(changed, TokenOutput(fresh));
      }
    }
    string config = File.ReadAllText(Path.Combine(dir, "adapter_config.json"));
    Directory.Delete(dir, true);
    return config;
  }
}

}
