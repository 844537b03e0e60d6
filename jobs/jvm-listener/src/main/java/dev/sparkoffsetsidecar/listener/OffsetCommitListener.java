package dev.sparkoffsetsidecar.listener;

import java.io.IOException;
import java.security.GeneralSecurityException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.streaming.StreamingQueryListener;
import org.apache.spark.sql.streaming.StreamingQueryProgress;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reports every completed batch of every streaming query to the spark-offset-sidecar service,
 * attached by configuration alone:
 *
 * <pre>
 * spark.jars                                  .../spark-offset-sidecar-listener.jar
 * spark.sql.streaming.streamingQueryListeners dev.sparkoffsetsidecar.listener.OffsetCommitListener
 * spark.offsetSidecar.url                     http://sidecar:8000
 * spark.offsetSidecar.group                   {queryName}   (optional; see ListenerSettings)
 * spark.offsetSidecar.cluster                 eu-west       (optional: with several clusters)
 * </pre>
 *
 * <p>Spark creates one instance per session (a Spark Connect server: one per client session);
 * they share one {@link ProgressSender} per setting. It never slows or breaks Spark: the
 * callback reads the progress's own JSON and hands it to the sender's thread; nothing it does
 * throws into Spark; a bad setting is one line in the driver log and the listener then does
 * nothing. A terminated query, and the JVM's exit, wait a bounded time for what is queued.
 */
public class OffsetCommitListener extends StreamingQueryListener {
  private static final long serialVersionUID = 1L; // Spark's listener class is Serializable
  private static final Logger LOG = LoggerFactory.getLogger(OffsetCommitListener.class);
  private static final Map<ListenerSettings, ProgressSender> SENDERS = new ConcurrentHashMap<>();

  // never serialized: Spark registers listeners named in its configuration in the driver
  private final transient ListenerSettings settings; // null: disabled by a bad setting
  private final transient ProgressSender sender;

  /** What Spark calls for a class named in {@code spark.sql.streaming.streamingQueryListeners}. */
  public OffsetCommitListener(SparkConf conf) {
    this(read(conf));
  }

  /** Without a SparkConf: the settings from the JVM's system properties. */
  public OffsetCommitListener() {
    this(read(null));
  }

  private OffsetCommitListener(ListenerSettings settings) {
    this.settings = settings;
    this.sender = settings == null ? null : senderFor(settings);
  }

  private static ListenerSettings read(SparkConf conf) {
    try {
      return ListenerSettings.read(
          key -> conf != null ? conf.get(key, System.getProperty(key)) : System.getProperty(key));
    } catch (ListenerSettings.BadSetting e) {
      LOG.error("spark-offset-sidecar listener disabled: {}", e.getMessage());
      return null;
    } catch (RuntimeException e) {
      LOG.error("spark-offset-sidecar listener disabled: cannot read its settings: {}", e.toString());
      return null;
    }
  }

  private static ProgressSender senderFor(ListenerSettings settings) {
    try {
      return SENDERS.computeIfAbsent(
          settings,
          s -> {
            try {
              ProgressSender made = new ProgressSender(s);
              Runtime.getRuntime()
                  .addShutdownHook(new Thread(made::close, "offset-sidecar-sender-flush"));
              LOG.info("spark-offset-sidecar listener reports progress to {}", s.url());
              return made;
            } catch (GeneralSecurityException | IOException e) {
              throw new IllegalStateException(
                  "spark.offsetSidecar.caFile cannot be used: " + e.getMessage(), e);
            }
          });
    } catch (RuntimeException e) {
      LOG.error("spark-offset-sidecar listener disabled: {}", e.getMessage());
      return null;
    }
  }

  /** The sender, for tests and diagnostics; null when a bad setting disabled the listener. */
  ProgressSender sender() {
    return sender;
  }

  @Override
  public void onQueryStarted(QueryStartedEvent event) {}

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    if (sender == null) {
      return;
    }
    try {
      StreamingQueryProgress progress = event.progress();
      String queryId = progress.id().toString();
      sender.offer(
          queryId, settings.groupFor(queryId, progress.name()), progress.json(), settings.cluster());
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("spark-offset-sidecar: dropped a progress event that could not be read: {}", e.toString());
    }
  }

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {
    if (sender == null) {
      return;
    }
    try {
      if (!sender.flush(settings.flushTimeoutMillis())) {
        LOG.warn(
            "spark-offset-sidecar: query {} ended with progress undelivered ({})",
            event.id(),
            sender.lastError());
      }
    } catch (RuntimeException e) {
      LOG.warn("spark-offset-sidecar: flush failed: {}", e.toString());
    }
  }
}
