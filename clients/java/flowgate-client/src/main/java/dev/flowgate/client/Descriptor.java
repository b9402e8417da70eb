package dev.flowgate.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One descriptor of a request: entries (key and value, in order) that the server matches against
 * its rules, and optionally this descriptor's own cost. Immutable.
 *
 * <pre>{@code
 * Descriptor.of("channel", "WPG")                    // channel=WPG
 * Descriptor.of("biz", "PAY", "channel", "WPG")      // biz=PAY, channel=WPG
 * Descriptor.of("api_key", key).withHitsAddend(3)    // this descriptor costs 3
 * }</pre>
 *
 * @param entries the entries, in order (at most 32)
 * @param hitsAddend this descriptor's own cost over the request's, or null (Envoy's
 *     {@code hits_addend}; 0 only looks)
 */
public record Descriptor(List<Entry> entries, Long hitsAddend) {

  /**
   * One entry: a key and its value.
   *
   * @param key the key
   * @param value the value (empty for an entry without one)
   */
  public record Entry(String key, String value) {
    /** Checks both are present. */
    public Entry {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(value, "value");
    }
  }

  /** Copies the entries, and refuses an empty descriptor or a negative cost. */
  public Descriptor {
    entries = List.copyOf(entries);
    if (entries.isEmpty()) {
      throw new IllegalArgumentException("a descriptor needs at least one entry");
    }
    if (hitsAddend != null && hitsAddend < 0) {
      throw new IllegalArgumentException("hitsAddend is negative: " + hitsAddend);
    }
  }

  /**
   * A descriptor of key-value pairs: {@code of("biz", "PAY", "channel", "WPG")}.
   *
   * @param keysAndValues a key, its value, a key, its value...
   * @return the descriptor
   */
  public static Descriptor of(String... keysAndValues) {
    if (keysAndValues.length == 0 || keysAndValues.length % 2 != 0) {
      throw new IllegalArgumentException(
          "Descriptor.of takes keys and values in pairs, got " + keysAndValues.length + " strings");
    }
    List<Entry> entries = new ArrayList<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      entries.add(new Entry(keysAndValues[i], keysAndValues[i + 1]));
    }
    return new Descriptor(entries, null);
  }

  /**
   * A descriptor of the map's entries, in its iteration order (a {@link java.util.LinkedHashMap}
   * keeps them as inserted).
   *
   * @param entries keys and values
   * @return the descriptor
   */
  public static Descriptor of(Map<String, String> entries) {
    List<Entry> list = new ArrayList<>();
    entries.forEach((k, v) -> list.add(new Entry(k, v)));
    return new Descriptor(list, null);
  }

  /**
   * This descriptor with its own cost.
   *
   * @param hitsAddend the cost (0 only looks)
   * @return a new descriptor
   */
  public Descriptor withHitsAddend(long hitsAddend) {
    return new Descriptor(entries, hitsAddend);
  }

  /** {@code key=value, key2=value2}, as the server's logs and docs write a descriptor. */
  @Override
  public String toString() {
    StringBuilder out = new StringBuilder();
    for (Entry e : entries) {
      if (out.length() > 0) {
        out.append(", ");
      }
      out.append(e.key()).append('=').append(e.value());
    }
    return out.toString();
  }
}
