package dev.flowgate.client.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Stops and continues a process the test started ({@code SIGSTOP}, {@code SIGCONT}): a server that
 * keeps its connections open and answers nothing.
 */
public final class Signals {
  private Signals() {}

  /**
   * Stops the process and waits until every thread of it is stopped: {@code kill} returns
   * before they are, and on a busy machine a thread still running may answer a request sent
   * after it (seen under {@code stress-ng}).
   *
   * @param pid the process
   */
  public static void stop(long pid) {
    send("STOP", pid);
    Await.until(Duration.ofSeconds(20), "every thread of " + pid + " stopped", () -> stopped(pid));
  }

  /**
   * Continues a stopped process.
   *
   * @param pid the process
   */
  public static void cont(long pid) {
    send("CONT", pid);
  }

  /**
   * Sends SIGHUP (a server reads its credentials file again).
   *
   * @param pid the process
   */
  public static void hangup(long pid) {
    send("HUP", pid);
  }

  private static void send(String signal, long pid) {
    try {
      Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
      if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new AssertionError("kill -" + signal + " " + pid + " failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** Whether every thread of the process is in state T (stopped), per {@code /proc}. */
  private static boolean stopped(long pid) {
    try (Stream<Path> tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
      return tasks.allMatch(
          t -> {
            try {
              String stat = Files.readString(t.resolve("stat"));
              return stat.charAt(stat.lastIndexOf(')') + 2) == 'T';
            } catch (IOException e) {
              return true; // the thread ended
            }
          });
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
