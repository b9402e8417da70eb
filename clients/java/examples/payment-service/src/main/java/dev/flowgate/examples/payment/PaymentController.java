package dev.flowgate.examples.payment;

import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.ResponseStatus;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /payments}. Refusals need no code here: the starter answers them (429 over the
 * channel's limit, 503 while its breaker is open, both with {@code Retry-After}).
 */
@RestController
public class PaymentController {
  private final PaymentService payments;

  public PaymentController(PaymentService payments) {
    this.payments = payments;
  }

  @PostMapping("/payments")
  public Receipt pay(@RequestBody Payment payment) {
    return payments.pay(payment);
  }

  /** The channel's own failure: 502, the channel's fault, not the caller's. */
  @ExceptionHandler(ChannelFailedException.class)
  @ResponseStatus(HttpStatus.BAD_GATEWAY)
  public Map<String, String> channelFailed(ChannelFailedException e) {
    return Map.of("error", e.getMessage());
  }
}
