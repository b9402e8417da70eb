package dev.flowgate.spring;

import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.Worker;

/**
 * Where the {@link FlowgateWorker} workers' counts are published: Micrometer meters when it is on
 * the class path and the application has a registry ({@link MicrometerWorkerMeters}), otherwise
 * nowhere.
 */
interface WorkerMeters {
  /** Publishes nothing. */
  WorkerMeters NONE = (queue, worker) -> {};

  /**
   * Publishes a worker's counts ({@link Worker#stats()}), read when the meters are.
   *
   * @param queue the instance it drains
   * @param worker the worker
   */
  void register(QueueInstance queue, Worker worker);
}
