package dev.flowgate.client;

import java.util.concurrent.CompletableFuture;

/**
 * A future whose cancellation, or that of any future depending on it ({@code thenApply},
 * {@code thenCompose}...), runs an abort (closing the connection of an exchange in progress),
 * as the JDK's HTTP client does for its own futures: a worker that cancels a long-poll lease
 * gets its connection closed, so the server keeps the job.
 *
 * @param <T> the value
 */
final class AbortableFuture<T> extends CompletableFuture<T> {
  private final Runnable abort;

  AbortableFuture(Runnable abort) {
    this.abort = abort;
  }

  @Override
  public <U> CompletableFuture<U> newIncompleteFuture() {
    return new AbortableFuture<>(abort);
  }

  @Override
  public boolean cancel(boolean mayInterruptIfRunning) {
    boolean cancelled = super.cancel(mayInterruptIfRunning);
    abort.run();
    return cancelled;
  }
}
