package dev.flowgate.client;

/**
 * The server's routes this client calls, each with its method: the one list of them, which the
 * drift test checks against {@code docs/openapi.json}.
 */
enum Route {
  QUEUES("GET", "/v1/queues"),
  QUEUE_SUBMIT("POST", "/v1/queues/submit"),
  QUEUE_LEASE("POST", "/v1/queues/lease"),
  QUEUE_ACK("POST", "/v1/queues/ack"),
  QUEUE_NACK("POST", "/v1/queues/nack"),
  QUEUE_DEAD("POST", "/v1/queues/dead"),
  QUEUE_DEAD_REQUEUE("POST", "/v1/queues/dead/requeue"),
  QUEUE_DEAD_PURGE("POST", "/v1/queues/dead/purge"),
  QUEUE_PURGE("POST", "/v1/queues/purge"),
  CHECK("POST", "/v1/check", true),
  ACQUIRE("POST", "/v1/acquire"),
  RELEASE("POST", "/v1/release"),
  REPORT("POST", "/v1/report"),
  RESERVE("POST", "/v1/reserve"),
  COMMIT("POST", "/v1/commit"),
  STATS("GET", "/v1/stats");

  final String method;
  final String path;

  /**
   * Whether its blocking calls may share a pipelined connection ({@link Http1Pipeline}): the
   * server answers it without waiting for anything but its store, so the calls behind it on the
   * connection are not held up by a wait of its own (a held acquire's, a long-poll lease's).
   */
  final boolean pipelined;

  Route(String method, String path) {
    this(method, path, false);
  }

  Route(String method, String path, boolean pipelined) {
    this.method = method;
    this.path = path;
    this.pipelined = pipelined;
  }
}
