package dev.flowgate.client.queue;

/**
 * One queue instance's identity and figures (the whole cluster's, read from the store), as
 * {@code GET /v1/queues} answers them. The figures are null for an instance whose queue is no
 * longer known.
 *
 * @param instance the instance's key
 * @param domain its queue's domain
 * @param queue its queue's name
 * @param descriptor its descriptor, as text
 * @param declared whether its queue is declared
 * @param retired whether its queue was removed from the configuration (it drains)
 * @param rate its queue's release rate, when known
 * @param burst its queue's burst, when known
 * @param maxDepth its queue's bound on jobs, when known
 * @param depth jobs held: waiting, reserved and in flight
 * @param waiting ready and delayed
 * @param ready waiting for their slot
 * @param delayed waiting for their {@code not_before_ms} or retry time
 * @param reserved set aside for a waiting lease
 * @param inFlight delivered and not acked
 * @param dead in the dead letters
 * @param timeToDrainMs until the waiting jobs are all released at the rate
 * @param nextReleaseInMs the next free slot
 * @param oldestAgeMs the oldest waiting job's age, null when none waits
 * @param releaseRate deliveries per second over the recent releases, null when unknown
 * @param submittedTotal jobs submitted since the instance began
 * @param releasedTotal jobs released
 * @param ackedTotal jobs acked
 * @param deadTotal jobs that became dead letters
 */
public record InstanceStats(
    String instance,
    String domain,
    String queue,
    String descriptor,
    boolean declared,
    boolean retired,
    String rate,
    Long burst,
    Long maxDepth,
    Long depth,
    Long waiting,
    Long ready,
    Long delayed,
    Long reserved,
    Long inFlight,
    Long dead,
    Long timeToDrainMs,
    Long nextReleaseInMs,
    Long oldestAgeMs,
    Double releaseRate,
    Long submittedTotal,
    Long releasedTotal,
    Long ackedTotal,
    Long deadTotal) {}
