package dev.flowgate.client.queue;

/**
 * A {@link Worker}'s counts since it started, for metrics and tests.
 *
 * @param leaseCalls leases sent (long-polls and probes)
 * @param leaseFailures leases that failed (no answer, 503, or another error), each followed by a
 *     backoff
 * @param acked jobs acked
 * @param nacked jobs nacked (the handler's failures, and jobs handed back on stop)
 * @param handedBack jobs still running when a stop's grace ended, nacked to be delivered again
 * @param handlerFailures handler calls that threw or asked for a retry
 * @param inFlight jobs being handled now
 */
public record WorkerStats(
    long leaseCalls,
    long leaseFailures,
    long acked,
    long nacked,
    long handedBack,
    long handlerFailures,
    int inFlight) {}
