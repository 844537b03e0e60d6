"""A real Kafka cluster of several nodes for tests: ``scripts/local-kafka-cluster.sh``
(each node a KRaft broker and controller from Maven Central jars, every topic with 3
replicas and min.insync.replicas 2), started in an empty folder, its nodes stopped,
killed and started again one by one as production rolls and loses them."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.machine import ROOT, refuse_in_inner_loop

SCRIPT = ROOT / "scripts" / "local-kafka-cluster.sh"
import kafka_metadata  # noqa: E402  (scripts/, on the path by harness.machine)


class ClusterCommandFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class LocalCluster:
    folder: Path
    nodes: int
    bootstrap: str = ""

    def _run(self, *args: str) -> str:
        env = {
            **os.environ,
            "LOCAL_KAFKA_CLUSTER_DIR": str(self.folder),
            "LOCAL_KAFKA_CLUSTER_NODES": str(self.nodes),
        }
        done = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            logs = "\n".join(
                f"--- {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                for log in sorted(self.folder.glob("node-*/kafka.log"))
            )
            raise ClusterCommandFailed(
                f"local-kafka-cluster.sh {' '.join(args)} failed: "
                f"{done.stderr.strip() or done.stdout.strip()}\n{logs}"
            )
        return done.stdout.strip()

    def address(self, node: int) -> str:
        return self.bootstrap.split(",")[node - 1]

    def stop_node(self, node: int) -> None:
        """As a rolling restart does: SIGTERM, a controlled shutdown."""
        self._run("stop-node", str(node))

    def kill_node(self, node: int) -> None:
        """As a crash does: SIGKILL."""
        self._run("kill-node", str(node))

    def start_node(self, node: int) -> None:
        self._run("start-node", str(node))

    def stop(self) -> None:
        self._run("stop")

    def live_brokers(self, asking: int) -> set[int]:
        """The brokers node ``asking`` lists in its metadata: Kafka lists a broker until
        it fences it (``broker.session.timeout.ms`` after a crash)."""
        try:
            return {node for node, _, _ in kafka_metadata.brokers(self.address(asking))}
        except OSError:
            return set()


def brand_new(folder: Path, nodes: int = 3) -> LocalCluster:
    """A cluster of ``nodes`` started in the empty ``folder``; the caller stops it."""
    refuse_in_inner_loop("starts a Kafka cluster")
    cluster = LocalCluster(folder, nodes)
    bootstrap = cluster._run("start").splitlines()[-1]
    return LocalCluster(folder, nodes, bootstrap)
