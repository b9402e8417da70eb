package dev.flowgate.client;

import com.fasterxml.jackson.databind.JsonNode;
import dev.flowgate.client.queue.Job;
import dev.flowgate.client.queue.NackAnswer;
import dev.flowgate.client.queue.NewJob;
import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.QueuesOverview;
import dev.flowgate.client.queue.SubmitAnswer;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The queue routes' bodies (every option set) and answer records, which {@link
 * OpenApiDriftTest} checks against {@code docs/openapi.json} with the other routes'.
 */
final class QueueDriftSamples {
  private QueueDriftSamples() {}

  static Map<Route, List<JsonNode>> requests() {
    QueueInstance q =
        QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", "WPG"));
    List<NewJob> jobs =
        List.of(
            NewJob.jsonText("{\"refund\":\"R-1\",\"amount\":12.50}")
                .withKey("R-1")
                .notBefore(Instant.ofEpochMilli(1_800_000_000_000L)),
            NewJob.bytes(new byte[] {0, 1, 2, (byte) 0xff}).withKey("R-2"));
    Map<Route, List<JsonNode>> out = new LinkedHashMap<>();
    out.put(Route.QUEUES, List.of());
    out.put(Route.QUEUE_SUBMIT, List.of(QueueBodies.submit(q, jobs)));
    out.put(Route.QUEUE_LEASE, List.of(QueueBodies.lease(q, Duration.ofSeconds(20))));
    out.put(Route.QUEUE_ACK, List.of(QueueBodies.ack("t")));
    out.put(
        Route.QUEUE_NACK,
        List.of(QueueBodies.nack("t", Duration.ofSeconds(3)), QueueBodies.nack("t", null)));
    out.put(Route.QUEUE_DEAD, List.of(QueueBodies.dead(q, 10, 100)));
    out.put(
        Route.QUEUE_DEAD_REQUEUE,
        List.of(QueueBodies.deadIds(q, List.of(2L, 7L)), QueueBodies.deadIds(q, List.of())));
    out.put(Route.QUEUE_DEAD_PURGE, List.of(QueueBodies.deadIds(q, List.of(2L))));
    out.put(Route.QUEUE_PURGE, List.of(QueueBodies.instance(q)));
    return out;
  }

  static Map<Route, List<Class<?>>> answers() {
    Map<Route, List<Class<?>>> out = new LinkedHashMap<>();
    out.put(Route.QUEUES, List.of(QueuesOverview.class));
    out.put(Route.QUEUE_SUBMIT, List.of(SubmitAnswer.class));
    out.put(Route.QUEUE_LEASE, List.of(Job.class));
    out.put(Route.QUEUE_ACK, List.of(QueueCounts.Acked.class));
    out.put(Route.QUEUE_NACK, List.of(NackAnswer.class));
    out.put(Route.QUEUE_DEAD, List.of(QueueCounts.DeadLetters.class));
    out.put(Route.QUEUE_DEAD_REQUEUE, List.of(QueueCounts.Requeued.class));
    out.put(Route.QUEUE_DEAD_PURGE, List.of(QueueCounts.Purged.class));
    out.put(Route.QUEUE_PURGE, List.of(QueueCounts.Purged.class));
    return out;
  }
}
