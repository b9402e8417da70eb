package dev.flowgate.examples.payment;

import java.math.BigDecimal;

/** What the channel answered for a payment. */
public record Receipt(String channel, BigDecimal amount, String reference) {}
