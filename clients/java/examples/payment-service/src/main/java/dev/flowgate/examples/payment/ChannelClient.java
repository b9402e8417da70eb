package dev.flowgate.examples.payment;

import dev.flowgate.spring.FlowgateBreaker;
import java.util.Map;
import org.springframework.core.env.Environment;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.web.client.RestClient;
import org.springframework.web.client.RestClientException;

/**
 * The channel's API, behind the channel's Flowgate circuit breaker: each call's outcome is
 * reported to it (a thrown {@link ChannelFailedException} is a failure); once it opens, calls are
 * refused at once with {@code FlowgateCircuitOpenException} (503 with {@code Retry-After}) until
 * a probe succeeds.
 */
@Component
public class ChannelClient {
  private final RestClient http = RestClient.create();
  private final Environment environment;

  public ChannelClient(Environment environment) {
    this.environment = environment;
  }

  @FlowgateBreaker(domain = "channels", descriptors = "channel=#{#p.channel}")
  public Receipt charge(Payment p) {
    // Read at each call: the fake channel's port is known once the web server has started.
    String url = environment.getRequiredProperty("channel.base-url") + "/charge";
    try {
      Map<?, ?> answer =
          http.post()
              .uri(url)
              .contentType(MediaType.APPLICATION_JSON)
              .body(Map.of("channel", p.channel(), "amount", p.amount().toPlainString()))
              .retrieve()
              .body(Map.class);
      return new Receipt(p.channel(), p.amount(), String.valueOf(answer.get("reference")));
    } catch (RestClientException e) {
      throw new ChannelFailedException(p.channel(), e);
    }
  }
}
