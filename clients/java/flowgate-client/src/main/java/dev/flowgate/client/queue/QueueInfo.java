package dev.flowgate.client.queue;

import java.util.List;

/**
 * A declared queue, as {@code GET /v1/queues} describes it.
 *
 * @param domain its domain
 * @param name its name
 * @param match its descriptor pattern, one entry per element
 * @param rate its release rate ({@code "10/s"})
 * @param burst jobs released at once after a pause
 * @param maxDepth the most jobs it holds
 * @param leaseMs how long a lease lasts
 * @param maxAttempts deliveries before the dead letters
 * @param retryBackoffMs the first wait before a nacked job's next attempt
 * @param maxPayload the largest stored payload, in bytes
 * @param keyRetentionMs how long an idempotency key is kept after its job finished
 */
public record QueueInfo(
    String domain,
    String name,
    List<String> match,
    String rate,
    long burst,
    long maxDepth,
    long leaseMs,
    int maxAttempts,
    long retryBackoffMs,
    long maxPayload,
    long keyRetentionMs) {}
