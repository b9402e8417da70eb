package dev.flowgate.client;

/**
 * The breaker instance that refused a request.
 *
 * @param domain its domain
 * @param name its name
 * @param key the instance's key ({@code payments:wpg:channel=WPG})
 */
public record BreakerRef(String domain, String name, String key) {}
