package dev.flowgate.client.grpc;

import flowgate.v1.DecisionsGrpc;
import flowgate.v1.DecisionsOuterClass.CheckAnswer;
import flowgate.v1.DecisionsOuterClass.CheckRequest;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * One {@code flowgate.v1.Decisions/CheckStream} call: requests sent as the stream's flow control
 * lets them go, each answer completing the future of its id.
 *
 * <p>Thread-safe: any thread sends; gRPC's events are handled where they arrive, on the
 * channel's network thread (completing a future there is all they do). Requests wait in a queue
 * while the stream is not ready (HTTP/2 flow control), and whichever thread finds it ready sends
 * them, one thread at a time (a {@link ClientCall} is not thread-safe).
 *
 * <p>When the stream ends (the server restarting, the connection lost, a credential refused),
 * every request still unanswered fails with the stream's status: none is sent again, since a
 * check may have consumed units. The stream is then dead; its owner opens another.
 */
final class CheckStream {
  private final ClientCall<CheckRequest, CheckAnswer> call;
  private final Map<Long, CompletableFuture<CheckAnswer>> pending = new ConcurrentHashMap<>();
  private final Queue<CheckRequest> unsent = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean sending = new AtomicBoolean();
  /** Called once when the stream ends, with its status and the futures it left unanswered. */
  private final Consumer<Ended> onEnd;

  private volatile Status closed;

  /** How a stream ended. */
  record Ended(CheckStream stream, Status status, Map<Long, CompletableFuture<CheckAnswer>> left) {}

  CheckStream(ManagedChannel channel, Consumer<Ended> onEnd) {
    this.onEnd = onEnd;
    this.call =
        channel.newCall(
            DecisionsGrpc.getCheckStreamMethod(), CallOptions.DEFAULT.withExecutor(Runnable::run));
    call.start(new Listener(), new Metadata());
    call.request(Integer.MAX_VALUE);
  }

  /** Whether the stream has ended: a new request must go on another. */
  boolean isClosed() {
    return closed != null;
  }

  /**
   * Sends {@code request}, whose answer completes {@code answer}; false, with nothing sent, when
   * the stream has ended already.
   */
  boolean send(CheckRequest request, CompletableFuture<CheckAnswer> answer) {
    if (closed != null) {
      return false;
    }
    pending.put(request.getId(), answer);
    if (closed != null) {
      // Ended meanwhile, this request never sent: on another stream, unless the end failed it
      // already (then it fails as the requests in flight did).
      return pending.remove(request.getId()) == null;
    }
    unsent.add(request);
    drain();
    return true;
  }

  /** Forgets the request of {@code id} (its caller stopped waiting): its answer is dropped. */
  void forget(long id) {
    pending.remove(id);
  }

  /** Sends the queued requests while the stream is ready, one sending thread at a time. */
  private void drain() {
    while (!unsent.isEmpty() && sending.compareAndSet(false, true)) {
      try {
        CheckRequest next;
        while (call.isReady() && (next = unsent.poll()) != null) {
          call.sendMessage(next);
        }
      } catch (RuntimeException e) {
        call.cancel("a request could not be sent", e);
      } finally {
        sending.set(false);
      }
      if (!call.isReady()) {
        // onReady sends the rest (it comes after this thread let go of `sending`, or finds
        // the queue drained).
        return;
      }
    }
  }

  /**
   * Closes the stream's sending side once the requests queued are sent: the server answers
   * those in flight, then ends the stream.
   */
  void finish() {
    closed = Status.UNAVAILABLE.withDescription("the client is closed");
    while (!sending.compareAndSet(false, true)) {
      Thread.onSpinWait();
    }
    try {
      CheckRequest next;
      while ((next = unsent.poll()) != null) {
        call.sendMessage(next);
      }
      call.halfClose();
    } catch (RuntimeException e) {
      call.cancel("the stream could not be closed", e);
    } finally {
      sending.set(false);
    }
  }

  /** Ends the stream from this side: the requests in flight fail as cancelled. */
  void cancel(String why) {
    call.cancel(why, null);
  }

  private final class Listener extends ClientCall.Listener<CheckAnswer> {
    @Override
    public void onMessage(CheckAnswer answer) {
      CompletableFuture<CheckAnswer> waiting = pending.remove(answer.getId());
      if (waiting != null) {
        waiting.complete(answer);
      }
    }

    @Override
    public void onReady() {
      drain();
    }

    @Override
    public void onClose(Status status, Metadata trailers) {
      Status end =
          status.isOk()
              ? Status.UNAVAILABLE.withDescription("the server ended the stream")
              : status;
      closed = end;
      unsent.clear();
      onEnd.accept(new Ended(CheckStream.this, end, pending));
    }
  }
}
