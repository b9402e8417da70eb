package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The depth of pipelining from the decisions' time the server reports. */
class AnswerPaceTest {
  private static AnswerPace after(long nanos) {
    AnswerPace pace = new AnswerPace(16);
    pace.answered(nanos);
    return pace;
  }

  @Test
  void oneUntilADecisionsTimeIsKnown() {
    AnswerPace pace = new AnswerPace(16);
    assertEquals(1, pace.depth());
    pace.answered(-1); // an answer without Server-Timing
    assertEquals(1, pace.depth());
    assertEquals(0, pace.decideNanos());
    assertThrows(IllegalArgumentException.class, () -> new AnswerPace(0));
  }

  @Test
  void theDecisionsThatFitInTheBudgetAtMostTheDepthAtLeastOne() {
    assertEquals(16, after(5_000).depth(), "the embedded store: microseconds");
    assertEquals(16, after(0).depth(), "under the header's microsecond");
    assertEquals(5, after(50_000).depth());
    assertEquals(1, after(200_000).depth(), "a round trip to Redis");
    assertEquals(1, after(25_000_000).depth(), "a store's deadline");
    AnswerPace off = new AnswerPace(1);
    off.answered(5_000);
    assertEquals(1, off.depth(), "pipelining(1): never more");
  }

  @Test
  void aSlowDecisionTakesItToOneAtOnceAndFastOnesBringItBack() {
    AnswerPace pace = after(5_000);
    pace.answered(300_000_000);
    assertEquals(1, pace.depth(), "one decision at a deadline: " + pace.decideNanos() + " ns");
    int n = 0;
    while (pace.depth() == 1) {
      pace.answered(5_000);
      n++;
    }
    assertTrue(n > 10 && n < 200, "back above 1 after " + n + " fast decisions");
    for (int i = 0; i < 200; i++) {
      pace.answered(5_000);
    }
    assertEquals(16, pace.depth());
  }

  @Test
  void theDecisionsTimeIsReadFromServerTiming() {
    assertEquals(12_000, Http1Connection.decideNanos("decide;dur=0.012"));
    assertEquals(1_500_000_000L, Http1Connection.decideNanos("db;dur=2, decide;desc=\"x\";dur=1500"));
    assertEquals(-1, Http1Connection.decideNanos("decide"));
    assertEquals(-1, Http1Connection.decideNanos("db;dur=0.5"));
    assertEquals(-1, Http1Connection.decideNanos("decide;dur=soon"));
    assertEquals(-1, Http1Connection.decideNanos("decide;dur=-1"));
    assertEquals(-1, Http1Connection.decideNanos("decide;dur=NaN"));
  }
}
