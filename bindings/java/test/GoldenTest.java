package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Java binding trains, gathers, reduces, saves and resumes exactly as the C API does, to the
 *  last bit. */
class GoldenTest {
  @TempDir Path dir;  // JUnit deletes it after each test

  @Test
  void sameBitsAsTheCApi() throws Exception {
    String reference = System.getenv("ACC_GOLDEN_REFERENCE");
    assertNotNull(reference, "ACC_GOLDEN_REFERENCE (the C golden program's output) is not set");
    Path mine = Golden.run(dir.resolve("java.txt").toString());
    String expected = Files.readString(Path.of(reference));
    String actual = Files.readString(mine);
    assertTrue(expected.contains("loss 15 "), "the reference has 16 steps");
    assertTrue(expected.contains("param 2.weight 48 "), "the reference has the last layer's weights");
    assertTrue(expected.contains("saved at step 18\n") && expected.contains("resumed at step 18\n"),
        "the reference saves and resumes mid-epoch");
    assertEquals(expected, actual);
  }
}
