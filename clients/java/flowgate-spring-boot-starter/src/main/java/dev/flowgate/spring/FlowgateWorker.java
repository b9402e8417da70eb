package dev.flowgate.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Makes the annotated bean method the handler of a queue instance's jobs: at startup the starter
 * builds a {@link dev.flowgate.client.queue.Worker} per annotated method, started with the
 * application context and stopped with it (leasing stops, jobs in flight get {@code
 * flowgate.worker.shutdown-grace} to finish, the rest are handed back to the queue).
 *
 * <pre>{@code
 * @FlowgateWorker(domain = "payments", descriptor = "biz=REFUND, channel=WPG", concurrency = 2)
 * public void refund(Refund r) { channel.refund(r); }
 * }</pre>
 *
 * <p>The method takes one parameter: the job's JSON payload bound to the parameter's class by
 * Jackson (field names as they are; not a generic type), or the {@link
 * dev.flowgate.client.queue.Job} itself. It
 * returns nothing (the job is acked when it returns), anything else (ignored, acked), or a
 * {@link dev.flowgate.client.queue.JobResult}. When it throws, the job is nacked: after the
 * delay of a {@link dev.flowgate.client.queue.RetryJobException}, otherwise after the queue's
 * {@code retry_backoff}; after the queue's {@code max_attempts} it goes to the dead letters. A
 * payload that does not fit the parameter's type fails the same way.
 *
 * <p>The method is called through the bean (its proxy when it has one), from up to {@link
 * #concurrency()} threads at once.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface FlowgateWorker {
  /**
   * The queue's domain ({@code [[queue]] domain}); {@code ${...}} placeholders are resolved.
   *
   * @return the domain
   */
  String domain();

  /**
   * The descriptor that picks the queue and its instance: entries {@code key=value} separated by
   * commas ({@code "biz=REFUND, channel=WPG"}); {@code ${...}} placeholders are resolved.
   *
   * @return the descriptor
   */
  String descriptor();

  /**
   * How many jobs run at once (1 to 1,024): the worker's threads. The queue's rate spaces the
   * jobs whatever the count; more helps only when a job takes longer than the spacing.
   *
   * @return the count
   */
  int concurrency() default 1;
}
