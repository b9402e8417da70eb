package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.flowgate.client.testing.FlowgateServer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Bearer tokens against a real server's scoped credentials. */
class AuthTest {
  static final String DECIDE = "decide-token-0123456789abcdefghijklmnop";
  static final String REPORTER = "reporter-token-0123456789abcdefghijklmno";
  static final String WRONG = "wrong-token-0123456789abcdefghijklmnopqrs";

  static FlowgateServer server() {
    return FlowgateServer.builder()
        .config(CheckTest.RULES)
        .file("credentials", "app:decide:" + DECIDE + "\nops:reporter:" + REPORTER + "\n")
        .flags("--credentials-file", "{dir}/credentials")
        .start();
  }

  static final Request REQ = Request.of("api", Descriptor.of("user", "7"));

  @Test
  void aTokenIsAcceptedAndAWrongOneRefused() {
    try (FlowgateServer server = server()) {
      FlowgateClient app = FlowgateClient.builder(server.baseUrl()).token(DECIDE).build();
      assertTrue(app.check(REQ).allowed());

      UnauthorizedException none =
          assertThrows(
              UnauthorizedException.class,
              () -> FlowgateClient.builder(server.baseUrl()).build().check(REQ));
      assertEquals(401, none.status());
      assertEquals(ErrorCode.UNAUTHORIZED, none.code());
      FlowgateClient wrong = FlowgateClient.builder(server.baseUrl()).token(WRONG).build();
      assertThrows(UnauthorizedException.class, () -> wrong.check(REQ));

      // A token without the route's scope.
      ForbiddenException forbidden =
          assertThrows(
              ForbiddenException.class,
              () -> app.report(Report.outcome(REQ, true, Duration.ofMillis(1))));
      assertEquals(ErrorCode.FORBIDDEN, forbidden.code());
      FlowgateClient ops = FlowgateClient.builder(server.baseUrl()).token(REPORTER).build();
      assertEquals(1, ops.report(Report.outcome(REQ, true, Duration.ofMillis(1))).noBreaker());
    }
  }

  @Test
  void aRotatedTokenIsReadAtEachRequest() {
    try (FlowgateServer server = server()) {
      AtomicReference<String> current = new AtomicReference<>(WRONG);
      FlowgateClient client =
          FlowgateClient.builder(server.baseUrl()).token(current::get).build();
      assertThrows(UnauthorizedException.class, () -> client.check(REQ));
      current.set(DECIDE);
      assertTrue(client.check(REQ).allowed());
    }
  }

  @Test
  void manyWrongTokensAreSlowed() {
    try (FlowgateServer server = server()) {
      FlowgateClient wrong = FlowgateClient.builder(server.baseUrl()).token(WRONG).build();
      CredentialsSlowedException slowed = null;
      for (int i = 0; i < 40 && slowed == null; i++) {
        try {
          wrong.check(REQ);
        } catch (UnauthorizedException expected) {
          // Counted: a source may present 20 wrong tokens at once.
        } catch (CredentialsSlowedException e) {
          slowed = e;
        }
      }
      assertTrue(slowed != null, "never slowed");
      assertEquals(ErrorCode.TOO_MANY_FAILED_CREDENTIALS, slowed.code());
      assertTrue(slowed.retryAfter().orElseThrow().getSeconds() >= 1);
    }
  }
}
