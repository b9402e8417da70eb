package dev.flowgate.client;

/**
 * The server's routes this client calls, each with its method: the one list of them, which the
 * drift test checks against {@code docs/openapi.json}.
 */
enum Route {
  CHECK("POST", "/v1/check"),
  ACQUIRE("POST", "/v1/acquire"),
  RELEASE("POST", "/v1/release"),
  REPORT("POST", "/v1/report"),
  RESERVE("POST", "/v1/reserve"),
  COMMIT("POST", "/v1/commit"),
  STATS("GET", "/v1/stats");

  final String method;
  final String path;

  Route(String method, String path) {
    this.method = method;
    this.path = path;
  }
}
