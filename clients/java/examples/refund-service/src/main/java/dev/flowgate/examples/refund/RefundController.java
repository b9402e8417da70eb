package dev.flowgate.examples.refund;

import dev.flowgate.client.Descriptor;
import dev.flowgate.client.FlowgateClient;
import dev.flowgate.client.queue.NewJob;
import dev.flowgate.client.queue.QueueInstance;
import dev.flowgate.client.queue.SubmitAnswer;
import dev.flowgate.client.queue.SubmittedJob;
import java.util.ArrayList;
import java.util.List;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** Takes batches of refunds, and shows those the channel was sent. */
@RestController
public class RefundController {
  private final FlowgateClient flowgate;
  private final RefundChannel channel;
  private final QueueInstance queue;

  public RefundController(
      FlowgateClient flowgate, RefundChannel channel, @Value("${refunds.channel}") String name) {
    this.flowgate = flowgate;
    this.channel = channel;
    this.queue = QueueInstance.of("payments", Descriptor.of("biz", "REFUND", "channel", name));
  }

  /**
   * Submits the refunds to the queue, all or none, each keyed by its id: a batch sent again
   * (a retry after a timeout) answers the same jobs, marked duplicate.
   */
  @PostMapping("/refunds")
  public Submitted submit(@RequestBody List<Refund> refunds) {
    SubmitAnswer answer =
        flowgate
            .queues()
            .submit(queue, refunds.stream().map(r -> NewJob.json(r).withKey(r.id())).toList());
    List<Job> jobs = new ArrayList<>();
    for (int i = 0; i < refunds.size(); i++) {
      SubmittedJob j = answer.jobs().get(i);
      jobs.add(new Job(refunds.get(i).id(), j.id(), j.duplicate(), j.releaseInMs()));
    }
    return new Submitted(answer.instance(), jobs);
  }

  /** What a submit answers: the queue instance, and each refund's job. */
  public record Submitted(String queue, List<Job> jobs) {}

  /**
   * A refund's job: its id in the queue, whether the refund was submitted already, and in how
   * long the queue should release it (an estimate).
   */
  public record Job(String refund, long job, boolean duplicate, Long releaseInMs) {}

  /** The refunds sent to the channel so far, in order. */
  @GetMapping("/refunds/sent")
  public List<RefundChannel.Sent> sent() {
    return channel.sent();
  }
}
