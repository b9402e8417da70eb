package dev.flowgate.examples.payment;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** A payment service: payments limited per channel, the channel's API behind a breaker. */
@SpringBootApplication
public class PaymentApplication {
  public static void main(String[] args) {
    SpringApplication.run(PaymentApplication.class, args);
  }
}
