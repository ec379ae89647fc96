package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** LoRA adapters (Model.addLora): only they train, PEFT's files round-trip, merging keeps outputs. */
class LoraTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static Model model() {
    Accelerate.setSeed(3);
    return Model.fromSpec(FreezeTest.SPEC);
  }

  static float[] output(Model model) {
    try (Tensor x = Tensor.of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4);
         Tensor y = model.forward(x)) {
      return y.toFloatArray();
    }
  }

  @Test
  void adaptersTrainAloneAndRoundTripThroughPeftFiles() throws Exception {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("lora_alpha", 4.0)) {
      assertEquals(2, model.addLora("0,1", o));
      assertEquals(2, model.loraCount());
      try (StringList names = model.parameterNames()) {
        assertTrue(names.toList().contains("1.lora_B.weight"));
      }
      float[] base = FreezeTest.param(model, "1.weight"), b = FreezeTest.param(model, "1.lora_B.weight");
      try (Options lr = Options.optimizer().put("lr", 0.1); Optimizer opt = new Optimizer(model, "adamw", lr)) {
        for (int i = 0; i < 3; ++i) FreezeTest.trainStep(model, opt);
      }
      assertArrayEquals(base, FreezeTest.param(model, "1.weight"));
      assertFalse(Arrays.equals(b, FreezeTest.param(model, "1.lora_B.weight")));
      float[] trained = output(model);
      model.saveLora(dir.toString());
      assertTrue(Files.exists(dir.resolve("adapter_config.json")));
      try (Model fresh = model()) {
        fresh.loadLora(dir.toString());
        assertArrayEquals(trained, output(fresh));
        fresh.mergeLora();
        assertEquals(0, fresh.loraCount());
        assertArrayEquals(trained, output(fresh), 1e-5f);
      }
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> model.addLora("0", null));
      assertTrue(e.getMessage().contains("already has"), e.getMessage());
    }
  }

  /** transformers' load_in_4bit: QLoRA's base model keeps 4-bit weights, and its adapters train. */
  @Test
  void aFourBitBaseModelTrainsItsAdapters() {
    trainsAdaptersOverQuantisedLayers(model -> {
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> model.quantize4bit("{\"load_in_8bit\": true}"));
      assertTrue(e.getMessage().contains("load_in_8bit"), e.getMessage());
      // The output layer stays as it is, as transformers leaves it.
      assertEquals(1, model.quantize4bit("{\"load_in_4bit\": true, \"bnb_4bit_quant_type\": \"nf4\"}"));
      assertEquals(0, model.prepareForKbitTraining());  // a float32 model: nothing to cast, all frozen
    });
  }

  /** transformers' load_in_8bit: LLM.int8 layers keep int8 weights, and LoRA's adapters on them train. */
  @Test
  void anEightBitBaseModelTrainsItsAdapters() {
    trainsAdaptersOverQuantisedLayers(
        model -> assertEquals(1, model.quantize("{\"load_in_8bit\": true, \"llm_int8_threshold\": 6.0}")));
  }

  /**
   * PEFT's replace_lora_weights_loftq: the 4-bit layer's adapters restart from LoftQ's factors of its
   * quantisation error against the unquantised weights of a safetensors file (lora_B no longer zero).
   */
  @Test
  void loftqRestartsTheAdaptersOfFourBitLayers() {
    String file = dir.resolve("loftq.pt").toString(), weights = dir.resolve("loftq.safetensors").toString();
    try (Model spec = model(); TensorList state = spec.stateDict()) {
      spec.saveTorchscript(file);
      state.saveSafetensors(weights);
    }
    try (Model model = Model.loadTorchscript(file); Options o = Options.lora().put("r", 2).put("lora_alpha", 4.0)) {
      assertEquals(1, model.quantize4bit("{\"load_in_4bit\": true}"));
      assertEquals(1, model.addLora("0", o));
      float[] before = FreezeTest.param(model, "0.lora_B.weight");
      assertEquals(1, model.replaceLoraWeightsLoftq(weights, null));
      assertFalse(Arrays.equals(before, FreezeTest.param(model, "0.lora_B.weight")));
      assertThrows(InvalidArgumentException.class, () -> model.replaceLoraWeightsLoftq(weights, "other"));
    }
  }

  /**
   * The test model saved as TorchScript and loaded back, quantised by {@code quantize}, then LoRA on
   * its first layer trains.
   */
  private void trainsAdaptersOverQuantisedLayers(java.util.function.Consumer<Model> quantize) {
    String file = dir.resolve("quantised.pt").toString();
    try (Model spec = model()) {
      spec.saveTorchscript(file);
    }
    try (Model model = Model.loadTorchscript(file); Options o = Options.lora().put("r", 2).put("lora_alpha", 4.0)) {
      quantize.accept(model);
      assertEquals(1, model.addLora("0", o));
      float[] b = FreezeTest.param(model, "0.lora_B.weight");
      try (Options lr = Options.optimizer().put("lr", 0.1); Optimizer opt = new Optimizer(model, "adamw", lr)) {
        for (int i = 0; i < 3; ++i) FreezeTest.trainStep(model, opt);
      }
      assertFalse(Arrays.equals(b, FreezeTest.param(model, "0.lora_B.weight")));
    }
  }

  /** PEFT's disable_adapter(): the base model's outputs while the scope is open. */
  @Test
  void disablingTheAdaptersGivesTheBaseModel() {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("init_lora_weights", "false")) {
      float[] base = output(model);
      model.addLora("0,1", o);
      assertTrue(model.isLoraEnabled());
      float[] adapted = output(model);
      assertFalse(Arrays.equals(base, adapted));
      try (Scope disabled = model.disableLora()) {
        assertFalse(model.isLoraEnabled());
        assertArrayEquals(base, output(model));
      }
      assertTrue(model.isLoraEnabled());
      assertArrayEquals(adapted, output(model));
      model.setLoraEnabled(false);
      try (Scope disabled = model.disableLora()) {
        assertArrayEquals(base, output(model));
      }
      assertFalse(model.isLoraEnabled(), "disabled before the scope, disabled after it");
    }
    try (Model plain = model()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, plain::disableLora);
      assertTrue(e.getMessage().contains("no LoRA adapters"), e.getMessage());
    }
  }

  /** PEFT's merge_and_unload(adapter_names=...): an adapter kept aside, merged by name, computes as it did. */
  @Test
  void namedAdaptersMergeByName() {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("init_lora_weights", "false")) {
      model.addLora("0,1", o);
      model.addLoraNamed("second", "1", o);
      model.setAdapter("second");
      float[] second = output(model);
      model.setAdapter("default");
      model.mergeLoraAdapters(Arrays.asList("second"));
      assertEquals(0, model.loraCount());
      assertArrayEquals(second, output(model), 1e-5f);
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> model.mergeLoraAdapters(Arrays.asList("third")));
      assertTrue(e.getMessage().contains("no adapter named 'third'"), e.getMessage());
    }
  }

  /** PEFT's adapter_names: each sample of one batch computes with its own adapter ("__base__": none). */
  @Test
  void namedAdaptersMixedBatch() {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("init_lora_weights", "false")) {
      model.addLora("0,1", o);
      model.addLoraNamed("second", "0,1", o);
      model.setTraining(false);
      model.setAdapter("second");
      float[] second = output(model);
      model.setAdapter("default");
      try (Tensor x = Tensor.of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4);
           TensorList out = model.forwardAdapters(Arrays.asList("second", "second"), x);
           Tensor y = out.get(0)) {
        assertArrayEquals(second, y.toFloatArray(), 1e-6f);
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
            () -> model.forwardAdapters(Arrays.asList("second", "nope"), x));
        assertTrue(e.getMessage().contains("non-existing adapter(s): nope"), e.getMessage());
      }
    }
  }

  /** PEFT's several named adapters: one active, the others kept aside; switching draws nothing. */
  @Test
  void namedAdaptersSwitchKeepTheirValuesAndSaveWherePeftDoes() throws Exception {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("init_lora_weights", "false")) {
      float[] base = output(model);
      model.addLora("0,1", o);
      float[] first = output(model);
      assertEquals(1, model.addLoraNamed("second", "1", o));
      assertEquals("default", model.activeAdapter());
      assertArrayEquals(first, output(model), "the new adapter is kept aside");
      model.setAdapter("second");
      assertEquals("second", model.activeAdapter());
      assertEquals(1, model.loraCount());
      float[] second = output(model);
      assertFalse(Arrays.equals(first, second));
      try (StringList names = model.adapterNames()) {
        assertEquals(Arrays.asList("default", "second"), names.toList());
      }
      model.saveLora(dir.toString());
      assertTrue(Files.exists(dir.resolve("adapter_config.json")));
      assertTrue(Files.exists(dir.resolve("second").resolve("adapter_config.json")));
      model.setAdapter("default");
      assertArrayEquals(first, output(model));
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> model.setAdapter("third"));
      assertTrue(e.getMessage().contains("no adapter named 'third'"), e.getMessage());
      model.deleteAdapter("default");
      assertEquals("second", model.activeAdapter());
      assertArrayEquals(second, output(model));
      try (Model fresh = model()) {
        fresh.loadLoraNamed(dir.resolve("second").toString(), "loaded");
        assertEquals("loaded", fresh.activeAdapter());
        assertArrayEquals(second, output(fresh));
      }
      // PEFT's add_weighted_adapter: "cat" of an adapter with itself, weights 1 and -1, adds nothing.
      assertEquals(1, model.addWeightedAdapter(Arrays.asList("second", "second"), new double[] {1.0, -1.0}, "none",
                                               "cat", 0));
      model.setAdapter("none");
      assertArrayEquals(base, output(model), 1e-6f);
      e = assertThrows(InvalidArgumentException.class,
                       () -> model.addWeightedAdapter(Arrays.asList("second"), new double[] {1.0, 2.0}, "x", "cat", 0));
      assertTrue(e.getMessage().contains("1 adapters for 2 weights"), e.getMessage());
      // "ties" of an adapter with itself, weights 1 and 1, nothing pruned: the adapter again.
      try (Options keywords = Options.weightedAdapter().put("density", 1.0)) {
        assertEquals(1, model.addWeightedAdapter(Arrays.asList("second", "second"), new double[] {1.0, 1.0}, "tied",
                                                 "ties", keywords));
      }
      model.setAdapter("tied");
      assertArrayEquals(second, output(model), 1e-5f);
      e = assertThrows(InvalidArgumentException.class,
                       () -> model.addWeightedAdapter(Arrays.asList("second", "second"), new double[] {1.0, 1.0}, "x",
                                                      "ties", (Options) null));
      assertTrue(e.getMessage().contains("needs a density"), e.getMessage());
      model.unloadLora();
      assertEquals(0, model.loraCount());
      assertArrayEquals(base, output(model));
      assertThrows(InvalidArgumentException.class, model::activeAdapter);
    }
  }

  @Test
  void targetsThatAreNoLinearLayerAreRefused() {
    try (Model model = model()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> model.addLora("q_proj", null));
      assertTrue(e.getMessage().contains("matches no linear layer"), e.getMessage());
      assertEquals(0, model.loraCount());
    }
  }

  static final String TOKEN_SPEC =
      "[{\"type\":\"embedding\",\"num_embeddings\":6,\"embedding_dim\":4},"
      + "{\"type\":\"linear\",\"in_features\":4,\"out_features\":6}]";

  static float[] tokenOutput(Model model) {
    try (Tensor ids = Tensor.of(new long[] {1, 4, 2, 0}, 2, 2); Tensor y = model.forward(ids)) {
      return y.toFloatArray();
    }
  }

  /** PEFT's TrainableTokensConfig: rows of the input embedding train alone, PEFT's files round-trip. */
  @Test
  void trainableTokensTrainAloneAndRoundTrip() {
    Accelerate.setSeed(5);
    try (Model model = Model.fromSpec(TOKEN_SPEC);
         Options o = Options.trainableTokens().put("token_indices", "1,4").put("init_weights", false)) {
      float[] base = tokenOutput(model);
      assertEquals(1, model.addTrainableTokens(null, o));
      assertEquals(0, model.loraCount());
      try (StringList names = model.parameterNames()) {
        assertEquals(Arrays.asList("0.weight", "0.trainable_tokens_delta", "1.weight", "1.bias"), names.toList());
      }
      float[] changed = tokenOutput(model);
      assertFalse(Arrays.equals(base, changed), "random rows change the outputs");
      model.saveLora(dir.toString());
      Accelerate.setSeed(5);
      try (Model fresh = Model.fromSpec(TOKEN_SPEC)) {
        fresh.loadLora(dir.toString());
        assertArrayEquals(changed, tokenOutput(fresh));
        fresh.setLoraEnabled(false);
        assertArrayEquals(base, tokenOutput(fresh));
      }
      assertThrows(InvalidArgumentException.class, () -> model.addLora("1", null));
    }
  }

  /** PEFT's IA3: a vector scaling the linear layer's input (a feedforward module) trains alone. */
  @Test
  void ia3ScalesAndRoundTrips() {
    Accelerate.setSeed(5);
    try (Model model = Model.fromSpec(TOKEN_SPEC);
         Options o = Options.ia3().put("feedforward_modules", "1").put("init_ia3_weights", false)) {
      float[] base = tokenOutput(model);
      assertEquals(1, model.addIa3("1", o));
      assertEquals(1, model.loraCount());
      try (StringList names = model.parameterNames()) {
        assertEquals(Arrays.asList("0.weight", "1.weight", "1.bias", "1.ia3_l"), names.toList());
      }
      float[] changed = tokenOutput(model);
      assertFalse(Arrays.equals(base, changed), "drawn vectors change the outputs");
      model.saveLora(dir.toString());
      Accelerate.setSeed(5);
      try (Model fresh = Model.fromSpec(TOKEN_SPEC)) {
        fresh.loadLora(dir.toString());
        assertArrayEquals(changed, tokenOutput(fresh));
        fresh.setLoraEnabled(false);
        assertArrayEquals(base, tokenOutput(fresh));
      }
      assertThrows(InvalidArgumentException.class, () -> model.addIa3("0", null));  // an embedding
    }
  }

  /** PEFT's LoHa on the linear layer: drawn factors change the outputs; PEFT's files round-trip. */
  @Test
  void lohaTrainsAndRoundTrips() {
    try (Options o = Options.loha().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addLoha("1", o),
                 Arrays.asList("1.hada_w1_a", "1.hada_w1_b", "1.hada_w2_a", "1.hada_w2_b"));
    }
  }

  /** PEFT's LoKr on the linear layer (6 x 4: w1 2 x 2 whole, w2 3 x 2 a rank-1 product). */
  @Test
  void lokrTrainsAndRoundTrips() {
    try (Options o = Options.lokr().put("r", 1).put("init_weights", "false")) {
      roundTrips(model -> model.addLokr("1", o), Arrays.asList("1.lokr_w1", "1.lokr_w2_a", "1.lokr_w2_b"));
    }
  }

  /** PEFT's VeRA on the linear layer: its two vectors (the projections are frozen buffers). */
  @Test
  void veraTrainsAndRoundTrips() {
    try (Options o = Options.vera().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addVera("1", o), Arrays.asList("1.vera_lambda_b", "1.vera_lambda_d"));
    }
  }

  /** PEFT's OFT on the linear layer (4 inputs: 2 blocks of 2). */
  @Test
  void oftTrainsAndRoundTrips() {
    try (Options o = Options.oft().put("oft_block_size", 2).put("init_weights", false)) {
      roundTrips(model -> model.addOft("1", o), Arrays.asList("1.oft_R.weight"));
    }
  }

  /** PEFT's BOFT on the linear layer (4 inputs: blocks of 2, two butterfly factors). */
  @Test
  void boftTrainsAndRoundTrips() {
    try (Options o = Options.boft().put("boft_block_size", 2).put("boft_n_butterfly_factor", 2)
             .put("init_weights", false)) {
      roundTrips(model -> model.addBoft("1", o), Arrays.asList("1.boft_R", "1.boft_s"));
    }
  }

  /** PEFT's HRA on the linear layer (r 2, each reflection drawn). */
  @Test
  void hraTrainsAndRoundTrips() {
    try (Options o = Options.hra().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addHra("1", o), Arrays.asList("1.hra_u"));
    }
  }

  /** PEFT's FourierFT on the linear layer (8 of its spectrum's entries). */
  @Test
  void fourierftTrainsAndRoundTrips() {
    try (Options o = Options.fourierft().put("n_frequency", 8).put("scaling", 10.0)) {
      roundTrips(model -> model.addFourierft("1", o), Arrays.asList("1.fourierft_spectrum"));
    }
  }

  /** PEFT's MiSS on the linear layer (r 2, the shard drawn). */
  @Test
  void missTrainsAndRoundTrips() {
    try (Options o = Options.miss().put("r", 2).put("init_weights", "false")) {
      roundTrips(model -> model.addMiss("1", o), Arrays.asList("1.miss_block"));
    }
  }

  /** PEFT's C3A on the linear layer (blocks of 2, the kernel drawn). */
  @Test
  void c3aTrainsAndRoundTrips() {
    try (Options o = Options.c3a().put("block_size", 2)) {
      roundTrips(model -> model.addC3a("1", o), Arrays.asList("1.c3a_kernel"));
    }
  }

  /** PEFT's SHiRA on the linear layer (r 1, the entries drawn). */
  @Test
  void shiraTrainsAndRoundTrips() {
    try (Options o = Options.shira().put("r", 1).put("random_seed", 3).put("init_weights", false)) {
      roundTrips(model -> model.addShira("1", o), Arrays.asList("1.shira_weight"));
    }
  }

  /** PEFT's RandLoRA on the linear layer (r 2, lambda drawn; the bases are frozen buffers). */
  @Test
  void randloraTrainsAndRoundTrips() {
    try (Options o = Options.randlora().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addRandlora("1", o), Arrays.asList("1.randlora_lambda", "1.randlora_gamma"));
    }
  }

  /** PEFT's DeLoRA on the linear layer (r 2, B drawn; the column norms are a frozen buffer). */
  @Test
  void deloraTrainsAndRoundTrips() {
    try (Options o = Options.delora().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addDelora("1", o), Arrays.asList("1.delora_A", "1.delora_B", "1.delora_lambda"));
    }
  }

  /** PEFT's RoAd on the linear layer (pairs of 2 of its 6 outputs, the angles and scales drawn). */
  @Test
  void roadTrainsAndRoundTrips() {
    try (Options o = Options.road().put("group_size", 2).put("init_weights", false)) {
      roundTrips(model -> model.addRoad("1", o), Arrays.asList("1.road_theta", "1.road_alpha"));
    }
  }

  /** PEFT's GraLoRA on the linear layer (2 x 2 blocks of rank 1, a hybrid pair of rank 1, B drawn). */
  @Test
  void graloraTrainsAndRoundTrips() {
    try (Options o = Options.gralora().put("r", 2).put("hybrid_r", 1).put("init_weights", false)) {
      roundTrips(model -> model.addGralora("1", o), Arrays.asList("1.gralora_A", "1.gralora_B",
          "1.gralora_A_general.weight", "1.gralora_B_general.weight"));
    }
  }

  /** PEFT's HiRA on the linear layer (r 2, A and B as torch.randn drew them). */
  @Test
  void hiraTrainsAndRoundTrips() {
    try (Options o = Options.hira().put("r", 2).put("init_weights", "false")) {
      roundTrips(model -> model.addHira("1", o), Arrays.asList("1.hira_A", "1.hira_B"));
    }
  }

  /** PEFT's PVeRA on the linear layer (r 2, the vectors as torch.randn drew them). */
  @Test
  void pveraTrainsAndRoundTrips() {
    try (Options o = Options.pvera().put("r", 2).put("init_weights", false)) {
      roundTrips(model -> model.addPvera("1", o), Arrays.asList("1.pvera_lambda_b", "1.pvera_lambda_d"));
    }
  }

  /** PEFT's LN tuning on the linear layer (any module can be tuned): it trains in place and PEFT's
   *  files round-trip. */
  @Test
  void lnTuningRoundTrips() {
    try (Model model = Model.fromSpec(TOKEN_SPEC)) {
      assertEquals(1, model.addLnTuning("1", null));
      model.saveLora(dir.toString());
      try (Model fresh = Model.fromSpec(TOKEN_SPEC)) {
        fresh.loadLora(dir.toString());
        assertEquals(1, fresh.loraCount());
      }
    }
  }

  /** PEFT's AdaLoRA on the linear layer: trained on the regularized loss through its schedule (rank 4
   *  pruned to 2 by step 3), the pattern is saved as rank_pattern and PEFT's files round-trip. */
  @Test
  void adaloraTrainsPrunesAndRoundTrips() throws Exception {
    try (Options o = Options.adalora().put("total_step", 4).put("init_r", 4).put("target_r", 2)
             .put("tinit", 0).put("tfinal", 1).put("deltaT", 1)) {
      roundTrips(model -> {
        long n = model.addAdalora("1", o);
        try (Options lr = Options.optimizer().put("lr", 0.1); Optimizer opt = new Optimizer(model, "adamw", lr)) {
          for (int step = 0; step < 4; ++step) {
            try (Tensor ids = Tensor.of(new long[] {1, 4, 2, 0}, 2, 2);
                 Tensor target = Tensor.of(new float[2 * 2 * 6], 2, 2, 6);
                 Tensor y = model.forward(ids);
                 Tensor loss = Loss.mse(y, target, Reduction.MEAN);
                 Tensor regularized = model.adaloraLoss(loss)) {
              assertTrue(regularized.item() > loss.item(), "the orthogonal regularization is positive");
              regularized.backward();
              opt.step();
              model.adaloraUpdateAndAllocate(step);
              opt.zeroGrad();
            }
          }
        }
        assertThrows(InvalidArgumentException.class, () -> model.adaloraUpdateAndAllocate(-1));
        return n;
      }, Arrays.asList("1.lora_A", "1.lora_B", "1.lora_E", "1.ranknum"));
    }
    String config = Files.readString(dir.resolve("adapter_config.json"));
    assertTrue(config.contains("\"ADALORA\""), config);
    assertTrue(config.contains("\"rank_pattern\""), config);
    assertFalse(config.contains("\"rank_pattern\": null"), config);
    assertTrue(config.contains("\"1.lora_E\""), config);
  }

  /** A PEFT method `add` puts on TOKEN_SPEC's linear layer, drawn (or trained) so that it changes the
   *  outputs: its tensors `adapterNames` follow the layer's own, and PEFT's files round-trip (into dir). */
  void roundTrips(java.util.function.ToLongFunction<Model> add, java.util.List<String> adapterNames) {
    Accelerate.setSeed(5);
    try (Model model = Model.fromSpec(TOKEN_SPEC)) {
      float[] base = tokenOutput(model);
      assertEquals(1, add.applyAsLong(model));
      java.util.List<String> expected = new java.util.ArrayList<>(Arrays.asList("0.weight", "1.weight", "1.bias"));
      expected.addAll(adapterNames);
      try (StringList names = model.parameterNames()) {
        assertEquals(expected, names.toList());
      }
      float[] changed = tokenOutput(model);
      assertFalse(Arrays.equals(base, changed), "the drawn adapter changes the outputs");
      model.saveLora(dir.toString());
      Accelerate.setSeed(5);
      try (Model fresh = Model.fromSpec(TOKEN_SPEC)) {
        fresh.loadLora(dir.toString());
        assertArrayEquals(changed, tokenOutput(fresh));
      }
    }
  }

  /** A loader over 24 rows of 4 features (varied enough for a covariance of full rank), batches of 6. */
  static DataLoader rowsLoader() {
    float[] x = new float[24 * 4];
    for (int i = 0; i < x.length; ++i) x[i] = ((i * 7) % 11) - 5 + (i % 4) * 0.25f;
    try (Tensor t = Tensor.of(x, 24, 4); TensorList fields = TensorList.of(t);
         Dataset ds = Dataset.fromTensors(fields); Options lo = Options.dataLoader().put("batch_size", 6)) {
      return new DataLoader(ds, lo);  // it keeps the dataset alive
    }
  }

  /** Every lora_A's values, in the model's order (EVA may take a layer's adapter away). */
  static float[] loraA(Model model) {
    java.util.List<Float> all = new java.util.ArrayList<>();
    try (StringList names = model.parameterNames()) {
      for (String name : names.toList())
        if (name.endsWith(".lora_A.weight"))
          for (float v : FreezeTest.param(model, name)) all.add(v);
    }
    float[] out = new float[all.size()];
    for (int i = 0; i < out.length; ++i) out[i] = all.get(i);
    return out;
  }

  /** EVA: adapters made with init_lora_weights "eva" take their layers' input components from a
   *  loader; adapters of another start are refused. */
  @Test
  void evaStartsTheAdaptersFromTheData() {
    try (Model model = model(); Options o = Options.lora().put("r", 1).put("init_lora_weights", "eva");
         DataLoader dl = rowsLoader(); Options eva = Options.eva().put("max_batches", 500)) {
      model.addLora("0,1", o);
      float[] before = loraA(model);
      assertTrue(model.initializeLoraEva(dl, eva, null) >= 1);
      assertFalse(Arrays.equals(before, loraA(model)));
      try (Model plain = model()) {
        plain.addLora("0", null);
        InvalidArgumentException e =
            assertThrows(InvalidArgumentException.class, () -> plain.initializeLoraEva(dl, null, null));
        assertTrue(e.getMessage().contains("eva"), e.getMessage());
      }
    }
  }

  /** CorDA: the adapters start from the weights' components along the inputs' covariance, the
   *  weights keeping the residual, so the model computes as before (to rounding). */
  @Test
  void cordaStartKeepsTheOutputs() {
    try (Model model = model(); Options o = Options.lora().put("r", 2).put("corda_method", "kpm");
         DataLoader dl = rowsLoader()) {
      float[] before = output(model);
      assertEquals(2, model.addLoraCorda("0,1", o, dl, 1));
      assertArrayEquals(before, output(model), 1e-4f);
      assertThrows(InvalidArgumentException.class, () -> model.addLoraCorda("0", o, dl, 1));
    }
  }

  /** LoRA-GA: gradients accumulated over the caller's own backward passes start the adapters, the
   *  weights keeping the residual, so the model computes as before (to rounding). */
  @Test
  void loraGaStartsFromTheGradients() {
    try (Model model = model(); Options o = Options.lora().put("r", 1)) {
      float[] before = output(model);
      model.beginLoraGa("0,1", o);
      for (int i = 0; i < 2; ++i)
        try (Tensor x = Tensor.of(new float[] {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, 2, 4);
             Tensor target = Tensor.of(new float[] {1, 0, 0, 1}, 2, 2); Tensor y = model.forward(x);
             Tensor loss = Loss.mse(y, target, Reduction.MEAN)) {
          loss.backward();
        }
      assertEquals(2, model.addLoraGa());
      assertArrayEquals(before, output(model), 1e-4f);
      assertThrows(InvalidArgumentException.class, model::addLoraGa);
    }
  }

  /** LoftQ: the weights become their NF4 approximation, the adapters start from the error; the
   *  quantisation takes 4 or 8 bits only. */
  @Test
  void loftqQuantisesTheWeightsAndStartsFromTheError() {
    try (Model model = model();
         Options o = Options.lora().put("r", 1).put("init_lora_weights", "loftq").put("loftq_iter", 2)) {
      float[] weight = FreezeTest.param(model, "0.weight");
      assertEquals(2, model.addLora("0,1", o));
      float[] quantised = FreezeTest.param(model, "0.weight");
      assertFalse(Arrays.equals(weight, quantised));
      for (int i = 0; i < weight.length; ++i) assertEquals(weight[i], quantised[i], 0.2f);
      try (Options bad = Options.lora()) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> bad.put("loftq_bits", 5));
        assertTrue(e.getMessage().contains("must be one of 4, 8"), e.getMessage());
      }
    }
  }
}
