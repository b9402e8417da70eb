package dev.flowgate.client;

import java.time.Instant;
import java.util.Optional;

/**
 * The answer to a reservation: the decision, and when admitted the reservation to commit with
 * {@link FlowgateClient#commit(Reservation, long)}.
 *
 * @param request what was reserved (its domain and descriptors)
 * @param verdict the decision, as a check's
 * @param id the reservation's id; null when refused, or when the store failed and a failure
 *     policy admitted the request (nothing reserved: the commit then charges the request's rules)
 * @param expiresAtMs when it stops counting if not committed, Unix milliseconds; null when none
 * @param estimate the units reserved under each matched rule
 */
public record Reservation(
    Request request, Verdict verdict, String id, Long expiresAtMs, long estimate) {

  /** Whether the reservation was admitted. */
  public boolean allowed() {
    return verdict.allowed();
  }

  /** When it stops counting if not committed (the store's clock). */
  public Optional<Instant> expiresAt() {
    return Optional.ofNullable(expiresAtMs).map(Instant::ofEpochMilli);
  }

  /** The reservation's fields of the answer, beside the verdict's. */
  record Fields(String id, Long expiresAt, long estimate) {}
}
