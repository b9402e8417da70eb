package dev.flowgate.client.queue;

import java.util.List;

/**
 * The answer to a submit: the instance the jobs went to, and each job's answer in the order
 * submitted.
 *
 * @param instance the queue instance's key ({@code payments:refunds:biz=REFUND,channel=WPG})
 * @param jobs the jobs, in the order submitted
 */
public record SubmitAnswer(String instance, List<SubmittedJob> jobs) {
  /** Replaces an absent list by an empty one. */
  public SubmitAnswer {
    jobs = jobs == null ? List.of() : List.copyOf(jobs);
  }
}
