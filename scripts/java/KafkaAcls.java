// Adds ACLs to a Kafka cluster with Kafka's own Admin client: the same request
// kafka-acls.sh sends. Run as a single source file (Java 11+) on the broker's jars:
//
//   java -cp "$(scripts/fetch-jars.sh kafka)/*" scripts/java/KafkaAcls.java BOOTSTRAP \
//       User:alice TOPIC LITERAL orders READ [PRINCIPAL TYPE PATTERN NAME OPERATION ...]
//
// Each five arguments are one ALLOW ACL from any host. The bootstrap address must be a
// listener whose principal may alter ACLs (a super user). Exits 0 once the controller
// has every ACL.
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaAcls {
  public static void main(String[] args) throws Exception {
    if (args.length < 6 || (args.length - 1) % 5 != 0) {
      System.err.println("usage: KafkaAcls BOOTSTRAP (PRINCIPAL TYPE PATTERN NAME OPERATION)...");
      System.exit(2);
    }
    List<AclBinding> acls = new ArrayList<>();
    for (int i = 1; i < args.length; i += 5) {
      ResourcePattern resource = new ResourcePattern(
          ResourceType.fromString(args[i + 1]), args[i + 3], PatternType.fromString(args[i + 2]));
      AccessControlEntry entry = new AccessControlEntry(
          args[i], "*", AclOperation.fromString(args[i + 4]), AclPermissionType.ALLOW);
      acls.add(new AclBinding(resource, entry));
    }
    Properties config = new Properties();
    config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(config)) {
      admin.createAcls(acls).all().get();
    }
  }
}
