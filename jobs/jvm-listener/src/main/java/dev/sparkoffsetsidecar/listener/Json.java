package dev.sparkoffsetsidecar.listener;

/**
 * JSON text the way Python's {@code json.dumps} writes it (ASCII only), so that the JVM
 * listener's request body is byte for byte the Python listener's for the same progress.
 */
final class Json {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private Json() {}

  /** {@code value} as a JSON string: quotes, backslash and control characters escaped,
   * every character past ASCII as {@code \\uXXXX} (UTF-16 units, as Python does). */
  static String quote(String value) {
    StringBuilder out = new StringBuilder(value.length() + 2).append('"');
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20 || c > 0x7e) {
            out.append("\\u")
                .append(HEX[(c >> 12) & 0xf])
                .append(HEX[(c >> 8) & 0xf])
                .append(HEX[(c >> 4) & 0xf])
                .append(HEX[c & 0xf]);
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }

  /**
   * The body of {@code POST /v1/progress}: the group, Spark's own progress JSON and the Kafka
   * cluster of the group's offsets (null: left to the service).
   */
  static String progressEvent(String groupId, String progressJson, String cluster) {
    return "{\"group_id\":" + quote(groupId) + ",\"progress\":" + progressJson
        + (cluster == null ? "" : ",\"cluster\":" + quote(cluster)) + "}";
  }
}
