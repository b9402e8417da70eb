package dev.flowgate.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An admitted acquire: the concurrency leases it took and the probe leases of half-open breakers,
 * to give back when the work ends. Use it in try-with-resources, and report the call's outcome:
 *
 * <pre>{@code
 * try (Permit permit = flowgate.acquire(req)) {
 *   long start = System.nanoTime();
 *   boolean ok = callTheChannel();
 *   permit.report(ok, Duration.ofNanos(System.nanoTime() - start));
 * }
 * }</pre>
 *
 * <p>{@link #report} releases the leases and reports the outcome to the breakers; {@link #close()}
 * without a report only releases the leases (an unknown outcome is no evidence either way; a
 * probe's lease then frees its place when it expires). Either happens once; later calls do
 * nothing. Thread-safe.
 */
public final class Permit implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(Permit.class.getName());

  private final FlowgateClient client;
  private final Request request;
  private final Verdict verdict;
  private final AtomicBoolean done = new AtomicBoolean();

  Permit(FlowgateClient client, Request request, Verdict verdict) {
    this.client = client;
    this.request = request;
    this.verdict = verdict;
  }

  /** The decision that admitted it (its statuses, leases and probes). */
  public Verdict verdict() {
    return verdict;
  }

  /** The request it admitted. */
  public Request request() {
    return request;
  }

  /**
   * Releases the concurrency leases now, without a report.
   *
   * @throws FlowgateException when the server answers an error or cannot be reached (the leases
   *     then expire after their rule's window)
   */
  public void release() {
    JsonTransport.blocking(() -> releaseAsync());
  }

  /** {@link #release()} without blocking. */
  public CompletableFuture<Void> releaseAsync() {
    if (!done.compareAndSet(false, true)) {
      return CompletableFuture.completedFuture(null);
    }
    return releaseLeases();
  }

  /**
   * Releases the leases and reports the call's outcome to the breakers (with the probe leases of
   * half-open breakers).
   *
   * @param ok whether the call succeeded
   * @param latency how long it took
   * @return what the report reached; null when this permit was released or reported already
   * @throws FlowgateException when the server answers an error or cannot be reached
   */
  public ReportAnswer report(boolean ok, Duration latency) {
    return JsonTransport.blocking(() -> reportAsync(ok, latency));
  }

  /** {@link #report} without blocking. */
  public CompletableFuture<ReportAnswer> reportAsync(boolean ok, Duration latency) {
    if (!done.compareAndSet(false, true)) {
      return CompletableFuture.completedFuture(null);
    }
    CompletableFuture<Void> released = releaseLeases();
    CompletableFuture<ReportAnswer> reported = client.reportAsync(reports(ok, latency));
    return released.thenCombine(reported, (v, answer) -> answer);
  }

  /**
   * One report per probe lease, with the descriptor the probe's breaker matched, and one for the
   * descriptors no probe covers: each breaker then counts the outcome once.
   */
  private List<Report> reports(boolean ok, Duration latency) {
    Report whole = Report.outcome(request, ok, latency);
    if (verdict.probes().isEmpty()) {
      return List.of(whole);
    }
    List<Report> out = new ArrayList<>();
    List<Descriptor> rest = new ArrayList<>(request.descriptors());
    for (ProbeRef p : verdict.probes()) {
      Descriptor d = request.descriptors().get(p.descriptor());
      rest.remove(d);
      out.add(Report.outcome(Request.of(request.domain(), d), ok, latency).withProbe(p.probe()));
    }
    if (!rest.isEmpty()) {
      out.add(Report.outcome(Request.of(request.domain(), rest), ok, latency));
    }
    return out;
  }

  private CompletableFuture<Void> releaseLeases() {
    List<CompletableFuture<Boolean>> all = new ArrayList<>();
    for (LeaseRef lease : verdict.leases()) {
      Descriptor d = request.descriptors().get(lease.descriptor());
      all.add(client.releaseAsync(request.domain(), d, lease.lease()));
    }
    return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
  }

  /**
   * Releases the leases if neither {@link #release()} nor {@link #report} did. A failure is
   * logged, not thrown: the leases expire after their rule's window anyway.
   */
  @Override
  public void close() {
    try {
      release();
    } catch (FlowgateException e) {
      LOG.log(
          System.Logger.Level.WARNING,
          "flowgate: could not release the permit of " + request.domain() + " (it expires): " + e);
    }
  }
}
