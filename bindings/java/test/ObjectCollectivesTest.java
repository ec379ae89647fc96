package ai.accelerate.test;

import static org.junit.jupiter.api.Assertions.*;

import ai.accelerate.*;
import java.util.List;
import org.junit.jupiter.api.Test;

/** gatherObject and broadcastObject carry bytes (NUL included) through; on one process each returns its own. */
class ObjectCollectivesTest {
  @Test
  void bytesGoThroughWhole() {
    byte[] mine = {1, 0, 2, (byte) 0xff};
    try (Options o = Options.accelerator().put("cpu", true); Accelerator acc = new Accelerator(o)) {
      List<byte[]> all = acc.gatherObject(mine, "objects");
      assertEquals(1, all.size());
      assertArrayEquals(mine, all.get(0));
      assertArrayEquals(mine, acc.broadcastObject(mine, 0, "object"));
      assertArrayEquals(new byte[0], acc.broadcastObject(null, 0, null));
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> acc.broadcastObject(mine, 1, "object"));
      assertTrue(e.getMessage().contains("source process 1"), e.getMessage());
    }
  }
}
