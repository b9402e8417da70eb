package dev.flowgate.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A process's CPU time so far, user and system (kernel: syscalls, the loopback's TCP work, the
 * scheduler's), from Linux's {@code /proc/<pid>/stat}, in microseconds. What a call costs the
 * machine's cores, whatever else loads them; -1 where {@code /proc} cannot tell (not Linux).
 */
final class Cpu {
  /** {@code /proc}'s clock tick ({@code USER_HZ}): 100 per second on every Linux ABI in use. */
  private static final long MICROS_PER_TICK = 10_000;

  private Cpu() {}

  /** This JVM's CPU time. */
  static long self() {
    return read(Path.of("/proc/self/stat"));
  }

  /** Process {@code pid}'s CPU time; -1 when {@code pid} is 0 (none named) or unknown. */
  static long of(long pid) {
    return pid <= 0 ? -1 : read(Path.of("/proc/" + pid + "/stat"));
  }

  private static long read(Path stat) {
    try {
      String s = Files.readString(stat);
      // The command name, field 2, is in parentheses and may hold spaces: count after it.
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      // Fields 14 (utime) and 15 (stime) of proc(5), here 11 and 12 counted from field 3.
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * MICROS_PER_TICK;
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }
}
