package dev.flowgate.spring;

import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.Worker;
import dev.flowgate.client.queue.WorkerStats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.function.ToLongFunction;

/**
 * The {@link FlowgateWorker} workers' meters, each tagged {@code queue} (the instance: domain and
 * descriptor, as the worker logs it):
 *
 * <ul>
 *   <li>{@code flowgate.worker.jobs} (function counter; {@code outcome}: {@code acked}, {@code
 *       nacked}, {@code handed_back}): the jobs settled;
 *   <li>{@code flowgate.worker.handler.failures} (function counter): handler calls that threw or
 *       asked for a retry;
 *   <li>{@code flowgate.worker.leases} (function counter; {@code outcome}: {@code sent}, {@code
 *       failed}): lease calls, and those that failed (each followed by a backoff);
 *   <li>{@code flowgate.worker.in_flight} (gauge): jobs being handled now.
 * </ul>
 */
final class MicrometerWorkerMeters implements WorkerMeters {
  private final MeterRegistry registry;

  MicrometerWorkerMeters(MeterRegistry registry) {
    this.registry = registry;
  }

  @Override
  public void register(QueueInstance queue, Worker worker) {
    String tag = queue.toString();
    counter("flowgate.worker.jobs", "jobs settled", tag, worker, "outcome", "acked", WorkerStats::acked);
    counter("flowgate.worker.jobs", "jobs settled", tag, worker, "outcome", "nacked", WorkerStats::nacked);
    counter(
        "flowgate.worker.jobs", "jobs settled", tag, worker, "outcome", "handed_back",
        WorkerStats::handedBack);
    counter(
        "flowgate.worker.leases", "lease calls", tag, worker, "outcome", "sent",
        WorkerStats::leaseCalls);
    counter(
        "flowgate.worker.leases", "lease calls", tag, worker, "outcome", "failed",
        WorkerStats::leaseFailures);
    FunctionCounter.builder(
            "flowgate.worker.handler.failures", worker, w -> w.stats().handlerFailures())
        .description("handler calls that threw or asked for a retry")
        .tag("queue", tag)
        .register(registry);
    Gauge.builder("flowgate.worker.in_flight", worker, w -> w.stats().inFlight())
        .description("jobs being handled")
        .tag("queue", tag)
        .register(registry);
  }

  private void counter(
      String name,
      String description,
      String queue,
      Worker worker,
      String key,
      String value,
      ToLongFunction<WorkerStats> count) {
    FunctionCounter.builder(name, worker, w -> count.applyAsLong(w.stats()))
        .description(description)
        .tag("queue", queue)
        .tag(key, value)
        .register(registry);
  }
}
