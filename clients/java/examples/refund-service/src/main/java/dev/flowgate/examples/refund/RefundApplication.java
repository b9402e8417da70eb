package dev.flowgate.examples.refund;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** A refund service: refunds are submitted in batches and sent to the channel at 1/s. */
@SpringBootApplication
public class RefundApplication {
  public static void main(String[] args) {
    SpringApplication.run(RefundApplication.class, args);
  }
}
