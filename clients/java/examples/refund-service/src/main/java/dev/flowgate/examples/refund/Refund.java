package dev.flowgate.examples.refund;

import java.math.BigDecimal;

/**
 * A refund to send: its id (the idempotency key: the same refund submitted twice is one job)
 * and its amount.
 */
public record Refund(String id, BigDecimal amount) {}
