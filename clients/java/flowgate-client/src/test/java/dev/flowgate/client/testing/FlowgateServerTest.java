package dev.flowgate.client.testing;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The test server helper: a missing binary says how to build it; close() stops the process. */
class FlowgateServerTest {
  @Test
  void aMissingBinaryNamesTheBuildCommand() {
    String before = System.getProperty("flowgate.binary");
    System.setProperty("flowgate.binary", "/nonexistent/flowgate");
    try {
      IllegalStateException e =
          assertThrows(IllegalStateException.class, () -> FlowgateServer.start("domain = \"x\"\n"));
      assertTrue(e.getMessage().contains("cargo build -p flowgate-server --bin flowgate"), e.getMessage());
      assertTrue(e.getMessage().contains("/nonexistent/flowgate"), e.getMessage());
    } finally {
      if (before == null) {
        System.clearProperty("flowgate.binary");
      } else {
        System.setProperty("flowgate.binary", before);
      }
    }
  }

  @Test
  void closeKillsTheProcessAndDeletesItsFiles() {
    FlowgateServer server = FlowgateServer.start("domain = \"x\"\n");
    ProcessHandle process = server.handle();
    assertTrue(process.isAlive());
    server.close();
    assertFalse(process.isAlive());
    assertFalse(server.dir().toFile().exists());
  }

  @Test
  void aServerThatCannotStartIsStoppedAndItsLogShown() {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class, () -> FlowgateServer.start("[[rule]]\nname = 3\n"));
    assertTrue(e.getMessage().contains("its log"), e.getMessage());
  }
}
