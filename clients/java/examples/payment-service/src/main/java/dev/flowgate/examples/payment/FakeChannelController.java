package dev.flowgate.examples.payment;

import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.PutMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * A stand-in for a payment channel's API, served by this application so that the example runs
 * alone: {@code POST /fake-channel/charge} answers a reference, or 500 while it is made to fail
 * ({@code PUT /fake-channel/failing?on=true}).
 */
@RestController
@RequestMapping("/fake-channel")
public class FakeChannelController {
  private final AtomicBoolean failing = new AtomicBoolean();

  @PostMapping("/charge")
  public ResponseEntity<Map<String, String>> charge(@RequestBody Map<String, String> payment) {
    if (failing.get()) {
      return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR)
          .body(Map.of("error", "the channel is down"));
    }
    return ResponseEntity.ok(Map.of("reference", UUID.randomUUID().toString()));
  }

  @PutMapping("/failing")
  public Map<String, Boolean> failing(@RequestParam boolean on) {
    failing.set(on);
    return Map.of("failing", on);
  }
}
