package dev.flowgate.examples.payment;

import java.math.BigDecimal;

/** A payment: the channel it goes through, and its amount. */
public record Payment(String channel, BigDecimal amount) {}
