package dev.flowgate.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.queue.Job;
import dev.flowgate.client.queue.NewJob;
import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.RetryJobException;
import dev.flowgate.client.testing.Await;
import dev.flowgate.client.testing.FlowgateServer;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * {@code @FlowgateWorker} against the real server's queues: a submitted job reaches the
 * annotated method (its payload bound by type, or the job itself), a failure is retried (after
 * a {@link RetryJobException}'s delay, or the queue's backoff), the workers' meters count, and a
 * context that closes with a job in flight lets it finish within the grace, or hands it back.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkerAnnotationTest {
  static final String RULES =
      """
      domain = "jobs"

      [[queue]]
      name = "tasks"
      match = ["queue"]
      rate = "50/s"
      lease = "30s"
      max_attempts = 3
      retry_backoff = "1s"
      """;

  /** A task of the tests: {@code fail} says how its first attempt fails. */
  public record Task(String id, String fail) {}

  /** What a handler saw: the task, and when. */
  record Seen(String id, long atNanos) {}

  static FlowgateServer server;
  static FlowgateClient client;

  @BeforeAll
  static void start() {
    server = FlowgateServer.start(RULES);
    client = FlowgateClient.builder(server.baseUrl()).build();
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  /** The handlers: by payload type (queue=typed) and by job (queue=raw). */
  public static class Handlers {
    final List<Seen> seen = new CopyOnWriteArrayList<>();
    final Map<String, CountDownLatch> blocking = new ConcurrentHashMap<>();
    final List<String> raw = new CopyOnWriteArrayList<>();

    @FlowgateWorker(domain = "jobs", descriptor = "queue=${test.queue:typed}", concurrency = 2)
    public void handle(Task task) throws Exception {
      seen.add(new Seen(task.id(), System.nanoTime()));
      switch (task.fail() == null ? "" : task.fail()) {
        case "retry-after" -> {
          if (attempts(task.id()) == 1) {
            throw new RetryJobException("the channel said later", Duration.ofMillis(200));
          }
        }
        case "exception" -> {
          if (attempts(task.id()) == 1) {
            throw new IllegalStateException("the channel failed");
          }
        }
        case "slow" -> Thread.sleep(700);
        case "block" -> blocking.computeIfAbsent(task.id(), k -> new CountDownLatch(1)).await();
        default -> {}
      }
    }

    @FlowgateWorker(domain = "jobs", descriptor = "queue=raw")
    public void handleJob(Job job) {
      raw.add(job.payload().path("id").asText() + "#" + job.attempt());
    }

    long attempts(String id) {
      return seen.stream().filter(s -> s.id().equals(id)).count();
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class App {
    @Bean
    Handlers handlers() {
      return new Handlers();
    }

    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  static ConfigurableApplicationContext run(String queue, String grace) {
    return new SpringApplicationBuilder(App.class)
        .web(WebApplicationType.NONE)
        .properties(
            Map.of(
                "flowgate.base-url", server.baseUrl(),
                "flowgate.worker.shutdown-grace", grace,
                "test.queue", queue,
                "spring.main.banner-mode", "off",
                "logging.level.root", "warn",
                // The handlers' expected failures and hand-backs, logged with their stacks.
                "logging.level.dev.flowgate.client.queue.Worker", "error"))
        .run();
  }

  static QueueInstance queue(String value) {
    return QueueInstance.of("jobs", Descriptor.of("queue", value));
  }

  static void submit(String queue, Task... tasks) {
    client
        .queues()
        .submit(
            queue(queue),
            java.util.Arrays.stream(tasks).map(t -> NewJob.json(t).withKey(t.id())).toList());
  }

  @Test
  void jobsReachTheMethodsAndFailuresAreRetried() {
    try (ConfigurableApplicationContext app = run("typed", "5s")) {
      Handlers h = app.getBean(Handlers.class);
      submit(
          "typed",
          new Task("t1", null),
          new Task("t2", "retry-after"),
          new Task("t3", "exception"));
      client.queues().submit(queue("raw"), NewJob.json(Map.of("id", "r1")));
      Await.until(
          Duration.ofSeconds(20),
          () -> "every task done, retried ones twice: " + h.seen + " " + h.raw,
          () ->
              h.attempts("t1") == 1
                  && h.attempts("t2") == 2
                  && h.attempts("t3") == 2
                  && h.raw.equals(List.of("r1#1")));
      // The queue's backoff (1 s) spaced t3's attempts; the exception's 200 ms spaced t2's.
      assertTrue(gapMs(h, "t3") >= 900, "t3 retried after " + gapMs(h, "t3") + " ms");
      assertTrue(gapMs(h, "t2") >= 150, "t2 retried after " + gapMs(h, "t2") + " ms");

      MeterRegistry meters = app.getBean(MeterRegistry.class);
      String typed = queue("typed").toString();
      Await.until(
          Duration.ofSeconds(10),
          "the acks counted",
          () -> jobs(meters, typed, "acked") == 3 && jobs(meters, typed, "nacked") == 2);
      assertEquals(
          2.0,
          meters.get("flowgate.worker.handler.failures").tag("queue", typed).functionCounter()
              .count());
      assertEquals(2, app.getBean(QueueWorkers.class).workers().size());
    }
  }

  @Test
  void aJobInFlightAtCloseFinishesWithinTheGrace() {
    ConfigurableApplicationContext app = run("slow", "10s");
    Handlers h = app.getBean(Handlers.class);
    QueueWorkers workers = app.getBean(QueueWorkers.class);
    submit("slow", new Task("s1", "slow"));
    Await.until(Duration.ofSeconds(10), "the job started", () -> h.attempts("s1") == 1);
    app.close();
    assertFalse(workers.isRunning());
    assertEquals(1, workers.workers().stream().mapToLong(w -> w.stats().acked()).sum());
    assertEquals(0, workers.workers().stream().mapToLong(w -> w.stats().handedBack()).sum());
    // Acked: nothing is left to lease.
    assertEquals(Optional.empty(), client.queues().lease(queue("slow"), Duration.ZERO));
  }

  @Test
  void aJobStillRunningPastTheGraceIsHandedBack() {
    ConfigurableApplicationContext app = run("stuck", "300ms");
    Handlers h = app.getBean(Handlers.class);
    submit("stuck", new Task("b1", "block"));
    Await.until(Duration.ofSeconds(10), "the job started", () -> h.attempts("b1") == 1);
    app.close();
    // Handed back at once: the next lease gets it again, as its second attempt.
    Job again = client.queues().lease(queue("stuck"), Duration.ofSeconds(5)).orElseThrow();
    assertEquals("b1", again.payload().path("id").asText());
    assertEquals(2, again.attempt());
    client.queues().ack(again);
  }

  /** A handler that cannot be one: two parameters. */
  public static class BadHandler {
    @FlowgateWorker(domain = "jobs", descriptor = "queue=bad")
    public void handle(Task task, String extra) {}
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class BadApp {
    @Bean
    BadHandler badHandler() {
      return new BadHandler();
    }
  }

  /** A handler whose payload cannot be bound: a generic type. */
  public static class GenericHandler {
    @FlowgateWorker(domain = "jobs", descriptor = "queue=bad")
    public void handle(List<Task> tasks) {}
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class GenericApp {
    @Bean
    GenericHandler genericHandler() {
      return new GenericHandler();
    }
  }

  @Test
  void anUnusableAnnotationFailsTheStartNamingItsMethod() {
    assertStartFails(BadApp.class, "@FlowgateWorker BadHandler.handle: the method takes one");
    assertStartFails(GenericApp.class, "@FlowgateWorker GenericHandler.handle: the parameter is");
  }

  static void assertStartFails(Class<?> app, String expected) {
    Exception e =
        assertThrows(
            Exception.class,
            () ->
                new SpringApplicationBuilder(app)
                    .web(WebApplicationType.NONE)
                    .properties(
                        Map.of(
                            "flowgate.base-url", server.baseUrl(),
                            "spring.main.banner-mode", "off",
                            "logging.level.root", "off"))
                    .run()
                    .close());
    String messages = "";
    for (Throwable t = e; t != null; t = t.getCause()) {
      messages += t.getMessage() + " / ";
    }
    assertTrue(messages.contains(expected), messages);
  }

  static long gapMs(Handlers h, String id) {
    List<Seen> s = h.seen.stream().filter(x -> x.id().equals(id)).toList();
    return (s.get(1).atNanos() - s.get(0).atNanos()) / 1_000_000;
  }

  static double jobs(MeterRegistry meters, String queue, String outcome) {
    var c =
        meters.find("flowgate.worker.jobs").tag("queue", queue).tag("outcome", outcome)
            .functionCounter();
    return c == null ? -1 : c.count();
  }
}
