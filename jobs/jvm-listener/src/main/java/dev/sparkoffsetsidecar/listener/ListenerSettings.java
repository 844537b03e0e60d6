package dev.sparkoffsetsidecar.listener;

import java.net.URI;
import java.nio.file.Path;
import java.util.function.UnaryOperator;

/**
 * Every setting of the JVM listener, read once from Spark configuration keys
 * {@code spark.offsetSidecar.*}. A bad value is a {@link BadSetting} naming the key, the
 * value and what is expected: the listener logs that one line and stays out of the way.
 *
 * @param url the service's base URL, http or https ({@code spark.offsetSidecar.url}, required)
 * @param groupTemplate the consumer group of a query; {@code {queryName}} is the query's name
 *     (its id when unnamed) and {@code {queryId}} its id ({@code spark.offsetSidecar.group},
 *     default {@code {queryName}})
 * @param token a bearer token ({@code spark.offsetSidecar.token}; Spark redacts keys named
 *     like a token in its UI and logs), or null
 * @param tokenFile a file holding the token, read again when it changes (a mounted Kubernetes
 *     Secret rotates in place) ({@code spark.offsetSidecar.tokenFile}), or null
 * @param tokenEnv the name of an environment variable holding the token
 *     ({@code spark.offsetSidecar.tokenEnv}), or null
 * @param caFile PEM certificates to trust for https instead of the JVM's default trust store
 *     ({@code spark.offsetSidecar.caFile}), or null
 * @param timeoutMillis one request's time limit ({@code spark.offsetSidecar.timeoutMs}, 5000)
 * @param flushTimeoutMillis how long a terminated query, or the JVM's exit, waits for what is
 *     queued ({@code spark.offsetSidecar.flushTimeoutMs}, 10000)
 * @param maxQueries how many queries' newest events may wait at once; past it the oldest is
 *     dropped and counted ({@code spark.offsetSidecar.maxQueries}, 10000)
 * @param backoffMaxMillis the longest wait between retries ({@code
 *     spark.offsetSidecar.backoffMaxMs}, 10000)
 * @param cluster the Kafka cluster the queries read, when the service has several ({@code
 *     spark.offsetSidecar.cluster}), or null: the service's choice for the group
 */
public record ListenerSettings(
    URI url,
    String groupTemplate,
    String token,
    Path tokenFile,
    String tokenEnv,
    Path caFile,
    long timeoutMillis,
    long flushTimeoutMillis,
    int maxQueries,
    long backoffMaxMillis,
    String cluster) {

  public static final String PREFIX = "spark.offsetSidecar.";

  /** A setting that cannot be used, with the key named. */
  public static final class BadSetting extends Exception {
    private static final long serialVersionUID = 1L;

    BadSetting(String key, String problem) {
      super(PREFIX + key + " " + problem);
    }
  }

  /**
   * The settings, from {@code lookup} (a configuration key to its value, or null when unset).
   */
  public static ListenerSettings read(UnaryOperator<String> lookup) throws BadSetting {
    String url = text(lookup, "url", null);
    if (url == null) {
      throw new BadSetting("url", "is not set: give the service's URL, e.g. http://sidecar:8000");
    }
    URI parsed;
    try {
      parsed = URI.create(url.endsWith("/") ? url.substring(0, url.length() - 1) : url);
    } catch (IllegalArgumentException e) {
      throw new BadSetting("url", "is not a URL: '" + url + "' (" + e.getMessage() + ")");
    }
    if (!"http".equals(parsed.getScheme()) && !"https".equals(parsed.getScheme())
        || parsed.getHost() == null) {
      throw new BadSetting("url", "must be an http:// or https:// URL with a host, got '" + url + "'");
    }
    String template = text(lookup, "group", "{queryName}");
    if (!template.contains("{queryName}") && !template.contains("{queryId}")
        && template.contains("{")) {
      throw new BadSetting(
          "group", "knows only {queryName} and {queryId} as placeholders, got '" + template + "'");
    }
    String cluster = text(lookup, "cluster", null);
    if (cluster != null && !cluster.matches("[a-z0-9-]{1,40}")) {
      throw new BadSetting(
          "cluster", "must be 1-40 lowercase letters, digits and '-', got '" + cluster + "'");
    }
    String tokenFile = text(lookup, "tokenFile", null);
    String caFile = text(lookup, "caFile", null);
    if (caFile != null && !Path.of(caFile).toFile().canRead()) {
      throw new BadSetting("caFile", "cannot be read: '" + caFile + "'");
    }
    return new ListenerSettings(
        parsed,
        template,
        text(lookup, "token", null),
        tokenFile == null ? null : Path.of(tokenFile),
        text(lookup, "tokenEnv", null),
        caFile == null ? null : Path.of(caFile),
        positive(lookup, "timeoutMs", 5000),
        positive(lookup, "flushTimeoutMs", 10000),
        (int) Math.min(Integer.MAX_VALUE, positive(lookup, "maxQueries", 10000)),
        positive(lookup, "backoffMaxMs", 10000),
        cluster);
  }

  /** The consumer group of a query, from the template. */
  public String groupFor(String queryId, String queryName) {
    String name = queryName == null || queryName.isEmpty() ? queryId : queryName;
    return groupTemplate.replace("{queryName}", name).replace("{queryId}", queryId);
  }

  private static String text(UnaryOperator<String> lookup, String key, String otherwise) {
    String value = lookup.apply(PREFIX + key);
    return value == null || value.isBlank() ? otherwise : value.trim();
  }

  private static long positive(UnaryOperator<String> lookup, String key, long otherwise)
      throws BadSetting {
    String value = text(lookup, key, null);
    if (value == null) {
      return otherwise;
    }
    try {
      long parsed = Long.parseLong(value);
      if (parsed > 0) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // reported below, with the key
    }
    throw new BadSetting(key, "must be a whole number above 0, got '" + value + "'");
  }
}
