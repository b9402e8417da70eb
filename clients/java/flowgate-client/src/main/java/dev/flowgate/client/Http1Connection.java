package dev.flowgate.client;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One HTTP/1.1 connection (a plain or TLS socket) and the parsing of its answers: a status line,
 * headers, and a body framed by {@code Content-Length}, {@code Transfer-Encoding: chunked}, or
 * the end of the connection. Used by one thread at a time (the pool hands it to one exchange).
 */
final class Http1Connection implements AutoCloseable {
  /** The longest status line, header line or chunk-size line read. */
  private static final int MAX_LINE = 16 * 1024;
  /** The largest body read (a stats answer of many rules is the largest expected). */
  private static final int MAX_BODY = 64 * 1024 * 1024;

  private final Socket socket;
  /**
   * Whether its reads wait without a socket timeout, their deadline kept by {@link Deadlines}
   * (a plain socket of a channel, in blocking mode); otherwise each read has its timeout.
   */
  private final boolean watched;
  /** The deadline of the exchange watched now ({@link System#nanoTime()}). */
  private volatile long watchedDeadline;
  /**
   * {@link #WAITING} while an exchange is watched, {@link #EXPIRED} once {@link Deadlines} ended
   * it: whichever of the exchange's end and its expiry comes first decides.
   */
  private final AtomicInteger watchState = new AtomicInteger(IDLE);

  private static final int IDLE = 0;
  private static final int WAITING = 1;
  private static final int EXPIRED = 2;
  private final InputStream in;
  private final OutputStream out;
  private final byte[] buf = new byte[8192];
  private int pos;
  private int lim;
  private int timeoutMs = -1;
  /** When the connection was last given back to the pool ({@link System#nanoTime()}). */
  long idleSince;
  /** Whether it carried an exchange already (a failure on it may be a stale connection). */
  boolean reused;
  /** Whether any byte of the current answer was read. */
  private boolean answering;

  /**
   * @param socket a connected socket
   * @param watched whether its reads may wait without a timeout, their deadlines kept by {@link
   *     Deadlines}: a blocking channel's socket (plain), whose reads a close ends
   */
  Http1Connection(Socket socket, boolean watched) throws IOException {
    this.socket = socket;
    this.watched = watched;
    this.in = socket.getInputStream();
    this.out = socket.getOutputStream();
  }

  /**
   * An answer, whether the connection may carry another exchange, and how long the server says
   * its decision took ({@code Server-Timing: decide;dur=}, in nanoseconds; -1 when it does not).
   */
  record Result(Wire.Answer answer, boolean keepAlive, long decidedNanos) {}

  /** Whether bytes read are not yet parsed (an answer, or part of one, is in the buffer). */
  boolean buffered() {
    return pos < lim;
  }

  /** Whether any byte of the current exchange's answer came (so the server got the request). */
  boolean answering() {
    return answering;
  }

  /**
   * Writes {@code request} (head and body, in one write) and reads its answer.
   *
   * @param request the request's bytes
   * @param deadline when the answer must have been read ({@link System#nanoTime()})
   * @return the answer
   * @throws IOException when the exchange failed ({@link HttpTimeoutException} past the deadline)
   */
  Result exchange(byte[] request, long deadline) throws IOException {
    if (!watched) {
      write(request);
      return readAnswer(deadline);
    }
    watchedDeadline = deadline;
    watchState.set(WAITING);
    Deadlines.watch(this);
    Result r;
    try {
      write(request);
      r = readAnswer(Long.MAX_VALUE, deadline);
    } catch (IOException e) {
      if (!watchState.compareAndSet(WAITING, IDLE)) {
        throw new HttpTimeoutException("no answer in time");
      }
      throw e;
    } finally {
      Deadlines.unwatch(this);
    }
    if (!watchState.compareAndSet(WAITING, IDLE)) {
      // Expired as the answer came: the answer stands, the connection is closed.
      return new Result(r.answer(), false, r.decidedNanos());
    }
    return r;
  }

  /** The deadline of the exchange {@link Deadlines} watches. */
  long watchedDeadline() {
    return watchedDeadline;
  }

  /**
   * Ends the exchange past its deadline, if it is still waiting: closes the connection, which
   * ends its read.
   */
  void expire() {
    if (watchState.compareAndSet(WAITING, EXPIRED)) {
      close();
    }
  }

  /**
   * Writes requests' bytes in one write (several requests when pipelined: {@link Http1Pipeline}).
   */
  void write(byte[] requests) throws IOException {
    out.write(requests);
    out.flush();
  }

  /**
   * Reads the next answer. A timeout before its status line was read leaves the connection at
   * the answer's start ({@link #answering()} false), so that another reader may go on.
   *
   * @param deadline when the answer must have been read ({@link System#nanoTime()})
   * @return the answer
   * @throws IOException when the read failed ({@link HttpTimeoutException} past the deadline)
   */
  Result readAnswer(long deadline) throws IOException {
    return readAnswer(deadline, deadline);
  }

  /**
   * @param readDeadline the deadline of each read's timeout ({@link Long#MAX_VALUE}: none)
   * @param deadline the answer's deadline
   */
  private Result readAnswer(long readDeadline, long deadline) throws IOException {
    if (System.nanoTime() - deadline >= 0) {
      throw new HttpTimeoutException("no answer in time");
    }
    deadline = readDeadline;
    answering = false;
    while (true) {
      String statusLine = readLine(deadline);
      answering = true;
      if (!statusLine.startsWith("HTTP/1.") || statusLine.length() < 12) {
        throw new IOException("not an HTTP/1.1 status line: " + printable(statusLine));
      }
      int status = parseStatus(statusLine);
      boolean http10 = statusLine.charAt(7) == '0';
      long length = -1;
      boolean chunked = false;
      Boolean keepAliveHeader = null;
      String retryAfter = null;
      long decidedNanos = -1;
      for (String line = readLine(deadline); !line.isEmpty(); line = readLine(deadline)) {
        int colon = line.indexOf(':');
        if (colon <= 0) {
          throw new IOException("a header line without a name: " + printable(line));
        }
        String name = line.substring(0, colon).trim();
        String value = line.substring(colon + 1).trim();
        if (name.equalsIgnoreCase("content-length")) {
          length = parseLength(value);
        } else if (name.equalsIgnoreCase("transfer-encoding")) {
          chunked = value.toLowerCase().endsWith("chunked");
        } else if (name.equalsIgnoreCase("connection")) {
          String v = value.toLowerCase();
          keepAliveHeader = v.contains("close") ? Boolean.FALSE
              : v.contains("keep-alive") ? Boolean.TRUE : keepAliveHeader;
        } else if (name.equalsIgnoreCase("retry-after")) {
          retryAfter = value;
        } else if (name.equalsIgnoreCase("server-timing")) {
          decidedNanos = decideNanos(value);
        }
      }
      if (status >= 100 && status < 200) {
        continue; // an interim answer (100 Continue): the final one follows
      }
      boolean keepAlive = keepAliveHeader != null ? keepAliveHeader : !http10;
      byte[] body;
      if (status == 204 || status == 304) {
        body = new byte[0];
      } else if (chunked) {
        body = readChunked(deadline);
      } else if (length >= 0) {
        body = readFully((int) length, deadline);
      } else {
        body = readToEnd(deadline);
        keepAlive = false;
      }
      return new Result(new Wire.Answer(status, retryAfter, body), keepAlive, decidedNanos);
    }
  }

  /**
   * The duration of the {@code decide} metric of a {@code Server-Timing} value ({@code
   * decide;dur=0.012}: milliseconds), in nanoseconds; -1 when it has none or it is malformed.
   */
  static long decideNanos(String serverTiming) {
    for (String metric : serverTiming.split(",")) {
      String[] params = metric.split(";");
      if (!params[0].trim().equals("decide")) {
        continue;
      }
      for (int i = 1; i < params.length; i++) {
        String p = params[i].trim();
        if (p.startsWith("dur=")) {
          try {
            double ms = Double.parseDouble(p.substring(4));
            return ms >= 0 && ms < 1e9 ? (long) (ms * 1_000_000) : -1;
          } catch (NumberFormatException e) {
            return -1;
          }
        }
      }
    }
    return -1;
  }

  /**
   * Whether an idle connection can no longer be used: the server closed it (end of stream, a
   * reset) or sent bytes nobody asked for. Waits at most 1 ms for a live connection's silence.
   */
  boolean stale() {
    if (pos < lim) {
      return true;
    }
    try {
      socket.setSoTimeout(1);
      timeoutMs = 1;
      int n = in.read(buf, 0, buf.length);
      if (n > 0) {
        lim = n;
        pos = 0;
      }
      return true;
    } catch (SocketTimeoutException silent) {
      return false;
    } catch (IOException e) {
      return true;
    }
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException e) {
      // Closing is all that is left to do with it.
    }
  }

  private static int parseStatus(String statusLine) throws IOException {
    try {
      return Integer.parseInt(statusLine.substring(9, 12));
    } catch (NumberFormatException e) {
      throw new IOException("no status in " + printable(statusLine));
    }
  }

  private static long parseLength(String value) throws IOException {
    try {
      long n = Long.parseLong(value);
      if (n < 0 || n > MAX_BODY) {
        throw new IOException("a body of " + n + " bytes");
      }
      return n;
    } catch (NumberFormatException e) {
      throw new IOException("a bad Content-Length: " + printable(value));
    }
  }

  /** Reads more bytes into the buffer (kept from {@code pos}); false at the end of the stream. */
  private boolean fill(long deadline) throws IOException {
    if (pos > 0) {
      System.arraycopy(buf, pos, buf, 0, lim - pos);
      lim -= pos;
      pos = 0;
    }
    int ms;
    if (deadline == Long.MAX_VALUE) {
      ms = 0; // no timeout: Deadlines keeps the deadline
    } else {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw new HttpTimeoutException("no answer in time");
      }
      ms = (int) Math.max(1, Math.min(Integer.MAX_VALUE, (left + 999_999) / 1_000_000));
    }
    if (ms != timeoutMs) {
      socket.setSoTimeout(ms);
      timeoutMs = ms;
    }
    int n;
    try {
      n = in.read(buf, lim, buf.length - lim);
    } catch (SocketTimeoutException e) {
      throw new HttpTimeoutException("no answer in time");
    }
    if (n < 0) {
      return false;
    }
    lim += n;
    return true;
  }

  private String readLine(long deadline) throws IOException {
    int scanned = pos;
    while (true) {
      for (int i = scanned; i < lim; i++) {
        if (buf[i] == '\n') {
          int end = i > pos && buf[i - 1] == '\r' ? i - 1 : i;
          String line = new String(buf, pos, end - pos, StandardCharsets.ISO_8859_1);
          pos = i + 1;
          return line;
        }
      }
      if (lim - pos >= MAX_LINE) {
        throw new IOException("a line longer than " + MAX_LINE + " bytes");
      }
      int had = lim - pos;
      if (!fill(deadline)) {
        throw new EOFException(
            answering ? "the connection closed within an answer" : "the connection closed");
      }
      scanned = pos + had;
    }
  }

  private byte[] readFully(int n, long deadline) throws IOException {
    byte[] body = new byte[n];
    int at = 0;
    while (at < n) {
      if (pos == lim && !fill(deadline)) {
        throw new EOFException("the connection closed " + (n - at) + " bytes before the body's end");
      }
      int k = Math.min(n - at, lim - pos);
      System.arraycopy(buf, pos, body, at, k);
      pos += k;
      at += k;
    }
    return body;
  }

  private byte[] readChunked(long deadline) throws IOException {
    byte[] body = new byte[0];
    while (true) {
      String line = readLine(deadline);
      int semi = line.indexOf(';');
      String hex = (semi >= 0 ? line.substring(0, semi) : line).trim();
      long size;
      try {
        size = Long.parseLong(hex, 16);
      } catch (NumberFormatException e) {
        throw new IOException("a bad chunk size: " + printable(line));
      }
      if (size < 0 || body.length + size > MAX_BODY) {
        throw new IOException("a chunked body over " + MAX_BODY + " bytes");
      }
      if (size == 0) {
        for (String trailer = readLine(deadline); !trailer.isEmpty(); ) {
          trailer = readLine(deadline);
        }
        return body;
      }
      byte[] chunk = readFully((int) size, deadline);
      body = Arrays.copyOf(body, body.length + chunk.length);
      System.arraycopy(chunk, 0, body, body.length - chunk.length, chunk.length);
      if (!readLine(deadline).isEmpty()) {
        throw new IOException("a chunk not followed by CRLF");
      }
    }
  }

  private byte[] readToEnd(long deadline) throws IOException {
    byte[] body = new byte[0];
    while (true) {
      if (pos == lim && !fill(deadline)) {
        return body;
      }
      if (body.length + (lim - pos) > MAX_BODY) {
        throw new IOException("a body over " + MAX_BODY + " bytes");
      }
      int at = body.length;
      body = Arrays.copyOf(body, at + lim - pos);
      System.arraycopy(buf, pos, body, at, lim - pos);
      pos = lim;
    }
  }

  private static String printable(String s) {
    String cut = s.length() > 200 ? s.substring(0, 200) + "..." : s;
    return "\"" + cut.replaceAll("[^\\x20-\\x7e]", "?") + "\"";
  }
}
