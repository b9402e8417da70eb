package dev.flowgate.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The framing of answers the server's routes do not send today (chunked bodies, a body to the
 * end of the connection, an interim 100): the bytes written by the test on a loopback socket,
 * as a server would. The real server's answers are tested in {@link Http1WireTest} and every
 * other test of the client.
 */
class Http1ConnectionTest {
  /** Connects to a loopback socket that reads the request's head, then writes {@code answer}. */
  private static Http1Connection.Result exchange(String answer) throws Exception {
    try (ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Thread peer =
          new Thread(
              () -> {
                try (Socket s = listener.accept()) {
                  InputStream in = s.getInputStream();
                  int matched = 0;
                  byte[] end = "\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1);
                  while (matched < end.length) {
                    int b = in.read();
                    if (b < 0) {
                      return;
                    }
                    matched = b == end[matched] ? matched + 1 : (b == '\r' ? 1 : 0);
                  }
                  OutputStream out = s.getOutputStream();
                  out.write(answer.getBytes(StandardCharsets.ISO_8859_1));
                  out.flush();
                  s.shutdownOutput();
                  in.read();
                } catch (IOException e) {
                  // The test's assertions say what went wrong.
                }
              });
      peer.start();
      try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort())) {
        Http1Connection c = new Http1Connection(socket, false);
        byte[] request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1);
        try {
          return c.exchange(request, System.nanoTime() + 10_000_000_000L);
        } finally {
          c.close();
          peer.join(10_000);
        }
      }
    }
  }

  private static String text(Http1Connection.Result r) {
    return new String(r.answer().body(), StandardCharsets.UTF_8);
  }

  @Test
  void chunkedBodyWithExtensionsAndTrailers() throws Exception {
    Http1Connection.Result r =
        exchange(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
                + "5;ext=1\r\n{\"a\":\r\n"
                + "3\r\n 12\r\n"
                + "1\r\n}\r\n"
                + "0\r\nX-Trailer: t\r\n\r\n");
    assertEquals(200, r.answer().status());
    assertEquals("3", r.answer().retryAfter());
    assertEquals("{\"a\": 12}", text(r));
    assertTrue(r.keepAlive());
  }

  @Test
  void contentLengthInterimAnswerAndConnectionClose() throws Exception {
    Http1Connection.Result r =
        exchange(
            "HTTP/1.1 100 Continue\r\n\r\n"
                + "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\n"
                + "connection: close\r\n\r\n{}");
    assertEquals(429, r.answer().status());
    assertNull(r.answer().retryAfter());
    assertEquals("{}", text(r));
    assertFalse(r.keepAlive());
  }

  @Test
  void bodyToTheEndOfTheConnection() throws Exception {
    Http1Connection.Result r = exchange("HTTP/1.0 200 OK\r\n\r\n{\"x\":1}");
    assertEquals("{\"x\":1}", text(r));
    assertFalse(r.keepAlive());
    Http1Connection.Result none = exchange("HTTP/1.1 204 No Content\r\n\r\n");
    assertArrayEquals(new byte[0], none.answer().body());
    assertTrue(none.keepAlive());
  }

  @Test
  void aTruncatedAnswerIsAnError() {
    assertThrows(
        EOFException.class, () -> exchange("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"));
    assertThrows(
        EOFException.class,
        () -> exchange("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"));
    assertThrows(IOException.class, () -> exchange("SSH-2.0-OpenSSH\r\n\r\n"));
  }
}
