package dev.flowgate.client;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;

/**
 * The server's error and refusal codes: an error body's {@code error}, a refused decision's
 * {@code reason} ({@code ErrorCode} in the OpenAPI document). Programs switch on these; the
 * detail that comes with them is for people. A code this client does not know yet reads as
 * {@link #UNKNOWN}, so that a newer server never breaks an older client.
 */
public enum ErrorCode {
  BAD_REQUEST("bad_request"),
  UNAUTHORIZED("unauthorized"),
  ADMIN_DISABLED("admin_disabled"),
  FORBIDDEN("forbidden"),
  TOO_MANY_FAILED_CREDENTIALS("too_many_failed_credentials"),
  NOT_FOUND("not_found"),
  METHOD_NOT_ALLOWED("method_not_allowed"),
  PAYLOAD_TOO_LARGE("payload_too_large"),
  UNSUPPORTED_MEDIA_TYPE("unsupported_media_type"),
  OVER_LIMIT("over_limit"),
  CIRCUIT_OPEN("circuit_open"),
  QUEUE_FULL("queue_full"),
  UNKNOWN_QUEUE("unknown_queue"),
  BAD_TOKEN("bad_token"),
  NOT_HELD("not_held"),
  NOT_DEAD("not_dead"),
  KEY_CONFLICT("key_conflict"),
  INVALID_RULES("invalid_rules"),
  VERSION_NOT_FOUND("version_not_found"),
  VERSION_CONFLICT("version_conflict"),
  FOLLOWS_FILES("follows_files"),
  QUEUES_WOULD_BE_REMOVED("queues_would_be_removed"),
  UNKNOWN_RESERVATION("unknown_reservation"),
  ALREADY_COMMITTED("already_committed"),
  STORE_UNAVAILABLE("store_unavailable"),
  NOT_READY("not_ready"),
  INTERNAL("internal"),
  /** A code this client does not know (a newer server's). */
  UNKNOWN("");

  private final String wire;

  ErrorCode(String wire) {
    this.wire = wire;
  }

  /** The code as the server writes it ({@code "over_limit"}). */
  @JsonValue
  public String wire() {
    return wire;
  }

  /** The code the server wrote, {@link #UNKNOWN} for one this client does not know. */
  @JsonCreator
  public static ErrorCode of(String wire) {
    for (ErrorCode code : values()) {
      if (code != UNKNOWN && code.wire.equals(wire)) {
        return code;
      }
    }
    return UNKNOWN;
  }
}
