package dev.sparkoffsetsidecar.listener;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Background delivery of progress events to the service; the twin of the Python listener's
 * {@code spark_offset_listener.sender}. Invariants:
 *
 * <ul>
 *   <li>{@link #offer} never blocks on the network and never throws: it stores the event and
 *       wakes the sender thread.
 *   <li>Memory is bounded: per query only the newest unsent event is kept (a newer checkpoint
 *       supersedes older ones, counted); at most {@code maxQueries} queries wait, past that
 *       the one waiting longest is dropped and counted.
 *   <li>An event is retried with exponential backoff on connection errors, timeouts, 429 and
 *       5xx, unless a newer event of its query arrived meanwhile. A kept-alive connection that
 *       the service closed as the event went out is not such an error: the event is sent
 *       again at once on a new connection, quietly ({@link #exchange}). Other answers (2xx,
 *       and 4xx that a retry cannot fix) end its delivery; a 4xx is logged with the service's
 *       reason.
 *   <li>{@link #flush} waits a bounded time for everything offered so far.
 * </ul>
 */
final class ProgressSender implements Runnable {
  private static final Logger LOG = LoggerFactory.getLogger(ProgressSender.class);
  private static final Set<Integer> RETRIABLE = Set.of(408, 425, 429, 500, 502, 503, 504);
  private static final long BACKOFF_INITIAL_MILLIS = 200;

  /**
   * Every request names the listener's release (the jar manifest's Implementation-Version,
   * from the POM) and the Java it runs on, for the service's and a proxy's access logs.
   */
  static final String USER_AGENT =
      "spark-offset-sidecar-listener/"
          + version()
          + " Java/"
          + System.getProperty("java.version");

  /** The jar's release, or "unknown" when the classes are not run from the jar. */
  static String version() {
    String version = ProgressSender.class.getPackage().getImplementationVersion();
    return version == null ? "unknown" : version;
  }

  /** Counters, for logs and tests. */
  final AtomicLong offered = new AtomicLong();
  final AtomicLong delivered = new AtomicLong();
  final AtomicLong superseded = new AtomicLong();
  final AtomicLong dropped = new AtomicLong();
  final AtomicLong rejected = new AtomicLong();
  final AtomicLong retries = new AtomicLong();
  final AtomicLong resent = new AtomicLong(); // sent again at once: a kept-alive connection closed

  private final ListenerSettings settings;
  private final HttpClient client;
  private final java.net.URI endpoint;
  // query id -> its newest unsent event, oldest first; guarded by ``this``
  private final LinkedHashMap<String, Outgoing> waiting = new LinkedHashMap<>();
  private String sending; // the query whose event is in delivery, or null; guarded by ``this``
  private boolean stopped; // guarded by ``this``
  private volatile String lastError;
  private volatile String fileToken;
  private volatile FileTime fileTokenAt;

  private static final class Outgoing {
    final String queryId;
    final byte[] body;
    int attempts;
    long notBefore; // System.nanoTime()

    Outgoing(String queryId, byte[] body) {
      this.queryId = queryId;
      this.body = body;
    }
  }

  ProgressSender(ListenerSettings settings) throws GeneralSecurityException, IOException {
    this.settings = settings;
    this.endpoint = java.net.URI.create(settings.url() + "/v1/progress");
    HttpClient.Builder builder =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofMillis(settings.timeoutMillis()));
    if (settings.caFile() != null) {
      builder.sslContext(trusting(settings.caFile()));
    }
    this.client = builder.build();
    Thread thread = new Thread(this, "offset-sidecar-sender");
    thread.setDaemon(true);
    thread.start();
  }

  /** Queue {@code progressJson} (Spark's own JSON text) of {@code queryId} for {@code groupId}. */
  void offer(String queryId, String groupId, String progressJson, String cluster) {
    byte[] body =
        Json.progressEvent(groupId, progressJson, cluster).getBytes(StandardCharsets.UTF_8);
    synchronized (this) {
      offered.incrementAndGet();
      if (waiting.remove(queryId) != null) {
        superseded.incrementAndGet();
      }
      waiting.put(queryId, new Outgoing(queryId, body));
      while (waiting.size() > settings.maxQueries()) {
        Iterator<String> oldest = waiting.keySet().iterator();
        String query = oldest.next();
        oldest.remove();
        long count = dropped.incrementAndGet();
        if (Long.bitCount(count) == 1) { // the 1st, 2nd, 4th, 8th, ...: said, not flooded
          LOG.warn(
              "spark-offset-sidecar: more than spark.offsetSidecar.maxQueries={} queries wait;"
                  + " dropped query {}'s event ({} dropped so far; {})",
              settings.maxQueries(),
              query,
              count,
              lastError);
        }
      }
      notifyAll();
    }
  }

  /** Wait until nothing waits or is in delivery; false if {@code timeoutMillis} ran out. */
  synchronized boolean flush(long timeoutMillis) {
    long deadline = System.nanoTime() + timeoutMillis * 1_000_000;
    while (!waiting.isEmpty() || sending != null) {
      long remaining = (deadline - System.nanoTime()) / 1_000_000;
      if (remaining <= 0) {
        return false;
      }
      try {
        wait(remaining);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /** At the JVM's exit: deliver what waits, for a bounded time, then stop. */
  void close() {
    boolean done = flush(settings.flushTimeoutMillis());
    synchronized (this) {
      if (!done) {
        LOG.warn(
            "spark-offset-sidecar: stopping with {} progress events undelivered to {} ({})",
            waiting.size(),
            settings.url(),
            lastError);
      }
      stopped = true;
      waiting.clear();
      notifyAll();
    }
  }

  String lastError() {
    return lastError;
  }

  @Override
  public void run() {
    Outgoing outgoing;
    while ((outgoing = next()) != null) {
      boolean retry = false;
      try {
        retry = deliver(outgoing);
      } catch (RuntimeException e) { // never let the thread die
        lastError = e.toString();
        LOG.error("spark-offset-sidecar: unexpected error delivering progress", e);
      }
      synchronized (this) {
        sending = null;
        if (retry && !waiting.containsKey(outgoing.queryId) && !stopped) {
          outgoing.attempts++;
          long delay =
              Math.min(
                  settings.backoffMaxMillis(),
                  BACKOFF_INITIAL_MILLIS << Math.min(20, outgoing.attempts));
          outgoing.notBefore = System.nanoTime() + delay * 1_000_000;
          waiting.put(outgoing.queryId, outgoing);
          retries.incrementAndGet();
        }
        notifyAll();
      }
    }
  }

  private synchronized Outgoing next() {
    while (!stopped) {
      long now = System.nanoTime();
      Long wakeAt = null;
      for (Map.Entry<String, Outgoing> entry : waiting.entrySet()) {
        Outgoing candidate = entry.getValue();
        if (candidate.notBefore - now <= 0) {
          waiting.remove(entry.getKey());
          sending = candidate.queryId;
          return candidate;
        }
        if (wakeAt == null || candidate.notBefore - wakeAt < 0) {
          wakeAt = candidate.notBefore;
        }
      }
      try {
        if (wakeAt == null) {
          wait();
        } else {
          wait(Math.max(1, (wakeAt - now) / 1_000_000));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return null;
      }
    }
    return null;
  }

  /** Send once; true if it should be retried. */
  private boolean deliver(Outgoing outgoing) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(endpoint)
            .timeout(Duration.ofMillis(settings.timeoutMillis()))
            .header("Content-Type", "application/json")
            .header("User-Agent", USER_AGENT)
            .POST(HttpRequest.BodyPublishers.ofByteArray(outgoing.body));
    String token = token();
    if (token != null) {
      request.header("Authorization", "Bearer " + token);
    }
    HttpResponse<String> answer;
    try {
      answer = exchange(request.build());
    } catch (IOException e) {
      lastError = e.toString();
      if (outgoing.attempts == 0) {
        LOG.warn("spark-offset-sidecar: cannot reach {} ({}); retrying", settings.url(), e.toString());
      }
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    int status = answer.statusCode();
    if (status >= 200 && status < 300) {
      delivered.incrementAndGet();
      return false;
    }
    String reason = answer.body().length() > 2048 ? answer.body().substring(0, 2048) : answer.body();
    lastError = "HTTP " + status + ": " + reason;
    if (RETRIABLE.contains(status)) {
      return true;
    }
    rejected.incrementAndGet();
    LOG.warn("spark-offset-sidecar: the service refused a progress event (HTTP {}): {}", status, reason);
    return false;
  }

  /**
   * One exchange. The client keeps connections open between events, and the service closes
   * those idle too long: one closed as this request went out fails it with an IOException
   * while the service is up. Such a failure is sent again at once, once, on a new connection,
   * and only a second failure is the service's (logged, then the backoff). A timeout or a
   * refused connection is not sent again here: the service is slow or down, the backoff's
   * case. Sending an event twice is harmless: the service answers a batch it has already
   * recorded as a duplicate.
   */
  private HttpResponse<String> exchange(HttpRequest request)
      throws IOException, InterruptedException {
    try {
      return client.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (HttpTimeoutException | ConnectException e) {
      throw e;
    } catch (IOException e) {
      LOG.debug(
          "spark-offset-sidecar: {} closed a connection under an event ({}); sending it again",
          settings.url(),
          e.toString());
      resent.incrementAndGet();
      return client.send(request, HttpResponse.BodyHandlers.ofString());
    }
  }

  /** The bearer token: the literal setting, else the file (read again when it changes), else
   * the environment variable; null when none is set. */
  private String token() {
    if (settings.token() != null) {
      return settings.token();
    }
    if (settings.tokenFile() != null) {
      try {
        FileTime modified = Files.getLastModifiedTime(settings.tokenFile());
        if (fileToken == null || !modified.equals(fileTokenAt)) {
          fileToken = Files.readString(settings.tokenFile(), StandardCharsets.UTF_8).trim();
          fileTokenAt = modified;
        }
      } catch (IOException e) {
        if (fileToken == null) {
          lastError = "cannot read spark.offsetSidecar.tokenFile: " + e;
        }
      }
      return fileToken;
    }
    if (settings.tokenEnv() != null) {
      return System.getenv(settings.tokenEnv());
    }
    return null;
  }

  private static SSLContext trusting(Path pem) throws GeneralSecurityException, IOException {
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    store.load(null, null);
    try (InputStream in = Files.newInputStream(pem)) {
      int i = 0;
      for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        store.setCertificateEntry("ca-" + i++, certificate);
      }
    }
    TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    trust.init(store);
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, trust.getTrustManagers(), null);
    return context;
  }
}
