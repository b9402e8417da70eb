package dev.flowgate.client;

/**
 * A half-open breaker's probe lease: the call's report sends it back ({@link Permit#report}).
 *
 * @param descriptor the index of the descriptor that matched the breaker, in the request
 * @param breaker the breaker's name
 * @param probe the lease
 */
public record ProbeRef(int descriptor, String breaker, long probe) {}
