package dev.flowgate.client;

/**
 * The answer to a release.
 *
 * @param released whether the lease was held (false: released already, or expired)
 */
record Released(boolean released) {}
