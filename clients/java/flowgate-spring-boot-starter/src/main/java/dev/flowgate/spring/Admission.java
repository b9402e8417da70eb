package dev.flowgate.spring;

import dev.flowgate.client.Permit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The permits one guarded call holds, from its acquires until it ends: {@link #finish} then
 * reports the outcome with the permits whose step asks it (a breaker's), and releases the others.
 * Reports and releases never fail the call: a lost one is logged and counted (a concurrency lease
 * then expires after its rule's window, a probe's after its {@code probe_timeout}).
 */
final class Admission {
  private static final System.Logger LOG = System.getLogger(Admission.class.getName());

  /** A permit and the step that took it; a null permit went ahead unchecked (fail open). */
  record Held(MethodSpec.Step step, Permit permit) {}

  private final FlowgateMetrics metrics;
  private final List<Held> held = new ArrayList<>(2);
  private long startNanos;

  Admission(FlowgateMetrics metrics) {
    this.metrics = metrics;
  }

  void add(Held h) {
    held.add(h);
  }

  /** The call starts now: its latency is measured from here. */
  void start() {
    startNanos = System.nanoTime();
  }

  /**
   * The call ended.
   *
   * @param failure what it threw, or null when it returned
   * @return completes once every report and release is answered (never exceptionally)
   */
  CompletableFuture<Void> finish(Throwable failure) {
    Duration latency = Duration.ofNanos(System.nanoTime() - startNanos);
    List<CompletableFuture<?>> all = new ArrayList<>(held.size());
    for (Held h : held) {
      if (h.permit() == null) {
        continue;
      }
      String domain = h.step().request().domain();
      FlowgateBreaker breaker = h.step().breaker();
      Boolean ok = breaker == null ? null : Outcomes.ok(breaker, failure);
      if (ok == null) {
        all.add(quiet(h.permit().releaseAsync(), domain, "release"));
      } else {
        all.add(
            quiet(h.permit().reportAsync(ok, latency), domain, "report")
                .thenRun(() -> metrics.reported(domain, ok)));
      }
    }
    return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
  }

  /** Releases every permit without a report: the call never ran, or was cancelled. */
  CompletableFuture<Void> release() {
    List<CompletableFuture<?>> all = new ArrayList<>(held.size());
    for (Held h : held) {
      if (h.permit() != null) {
        all.add(quiet(h.permit().releaseAsync(), h.step().request().domain(), "release"));
      }
    }
    return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
  }

  private CompletableFuture<Void> quiet(CompletableFuture<?> f, String domain, String what) {
    return f.handle(
        (v, e) -> {
          if (e != null) {
            metrics.error(domain, "report");
            LOG.log(
                System.Logger.Level.WARNING,
                "flowgate: could not " + what + " a permit of domain " + domain + ": "
                    + FlowgateGuard.unwrap(e));
          }
          return null;
        });
  }
}
