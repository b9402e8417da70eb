package dev.flowgate.client.queue;

/**
 * The work a {@link Worker} does with each job. It returns what became of the job ({@link
 * JobResult#ack()}, {@link JobResult#retry}), or throws: a {@link RetryJobException} is retried
 * after its delay, any other exception after the queue's {@code retry_backoff}. Returning null
 * acks.
 *
 * <p>With a worker's {@code concurrency} above 1 it is called from several threads at once. A
 * worker that stops past its grace interrupts the threads still running it: a handler that
 * blocks should let an interrupt end it.
 */
@FunctionalInterface
public interface JobHandler {
  /**
   * Does the job's work.
   *
   * @param job the leased job; finish before its {@link Job#leaseDeadline()}
   * @return what became of it
   * @throws Exception when it failed: the job is retried
   */
  JobResult handle(Job job) throws Exception;
}
