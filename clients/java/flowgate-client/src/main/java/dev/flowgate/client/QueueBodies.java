package dev.flowgate.client;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.flowgate.client.queue.NewJob;
import dev.flowgate.client.queue.QueueInstance;
import java.time.Duration;
import java.util.Base64;
import java.util.List;

/**
 * The JSON bodies of the queue routes, one function per route: the one place their fields are
 * named, which the drift test checks against {@code docs/openapi.json}.
 */
final class QueueBodies {
  private QueueBodies() {}

  /** {@code domain} and {@code descriptor}: the instance every queue route but ack/nack names. */
  static ObjectNode instance(QueueInstance queue) {
    ObjectNode body = JsonTransport.JSON.createObjectNode();
    body.put("domain", queue.domain());
    body.set("descriptor", Bodies.descriptor(queue.descriptor()));
    return body;
  }

  /** {@code POST /v1/queues/submit}: always the batch form ({@code jobs}), one job or many. */
  static ObjectNode submit(QueueInstance queue, List<NewJob> jobs) {
    ObjectNode body = instance(queue);
    ArrayNode list = body.putArray("jobs");
    for (NewJob job : jobs) {
      ObjectNode j = list.addObject();
      if (job.payload() != null) {
        j.set("payload", job.payload());
      } else {
        j.put("payload_base64", Base64.getEncoder().encodeToString(job.bytes()));
      }
      if (job.key() != null) {
        j.put("key", job.key());
      }
      if (job.notBefore() != null) {
        j.put("not_before_ms", job.notBefore().toEpochMilli());
      }
    }
    return body;
  }

  /** {@code POST /v1/queues/lease}: a long-poll of up to {@code wait} (whole milliseconds). */
  static ObjectNode lease(QueueInstance queue, Duration wait) {
    ObjectNode body = instance(queue);
    body.put("wait_ms", wait.toMillis());
    return body;
  }

  /** {@code POST /v1/queues/ack}. */
  static ObjectNode ack(String token) {
    return JsonTransport.JSON.createObjectNode().put("token", token);
  }

  /** {@code POST /v1/queues/nack}: without {@code retryAfter}, the queue's backoff. */
  static ObjectNode nack(String token, Duration retryAfter) {
    ObjectNode body = ack(token);
    if (retryAfter != null) {
      body.put("retry_after_ms", retryAfter.toMillis());
    }
    return body;
  }

  /** {@code POST /v1/queues/dead}: a page of the dead letters. */
  static ObjectNode dead(QueueInstance queue, int offset, int limit) {
    ObjectNode body = instance(queue);
    body.put("offset", offset);
    body.put("limit", limit);
    return body;
  }

  /** {@code POST /v1/queues/dead/requeue} and {@code .../dead/purge}: {@code ids}, or all. */
  static ObjectNode deadIds(QueueInstance queue, List<Long> ids) {
    ObjectNode body = instance(queue);
    if (ids != null && !ids.isEmpty()) {
      ArrayNode list = body.putArray("ids");
      ids.forEach(list::add);
    }
    return body;
  }
}
