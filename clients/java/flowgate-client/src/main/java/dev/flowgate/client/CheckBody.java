package dev.flowgate.client;

import java.nio.charset.StandardCharsets;

/**
 * The body of {@code POST /v1/check} written straight to bytes: the JSON {@link Bodies#check}
 * builds as a tree (the drift test's view of the fields), without the tree and Jackson's
 * serializer, which were a fifth of the client's CPU per check under load. A test holds the two
 * equal for every shape of request ({@code CheckBodyTest}).
 */
final class CheckBody {
  private CheckBody() {}

  private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.ISO_8859_1);

  /**
   * The check's JSON body.
   *
   * @param request the request
   * @return its JSON, UTF-8
   */
  static byte[] of(Request request) {
    Out out = new Out(64 + 48 * request.descriptors().size());
    out.ascii("{\"domain\":").string(request.domain()).ascii(",\"descriptors\":[");
    boolean firstDescriptor = true;
    for (Descriptor d : request.descriptors()) {
      out.ascii(firstDescriptor ? "{\"entries\":[" : ",{\"entries\":[");
      firstDescriptor = false;
      boolean firstEntry = true;
      for (Descriptor.Entry e : d.entries()) {
        out.ascii(firstEntry ? "{\"key\":" : ",{\"key\":").string(e.key())
            .ascii(",\"value\":").string(e.value()).ascii("}");
        firstEntry = false;
      }
      out.ascii("]");
      if (d.hitsAddend() != null) {
        out.ascii(",\"hits_addend\":").ascii(Long.toString(d.hitsAddend()));
      }
      out.ascii("}");
    }
    out.ascii("]");
    if (request.cost() != null) {
      out.ascii(",\"cost\":").ascii(Long.toString(request.cost()));
    }
    return out.ascii("}").bytes();
  }

  /** A growing byte buffer that writes ASCII text and JSON strings (escaped, UTF-8). */
  private static final class Out {
    private byte[] buf;
    private int n;

    Out(int capacity) {
      buf = new byte[capacity];
    }

    private void room(int more) {
      if (n + more > buf.length) {
        buf = java.util.Arrays.copyOf(buf, Math.max(buf.length * 2, n + more));
      }
    }

    Out ascii(String s) {
      room(s.length());
      for (int i = 0; i < s.length(); i++) {
        buf[n++] = (byte) s.charAt(i);
      }
      return this;
    }

    /** A JSON string: quotes, backslashes and control characters escaped, the rest UTF-8. */
    Out string(String s) {
      room(s.length() + 2);
      buf[n++] = '"';
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
          room(1);
          buf[n++] = (byte) c;
        } else if (c == '"' || c == '\\') {
          room(2);
          buf[n++] = '\\';
          buf[n++] = (byte) c;
        } else if (c < 0x20) {
          room(6);
          buf[n++] = '\\';
          buf[n++] = 'u';
          buf[n++] = '0';
          buf[n++] = '0';
          buf[n++] = HEX[c >> 4];
          buf[n++] = HEX[c & 0xf];
        } else {
          // Non-ASCII (and DEL): the run up to the next ASCII character, encoded as UTF-8
          // (surrogate pairs together).
          int end = i;
          while (end < s.length() && s.charAt(end) >= 0x7f) {
            char h = s.charAt(end);
            if (Character.isHighSurrogate(h)
                && end + 1 < s.length()
                && Character.isLowSurrogate(s.charAt(end + 1))) {
              end += 2;
            } else if (Character.isSurrogate(h)) {
              throw new IllegalArgumentException(
                  "cannot write the request as JSON: a string holds an unpaired surrogate");
            } else {
              end++;
            }
          }
          byte[] utf8 = s.substring(i, end).getBytes(StandardCharsets.UTF_8);
          room(utf8.length);
          System.arraycopy(utf8, 0, buf, n, utf8.length);
          n += utf8.length;
          i = end - 1;
        }
      }
      room(1);
      buf[n++] = '"';
      return this;
    }

    byte[] bytes() {
      return java.util.Arrays.copyOf(buf, n);
    }
  }
}
