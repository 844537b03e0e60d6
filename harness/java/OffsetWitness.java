// Kafka's own view of consumer groups' committed offsets, read with Kafka's Java Admin
// client as lag tools read it (no part of the sidecar): every INTERVAL_MS each group's
// committed offsets are asked for (one listConsumerGroupOffsets call a group, at most one
// outstanding a group, each bounded by TIMEOUT_MS) and each answer is taken as it arrives,
// so a group whose coordinator is dead delays no other group's reads. Optionally, plain
// Java KafkaConsumers commit for control groups (what Kafka alone does for a commit).
// Compiled by javac at test time on the broker's jars (harness/offset_witness.py):
//
//   java -cp "$(scripts/fetch-jars.sh kafka)/*:CLASSES" OffsetWitness BOOTSTRAP INTERVAL_MS \
//       TIMEOUT_MS [--plain GROUP TOPIC EVERY_MS]... [--] GROUP...
//
// Prints one JSON line per observation on stdout, times in Unix seconds (wall clock, as
// the sidecar's metrics):
//   {"event":"ready","at":T}
//   {"event":"offsets","group":G,"offsets":{"topic":{"0":42}},"at":T}   a change of G's
//       committed offsets (the first answer included), as Kafka answered it at T
//   {"event":"unread","group":G,"error":E,"at":T}  the first failed read after an answer
//   {"event":"read","group":G,"at":T}              the first answer after failed reads
//   {"event":"plain","group":G,"offset":N,"sent":T0,"at":T1}  a plain consumer's
//       commitSync of offset N, sent at T0, answered at T1
//   {"event":"plain_failed","group":G,"offset":N,"sent":T0,"error":E,"at":T1}
// Stops when stdin closes.
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class OffsetWitness {
  static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
  static volatile boolean running = true;

  static double now() {
    return System.currentTimeMillis() / 1000.0;
  }

  static String quote(String text) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  static synchronized void emit(String json) {
    OUT.println(json);
  }

  static String error(Throwable e) {
    Throwable cause = e;
    while (cause.getCause() != null && cause != cause.getCause()) {
      cause = cause.getCause();
    }
    return quote(cause.getClass().getSimpleName() + ": " + cause.getMessage());
  }

  /** {"topic":{"0":42}} of an answer, topics and partitions in order. */
  static String offsets(Map<TopicPartition, OffsetAndMetadata> answer) {
    Map<String, Map<Integer, Long>> byTopic = new TreeMap<>();
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : answer.entrySet()) {
      if (e.getValue() != null) {
        byTopic.computeIfAbsent(e.getKey().topic(), t -> new TreeMap<>())
            .put(e.getKey().partition(), e.getValue().offset());
      }
    }
    StringBuilder b = new StringBuilder("{");
    for (Map.Entry<String, Map<Integer, Long>> t : byTopic.entrySet()) {
      if (b.length() > 1) {
        b.append(',');
      }
      b.append(quote(t.getKey())).append(":{");
      boolean first = true;
      for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
        b.append(first ? "" : ",").append('"').append(p.getKey()).append("\":").append(p.getValue());
        first = false;
      }
      b.append('}');
    }
    return b.append('}').toString();
  }

  /** Reads every group every intervalMs, each answer taken as it arrives. */
  static void watch(Admin admin, List<String> groups, long intervalMs, int timeoutMs)
      throws InterruptedException {
    Set<String> asking = ConcurrentHashMap.newKeySet();
    Map<String, String> seen = new ConcurrentHashMap<>();
    Set<String> failing = ConcurrentHashMap.newKeySet();
    ListConsumerGroupOffsetsOptions options = new ListConsumerGroupOffsetsOptions().timeoutMs(timeoutMs);
    while (running) {
      long started = System.nanoTime();
      for (String group : groups) {
        if (!asking.add(group)) {
          continue;  // its last read is still outstanding
        }
        admin.listConsumerGroupOffsets(Map.of(group, new ListConsumerGroupOffsetsSpec()), options)
            .partitionsToOffsetAndMetadata(group)
            .whenComplete((answer, failure) -> {
              double at = now();
              asking.remove(group);
              if (failure != null) {
                if (failing.add(group)) {
                  emit("{\"event\":\"unread\",\"group\":" + quote(group) + ",\"error\":"
                      + error(failure) + ",\"at\":" + at + "}");
                }
                return;
              }
              if (failing.remove(group)) {
                emit("{\"event\":\"read\",\"group\":" + quote(group) + ",\"at\":" + at + "}");
              }
              String text = offsets(answer);
              if (!text.equals(seen.put(group, text))) {
                emit("{\"event\":\"offsets\",\"group\":" + quote(group) + ",\"offsets\":" + text
                    + ",\"at\":" + at + "}");
              }
            });
      }
      long left = intervalMs - (System.nanoTime() - started) / 1_000_000;
      if (left > 0) {
        Thread.sleep(left);
      }
    }
  }

  /** A plain consumer of ``group`` committing partition 0 of ``topic`` every everyMs. */
  static Thread plain(String bootstrap, String group, String topic, long everyMs) {
    Thread thread = new Thread(() -> {
      Properties config = new Properties();
      config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      TopicPartition partition = new TopicPartition(topic, 0);
      try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
        consumer.assign(Collections.singletonList(partition));
        long offset = 0;
        while (running) {
          offset += 1;
          double sent = now();
          try {
            consumer.commitSync(Map.of(partition, new OffsetAndMetadata(offset)), Duration.ofSeconds(60));
            emit("{\"event\":\"plain\",\"group\":" + quote(group) + ",\"offset\":" + offset
                + ",\"sent\":" + sent + ",\"at\":" + now() + "}");
          } catch (RuntimeException e) {
            emit("{\"event\":\"plain_failed\",\"group\":" + quote(group) + ",\"offset\":" + offset
                + ",\"sent\":" + sent + ",\"error\":" + error(e) + ",\"at\":" + now() + "}");
          }
          try {
            Thread.sleep(everyMs);
          } catch (InterruptedException e) {
            return;
          }
        }
      }
    }, "plain " + group);
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: OffsetWitness BOOTSTRAP INTERVAL_MS TIMEOUT_MS "
          + "[--plain GROUP TOPIC EVERY_MS]... [--] GROUP...");
      System.exit(2);
    }
    String bootstrap = args[0];
    long intervalMs = Long.parseLong(args[1]);
    int timeoutMs = Integer.parseInt(args[2]);
    List<String> groups = new ArrayList<>();
    List<String[]> plains = new ArrayList<>();
    for (int i = 3; i < args.length; i++) {
      if (args[i].equals("--plain")) {
        plains.add(new String[] {args[i + 1], args[i + 2], args[i + 3]});
        groups.add(args[i + 1]);  // read like any other group
        i += 3;
      } else if (!args[i].equals("--")) {
        groups.add(args[i]);
      }
    }
    Properties config = new Properties();
    config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    try (Admin admin = Admin.create(config)) {
      Thread stdin = new Thread(() -> {
        try {
          while (System.in.read() >= 0) {
            // nothing is read from stdin: its end is the signal to stop
          }
        } catch (Exception e) {
          // stop all the same
        }
        running = false;
      }, "stdin");
      stdin.setDaemon(true);
      stdin.start();
      for (String[] p : plains) {
        plain(bootstrap, p[0], p[1], Long.parseLong(p[2]));
      }
      emit("{\"event\":\"ready\",\"at\":" + now() + "}");
      watch(admin, groups, intervalMs, timeoutMs);
    }
    System.exit(0);
  }
}
