package dev.flowgate.client.queue;

import java.util.List;
import java.util.Optional;

/**
 * The answer of {@code GET /v1/queues}: the declared queues, and every instance's figures.
 *
 * @param queues the declared queues
 * @param instances every instance with jobs or figures
 */
public record QueuesOverview(List<QueueInfo> queues, List<InstanceStats> instances) {
  /** Replaces absent lists by empty ones. */
  public QueuesOverview {
    queues = queues == null ? List.of() : List.copyOf(queues);
    instances = instances == null ? List.of() : List.copyOf(instances);
  }

  /**
   * The instance of this key ({@link SubmitAnswer#instance()}, {@link Job#instance()}).
   *
   * @param key the instance's key
   * @return its figures, if listed
   */
  public Optional<InstanceStats> instance(String key) {
    return instances.stream().filter(i -> i.instance().equals(key)).findFirst();
  }

  /**
   * The declared queue of this domain and name.
   *
   * @param domain the domain
   * @param name the queue's name
   * @return the queue, if declared
   */
  public Optional<QueueInfo> queue(String domain, String name) {
    return queues.stream()
        .filter(q -> q.domain().equals(domain) && q.name().equals(name))
        .findFirst();
  }
}
