package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.OverLimitException;
import dev.flowgate.client.Request;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The code a refused {@code @RateLimited} call is answered with: the server's reason, so that a
 * refusal by a rule's {@code closed} failure policy (Flowgate's store failed) is not read as a
 * limit's.
 */
class RefusalCodeTest {
  private static FlowgateRateLimitedException refused(ErrorCode reason) throws Exception {
    return refused(reason, Duration.ofSeconds(1));
  }

  private static FlowgateRateLimitedException refused(ErrorCode reason, Duration retry)
      throws Exception {
    Refusal refusal =
        new Refusal(
            Object.class.getMethod("toString"),
            Request.of("payments", Descriptor.of("channel", "WPG")),
            new OverLimitException(reason, "refused", retry));
    return new FlowgateRateLimitedException(refusal);
  }

  @Test
  void aLimitsRefusalIsOverLimitAndAClosedPolicysIsStoreUnavailable() throws Exception {
    assertEquals("over_limit", refused(ErrorCode.OVER_LIMIT).code());
    assertEquals("store_unavailable", refused(ErrorCode.STORE_UNAVAILABLE).code());
    assertEquals(429, refused(ErrorCode.STORE_UNAVAILABLE).httpStatus());
  }

  /** The body's {@code retry_after_ms} and the {@code Retry-After} header agree: both round up. */
  @Test
  void theBodysRetryTimeAndTheHeaderAgree() throws Exception {
    Duration retry = Duration.ofSeconds(15).plusNanos(400_000);
    var answer = FlowgateProblemAdvice.answer(refused(ErrorCode.OVER_LIMIT, retry));
    assertEquals("16", answer.getHeaders().getFirst("Retry-After"));
    assertEquals(15_001L, answer.getBody().getProperties().get("retry_after_ms"));
  }
}
