package dev.flowgate.client.queue;

import static dev.flowgate.client.queue.QueueTesting.WPG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.ConflictException;
import dev.flowgate.client.Descriptor;
import dev.flowgate.client.ErrorCode;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.FlowgateException;
import dev.flowgate.client.NotFoundException;
import dev.flowgate.client.Queues;
import dev.flowgate.client.testing.FlowgateServer;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The queue calls against a real server: submit with keys, lease, ack, nack, figures. */
class QueuesTest {
  static final byte[] BYTES = {0, 1, 2, (byte) 0xff, '{'};

  record Refund(String refund, BigDecimal amount) {}

  @Test
  @Timeout(60)
  void aBatchWithKeysIsAnsweredAsTheSameJobsWhenSubmittedAgain() {
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("50/s", ""))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      List<NewJob> batch =
          List.of(
              NewJob.json(new Refund("R-1", new BigDecimal("12.50"))).withKey("R-1"),
              NewJob.bytes(BYTES).withKey("R-2"),
              NewJob.json(Map.of("refund", "R-3"))
                  .notBefore(Instant.now().plus(Duration.ofHours(1))));
      SubmitAnswer first = queues.submit(WPG, batch);
      assertEquals("payments:refunds:biz=REFUND,channel=WPG", first.instance());
      assertEquals(3, first.jobs().size());
      first.jobs().forEach(j -> assertFalse(j.duplicate(), j.toString()));
      assertEquals(JobState.READY, first.jobs().get(0).state());
      assertEquals(0L, first.jobs().get(0).position());
      assertEquals(JobState.DELAYED, first.jobs().get(2).state());
      assertTrue(first.jobs().get(2).releaseIn().orElseThrow().toMinutes() >= 59);

      // Resubmitted (a retry after a timeout): the same jobs, nothing stored twice.
      SubmitAnswer again = queues.submitAsync(WPG, batch.subList(0, 2)).join();
      for (int i = 0; i < 2; i++) {
        assertEquals(first.jobs().get(i).id(), again.jobs().get(i).id());
        assertTrue(again.jobs().get(i).duplicate());
      }
      // The same key with another payload: refused, naming the conflict; nothing stored.
      ConflictException conflict =
          assertThrows(
              ConflictException.class,
              () -> queues.submit(WPG, NewJob.json(Map.of("refund", "other")).withKey("R-1")));
      assertEquals(ErrorCode.KEY_CONFLICT, conflict.code());
      InstanceStats stats = queues.overview().instance(first.instance()).orElseThrow();
      assertEquals(3L, stats.depth());
      assertEquals(3L, stats.submittedTotal());

      // Leased in submission order, payloads as submitted.
      Job r1 = queues.lease(WPG, Duration.ofSeconds(5)).orElseThrow();
      assertEquals(first.jobs().get(0).id(), r1.id());
      assertEquals(1, r1.attempt());
      assertEquals(new Refund("R-1", new BigDecimal("12.50")), r1.payloadAs(Refund.class));
      assertTrue(r1.leaseDeadline().isAfter(Instant.now()));
      queues.ack(r1);
      ConflictException twice = assertThrows(ConflictException.class, () -> queues.ack(r1));
      assertEquals(ErrorCode.NOT_HELD, twice.code());

      Job r2 = queues.leaseAsync(WPG, Duration.ofSeconds(5)).join().orElseThrow();
      assertArrayEquals(BYTES, r2.payloadBytes());
      assertThrows(IllegalStateException.class, () -> r2.payloadAs(Refund.class));
      NackAnswer nack = queues.nack(r2, Duration.ofMinutes(5));
      assertFalse(nack.dead());
      assertTrue(nack.retryAt().orElseThrow().isAfter(Instant.now().plusSeconds(200)), nack.toString());

      // Nothing else is due: a lease that waits 0 answers empty at once.
      assertTrue(queues.lease(WPG, Duration.ZERO).isEmpty());
      // An acked key is remembered: submitted again, the answer is the done job.
      SubmittedJob done = queues.submit(WPG, batch.get(0)).jobs().get(0);
      assertTrue(done.duplicate());
      assertEquals(JobState.DONE, done.state());

      InstanceStats after = queues.overview().instance(first.instance()).orElseThrow();
      assertEquals(1L, after.ackedTotal());
      assertEquals(2L, after.delayed(), after.toString());
      assertEquals("50/s", after.rate());
      QueueInfo info = queues.overview().queue("payments", "refunds").orElseThrow();
      assertEquals(List.of("biz=REFUND", "channel"), info.match());
    }
  }

  @Test
  @Timeout(60)
  void aFullQueueRefusesTheWholeBatchWithItsRetryTime() {
    try (FlowgateServer server =
        QueueTesting.server(QueueTesting.queue("1/s", "max_depth = 2"))) {
      Queues queues = QueueTesting.client(server.baseUrl()).queues();
      queues.submit(WPG, NewJob.jsonText("{\"n\": 0}"));
      FlowgateException full =
          assertThrows(
              FlowgateException.class,
              () ->
                  queues.submit(
                      WPG, List.of(NewJob.jsonText("{\"n\": 1}"), NewJob.jsonText("{\"n\": 2}"))));
      assertEquals(429, full.status());
      assertEquals(ErrorCode.QUEUE_FULL, full.code());
      assertEquals(Duration.ofSeconds(1), full.retryAfter().orElseThrow());
      // All or nothing: one job still fits.
      assertEquals(1, queues.submit(WPG, NewJob.jsonText("{\"n\": 1}")).jobs().size());
    }
  }

  @Test
  @Timeout(60)
  void anUnknownQueueAndBadArgumentsAreTypedErrors() {
    try (FlowgateServer server = QueueTesting.server(QueueTesting.queue("50/s", ""))) {
      FlowgateClient client = QueueTesting.client(server.baseUrl());
      Queues queues = client.queues();
      QueueInstance nowhere = QueueInstance.of("payments", Descriptor.of("biz", "PAY"));
      NotFoundException e =
          assertThrows(NotFoundException.class, () -> queues.lease(nowhere, Duration.ZERO));
      assertEquals(ErrorCode.UNKNOWN_QUEUE, e.code());
      assertThrows(
          IllegalArgumentException.class, () -> queues.lease(WPG, Duration.ofSeconds(61)));
      assertThrows(IllegalArgumentException.class, () -> queues.submit(WPG, List.of()));
      // Dead letters: none yet; a purge of an id that is not one changes nothing.
      assertEquals(List.of(), queues.deadLetters(WPG, 0, 100));
      long id = queues.submit(WPG, NewJob.jsonText("{\"n\": 1}")).jobs().get(0).id();
      ConflictException notDead =
          assertThrows(ConflictException.class, () -> queues.purgeDead(WPG, List.of(id)));
      assertEquals(ErrorCode.NOT_DEAD, notDead.code());
      assertEquals(1L, queues.purge(WPG));
      assertNotEquals(0L, id);
    }
  }
}
