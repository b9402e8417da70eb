package dev.flowgate.spring;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.queue.Job;
import dev.flowgate.client.queue.JobHandler;
import dev.flowgate.client.queue.JobResult;
import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.Worker;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/**
 * The {@link FlowgateWorker} methods' workers: found and started when the application context
 * starts (after every other lifecycle bean: the web server and the datasources are up), stopped
 * gracefully first when it closes (leasing ends at once, jobs in flight get {@code
 * flowgate.worker.shutdown-grace}, the rest are handed back to the queue). A bad annotation (an
 * unparsable descriptor, a method without its one parameter) fails the start, naming its method.
 */
public class QueueWorkers implements SmartLifecycle {
  private static final Log LOG = LogFactory.getLog(QueueWorkers.class);

  private final ConfigurableListableBeanFactory beans;
  private final FlowgateClient client;
  private final Environment environment;
  private final WorkerMeters meters;
  private final Duration grace;
  private final List<Worker> workers = new ArrayList<>();
  private volatile boolean running;

  QueueWorkers(
      ConfigurableListableBeanFactory beans,
      FlowgateClient client,
      Environment environment,
      WorkerMeters meters,
      Duration grace) {
    this.beans = beans;
    this.client = client;
    this.environment = environment;
    this.meters = meters;
    this.grace = grace;
  }

  /** The workers started, one per annotated method (for tests and diagnostics). */
  public synchronized List<Worker> workers() {
    return List.copyOf(workers);
  }

  @Override
  public synchronized void start() {
    if (running) {
      return;
    }
    List<Worker> built = new ArrayList<>();
    for (String name : beans.getBeanDefinitionNames()) {
      if (!beans.containsBeanDefinition(name) || beans.getBeanDefinition(name).isAbstract()) {
        continue;
      }
      Class<?> type = beans.getType(name, false);
      if (type == null) {
        continue;
      }
      Map<Method, FlowgateWorker> methods =
          MethodIntrospector.selectMethods(
              ClassUtils.getUserClass(type),
              (MethodIntrospector.MetadataLookup<FlowgateWorker>)
                  m -> AnnotatedElementUtils.findMergedAnnotation(m, FlowgateWorker.class));
      if (methods.isEmpty()) {
        continue;
      }
      Object bean = beans.getBean(name);
      methods.forEach((m, a) -> built.add(build(bean, m, a)));
    }
    built.forEach(Worker::start);
    workers.addAll(built);
    running = true;
  }

  private Worker build(Object bean, Method method, FlowgateWorker a) {
    String where = method.getDeclaringClass().getSimpleName() + "." + method.getName();
    if (method.getParameterCount() != 1 || Modifier.isStatic(method.getModifiers())) {
      throw new IllegalStateException(
          "@FlowgateWorker " + where + ": the method takes one parameter (the payload or the Job)");
    }
    if (method.getGenericParameterTypes()[0] instanceof ParameterizedType) {
      // Job.payloadAs binds to a class: a List<Refund> would come as a list of maps.
      throw new IllegalStateException(
          "@FlowgateWorker "
              + where
              + ": the parameter is a class the payload binds to (a record, say), or the Job;"
              + " not a generic type");
    }
    if (a.concurrency() < 1 || a.concurrency() > 1024) {
      throw new IllegalStateException(
          "@FlowgateWorker " + where + ": concurrency is 1 to 1,024, not " + a.concurrency());
    }
    QueueInstance queue;
    try {
      queue =
          QueueInstance.of(
              environment.resolveRequiredPlaceholders(a.domain()),
              descriptor(environment.resolveRequiredPlaceholders(a.descriptor()), where));
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException("@FlowgateWorker " + where + ": " + e.getMessage(), e);
    }
    Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
    invocable.setAccessible(true);
    Worker worker =
        Worker.builder(client.queues(), queue)
            .handler(handler(bean, invocable))
            .concurrency(a.concurrency())
            .stopGrace(grace)
            .build();
    meters.register(queue, worker);
    return worker;
  }

  private static JobHandler handler(Object bean, Method method) {
    Class<?> type = method.getParameterTypes()[0];
    return job -> {
      Object argument = type == Job.class ? job : job.payloadAs(type);
      Object result;
      try {
        result = method.invoke(bean, argument);
      } catch (InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (cause instanceof Exception ex) {
          throw ex;
        }
        throw (Error) cause;
      }
      return result instanceof JobResult r ? r : JobResult.ack();
    };
  }

  /** Parses {@code "biz=REFUND, channel=WPG"}. */
  static Descriptor descriptor(String source, String where) {
    Map<String, String> entries = new LinkedHashMap<>();
    for (String entry : source.split(",")) {
      int eq = entry.indexOf('=');
      String key = eq < 0 ? "" : entry.substring(0, eq).strip();
      if (key.isEmpty() || entries.put(key, entry.substring(eq + 1).strip()) != null) {
        throw new IllegalStateException(
            "@FlowgateWorker "
                + where
                + ": descriptor \""
                + source
                + "\" is entries key=value separated by commas, each key once");
      }
    }
    return Descriptor.of(entries);
  }

  @Override
  public void stop() {
    stop(() -> {});
  }

  @Override
  public void stop(Runnable callback) {
    List<Worker> stopping;
    synchronized (this) {
      stopping = List.copyOf(workers);
      running = false;
    }
    if (stopping.isEmpty()) {
      callback.run();
      return;
    }
    // Logged here through the application's logging: the workers' own stop lines go through
    // java.util.logging, whose bridge Spring Boot removes as the context closes.
    LOG.info(
        "stopping " + stopping.size() + " Flowgate worker(s): jobs in flight get " + grace.toMillis() + " ms");
    // All at once, each on a thread of its own: the grace is the application's, not each
    // worker's (the common pool may have a single thread).
    List<CompletableFuture<Boolean>> stops =
        stopping.stream()
            .map(w -> CompletableFuture.supplyAsync(() -> w.stop(grace), QueueWorkers::stopThread))
            .toList();
    CompletableFuture.allOf(stops.toArray(CompletableFuture[]::new))
        .whenComplete(
            (ok, e) -> {
              if (e != null) {
                LOG.warn("stopping the Flowgate workers failed", e);
              } else {
                long handedBack = stopping.stream().mapToLong(w -> w.stats().handedBack()).sum();
                LOG.info(
                    handedBack == 0
                        ? "Flowgate workers stopped: every job in flight finished"
                        : "Flowgate workers stopped: "
                            + handedBack
                            + " job(s) still running after the grace were handed back");
              }
              callback.run();
            });
  }

  private static void stopThread(Runnable stop) {
    Thread t = new Thread(stop, "flowgate-worker-stop");
    t.setDaemon(true);
    t.start();
  }

  @Override
  public boolean isRunning() {
    return running;
  }
}
