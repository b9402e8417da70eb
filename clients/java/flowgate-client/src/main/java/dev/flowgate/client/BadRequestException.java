package dev.flowgate.client;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The server refused the request as malformed (400 {@code bad_request}, {@code bad_token},
 * {@code invalid_rules}): {@link #field()} names the field at fault, as the server's detail does
 * ({@code descriptors[1].entries[0].key}, {@code cost}).
 */
public class BadRequestException extends FlowgateException {
  private static final long serialVersionUID = 1L;

  /**
   * How the server's detail names the field at fault: {@code field `cost`: ...}, or the field's
   * path first, {@code `descriptors[1].entries[0].key`: ...}.
   */
  private static final Pattern FIELD = Pattern.compile("^(?:field )?`([^`]+)`:");

  private final String field;

  /**
   * @param code the server's code
   * @param detail what is wrong, for people; the field at fault is read from it
   */
  public BadRequestException(ErrorCode code, String detail) {
    super(400, code, detail, null, null);
    Matcher m = FIELD.matcher(detail == null ? "" : detail);
    this.field = m.find() ? m.group(1) : null;
  }

  /** The field at fault, as the server named it; empty when the detail names none. */
  public Optional<String> field() {
    return Optional.ofNullable(field);
  }
}
