package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Averaged models (PyTorch's AveragedModel): SWA's and EMA's averages of the trained weights, put
 *  into a model by swap and copyTo, moved by their state dict and kept by checkpoints. */
class AveragedModelTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  static final String[] NAMES = {"0.weight", "0.bias", "1.weight", "1.bias"};
  static final String OTHER_SPEC = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":5},"
      + "{\"type\":\"linear\",\"in_features\":5,\"out_features\":2}]";

  static float[][] weights(Model model) {
    float[][] out = new float[NAMES.length][];
    for (int i = 0; i < NAMES.length; ++i) out[i] = FreezeTest.param(model, NAMES[i]);
    return out;
  }

  /** The averages in the model's order of NAMES (the state dict names them "module.<name>"). */
  static float[][] averages(AveragedModel avg) {
    try (TensorList state = avg.stateDict()) {
      float[][] out = new float[NAMES.length][];
      for (int i = 0; i < NAMES.length; ++i) {
        try (Tensor t = state.find("module." + NAMES[i])) {
          out[i] = t.toFloatArray();
        }
      }
      return out;
    }
  }

  @Test
  void swaAveragesTheTrainedWeightsAndPutsThemIntoAModel() {
    try (Model model = Model.fromSpec(FreezeTest.SPEC);
         Optimizer opt = new Optimizer(model, "sgd", null);
         AveragedModel avg = new AveragedModel(model, null)) {
      assertEquals(0, avg.count());
      float[][] seen = new float[3][];
      for (int step = 0; step < 3; ++step) {
        FreezeTest.trainStep(model, opt);
        avg.update(model);
        seen[step] = FreezeTest.param(model, "1.bias");
      }
      assertEquals(3, avg.count());
      float[][] averages = averages(avg), trained = weights(model);
      for (int i = 0; i < seen[0].length; ++i)
        assertEquals((seen[0][i] + seen[1][i] + seen[2][i]) / 3, averages[3][i], 1e-6);
      assertFalse(Arrays.deepEquals(trained, averages));

      avg.swap(model);
      assertArrayEquals(averages, weights(model));
      assertArrayEquals(trained, averages(avg));
      avg.swap(model);
      assertArrayEquals(trained, weights(model));
      assertArrayEquals(averages, averages(avg));

      try (Model evaluation = Model.fromSpec(FreezeTest.SPEC)) {
        avg.copyTo(evaluation);
        assertArrayEquals(averages, weights(evaluation));
      }
      try (Model other = Model.fromSpec(OTHER_SPEC)) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> avg.update(other));
        assertTrue(e.getMessage().contains("'0.weight'"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> avg.copyTo(other));
      }
      assertEquals(3, avg.count());
      assertArrayEquals(averages, averages(avg));
    }
  }

  @Test
  void emaAveragesAreMovedByStateDictAndKeptByCheckpoints() {
    try (Options ao = Options.accelerator().put("cpu", true);
         Accelerator acc = new Accelerator(ao);
         Model model = Model.fromSpec(FreezeTest.SPEC);
         Optimizer opt = new Optimizer(model, "sgd", null);
         Options o = Options.averagedModel().put("strategy", "ema").put("decay", 0.5);
         AveragedModel avg = new AveragedModel(model, o)) {
      acc.registerAveragedModel(avg);
      FreezeTest.trainStep(model, opt);
      avg.update(model);
      float[] first = FreezeTest.param(model, "0.weight");
      FreezeTest.trainStep(model, opt);
      avg.update(model);
      float[] second = FreezeTest.param(model, "0.weight");
      float[][] saved = averages(avg);
      for (int i = 0; i < first.length; ++i) assertEquals(0.5f * first[i] + 0.5f * second[i], saved[0][i], 1e-6);

      String written = acc.saveState(dir.resolve("ckpt").toString());
      assertTrue(Files.isRegularFile(Path.of(written, "custom_checkpoint_0.safetensors")), written);
      FreezeTest.trainStep(model, opt);
      avg.update(model);
      assertEquals(3, avg.count());
      acc.loadState(written);
      assertEquals(2, avg.count());
      assertArrayEquals(saved, averages(avg));

      try (AveragedModel copy = new AveragedModel(model, o);
           TensorList state = avg.stateDict()) {
        copy.loadStateDict(state);
        assertEquals(2, copy.count());
        assertArrayEquals(saved, averages(copy));
      }
      try (Model other = Model.fromSpec(OTHER_SPEC);
           AveragedModel foreign = new AveragedModel(other, null);
           TensorList state = foreign.stateDict()) {
        assertThrows(InvalidArgumentException.class, () -> avg.loadStateDict(state));
      }
      assertArrayEquals(saved, averages(avg));
    }
  }

  /** update_bn: a BatchNorm layer's statistics become the plain average over the loader's epoch
   *  (two equal batches: the mean of every sample), counted in num_batches_tracked. */
  @Test
  void updateBnAveragesTheStatisticsOverAnEpoch() {
    float[] x = {1, 10, 3, 20, 5, 30, 7, 40, 2, 50, 4, 60, 6, 70, 8, 80};
    try (Model model = Model.fromSpec("[{\"type\":\"batchnorm1d\",\"num_features\":2}]");
         Tensor t = Tensor.of(x, 8, 2); TensorList fields = TensorList.of(t);
         Dataset ds = Dataset.fromTensors(fields);
         Options o = Options.dataLoader().put("batch_size", 4);
         DataLoader dl = new DataLoader(ds, o)) {
      model.updateBn(dl);
      try (TensorList state = model.stateDict(); Tensor mean = state.find("0.running_mean");
           Tensor count = state.find("0.num_batches_tracked")) {
        assertArrayEquals(new float[] {4.5f, 45f}, mean.toFloatArray(), 1e-5f);
        assertArrayEquals(new long[] {2}, count.toLongArray());
      }
    }
  }
}
