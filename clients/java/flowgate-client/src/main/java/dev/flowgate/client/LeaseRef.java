package dev.flowgate.client;

/**
 * A concurrency lease an acquire took, given back by {@link Permit#release()}.
 *
 * @param descriptor the index of the descriptor that took it, in the request
 * @param lease the lease
 */
public record LeaseRef(int descriptor, long lease) {}
