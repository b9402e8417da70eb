package dev.flowgate.spring;

import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Answers a refused call as an RFC 9457 problem, in Spring MVC and WebFlux alike: {@link
 * FlowgateRateLimitedException} 429, {@link FlowgateCircuitOpenException} and {@link
 * FlowgateUnavailableException} 503, each with {@code Retry-After} (whole seconds, rounded up)
 * when the time is known, and a body
 *
 * <pre>{@code
 * {"type": "about:blank", "title": "Too Many Requests", "status": 429,
 *  "detail": "rate limited in domain payments: ...", "code": "over_limit",
 *  "domain": "payments", "retry_after_ms": 1234}
 * }</pre>
 *
 * <p>Ordered just before the advice of default order, so that an application's catch-all
 * {@code @ExceptionHandler(Exception.class)} does not turn a refusal into a 500; an application
 * advice of higher precedence handling these exceptions wins over it.
 */
@RestControllerAdvice
@Order(Ordered.LOWEST_PRECEDENCE - 100)
public class FlowgateProblemAdvice {
  /**
   * The problem answer of a refusal.
   *
   * @param e the refusal
   * @return the answer
   */
  @ExceptionHandler(FlowgateRefusedException.class)
  public ResponseEntity<ProblemDetail> refused(FlowgateRefusedException e) {
    return answer(e);
  }

  /**
   * The answer of a refusal, for an application's own handler.
   *
   * @param e the refusal
   * @return status, {@code Retry-After} and problem body
   */
  public static ResponseEntity<ProblemDetail> answer(FlowgateRefusedException e) {
    HttpStatus status = HttpStatus.valueOf(e.httpStatus());
    ProblemDetail problem = ProblemDetail.forStatusAndDetail(status, e.getMessage());
    problem.setProperty("code", e.code());
    problem.setProperty("domain", e.domain());
    ResponseEntity.BodyBuilder answer = ResponseEntity.status(status);
    e.retryAfter()
        .ifPresent(
            d -> {
              // Rounded up, as the header's seconds are: the two never disagree.
              long ms = d.toMillis() + (d.toNanosPart() % 1_000_000 > 0 ? 1 : 0);
              problem.setProperty("retry_after_ms", ms);
              answer.header(HttpHeaders.RETRY_AFTER, Long.toString(e.retryAfterSeconds().get()));
            });
    return answer.body(problem);
  }
}
