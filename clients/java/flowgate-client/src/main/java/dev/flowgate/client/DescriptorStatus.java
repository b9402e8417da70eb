package dev.flowgate.client;

/**
 * What one descriptor of a decision got.
 *
 * @param code Envoy's code of the descriptor
 * @param rule the rule that applied, or null when none matched
 * @param limit the limit's units, or null when no limit applied
 * @param remaining units left, or null when no limit applied
 * @param quota the limit in force ({@code "20/s"}), or null
 * @param resetAfterMs milliseconds until the count resets, or null
 * @param retryAfterMs when refused, milliseconds until the earliest retry, or null
 * @param waitMs in {@code delay} mode, the wait before this descriptor's slot
 * @param overLimit whether it was refused (shadow rules' included)
 * @param shadow whether the rule is in shadow mode
 * @param quotaMode whether the rule is in quota mode
 * @param circuitOpen whether a breaker refused it
 * @param breaker the breaker it matched, or null
 * @param lease a concurrency lease taken, or null
 * @param error the store's failure the rule's failure policy decided, or null
 */
public record DescriptorStatus(
    Code code,
    String rule,
    Long limit,
    Long remaining,
    String quota,
    Double resetAfterMs,
    Double retryAfterMs,
    double waitMs,
    boolean overLimit,
    boolean shadow,
    boolean quotaMode,
    boolean circuitOpen,
    String breaker,
    Long lease,
    String error) {}
