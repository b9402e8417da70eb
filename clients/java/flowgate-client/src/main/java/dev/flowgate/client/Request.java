package dev.flowgate.client;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What a decision is asked about: a domain, its descriptors, and the request's cost. Immutable;
 * the {@code with} methods return copies.
 *
 * <pre>{@code
 * Request req = Request.of("payments", Descriptor.of("channel", "WPG"));
 * Request three = req.withCost(3);
 * }</pre>
 *
 * @param domain the domain of the rules
 * @param descriptors the descriptors (at least one, at most 64)
 * @param cost the units the request takes, exactly (0 only looks), or null for 1
 */
public record Request(String domain, List<Descriptor> descriptors, Long cost) {

  /** Copies the descriptors and checks the request can be sent. */
  public Request {
    Objects.requireNonNull(domain, "domain");
    descriptors = List.copyOf(descriptors);
    if (descriptors.isEmpty()) {
      throw new IllegalArgumentException("a request needs at least one descriptor");
    }
    if (cost != null && cost < 0) {
      throw new IllegalArgumentException("cost is negative: " + cost);
    }
  }

  /**
   * A request of cost 1.
   *
   * @param domain the domain of the rules
   * @param descriptors its descriptors
   * @return the request
   */
  public static Request of(String domain, Descriptor... descriptors) {
    return new Request(domain, Arrays.asList(descriptors), null);
  }

  /**
   * A request of cost 1.
   *
   * @param domain the domain of the rules
   * @param descriptors its descriptors
   * @return the request
   */
  public static Request of(String domain, List<Descriptor> descriptors) {
    return new Request(domain, descriptors, null);
  }

  /**
   * This request with a cost.
   *
   * @param cost the units it takes (0 only looks)
   * @return a new request
   */
  public Request withCost(long cost) {
    return new Request(domain, descriptors, cost);
  }
}
