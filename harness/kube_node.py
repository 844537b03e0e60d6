"""A Kubernetes node for ``harness.kube_api.KubeApi``: the kubelet and kube-scheduler
(built by ``make tools``) over Debian's containerd, runc and CNI plugins (a bridge
network), so the chart's pod runs as a cluster runs it: scheduled, its image from
containerd (imported here, nothing pulled), the variables and volumes a kubelet gives it,
its probes answered.

Root only. One node on the machine at a time (``machine_lock``): its bridge, the pod
subnet and the kubelet's iptables chains belong to the machine. ``stop`` deletes every pod
(the kubelet tears down their sandboxes and network), stops the processes and removes
what they left: the bridge, the kubelet's iptables chains, mounts under its folder.

This machine runs in a container without CAP_SYS_RESOURCE: containerd is told to keep
``oom_score_adj`` at or above its own (``restrict_oom_score_adj``; runc could not lower it
for the pause container), and the kubelet runs on cgroupfs, without QoS cgroups.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

from harness.kube_api import KubeApi, binary
from harness.machine import free_port, machine_lock
from harness.processes import command_line

BRIDGE = "cni-sidecar0"
NETWORK = "sidecar-test"
SUBNET = "10.244.0.0/24"
# The bridge's address (isGateway: host-local's first of the subnet), once a pod has started:
# this machine as pods reach it (a server for them listens there; no Service, no DNS).
GATEWAY = str(next(ipaddress.ip_network(SUBNET).hosts()))
PAUSE = "localhost/pause:sidecar-test"
# The node's name is its Hostname address, the one the API server dials for logs, exec and
# port-forward: "localhost" reaches the kubelet, which listens on loopback only (a name
# such as node-1 resolves nowhere: "dial tcp: lookup node-1 ...: no such host").
NODE = "localhost"
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CHAINS = {  # what the kubelet adds to the machine's tables
    "filter": ["KUBE-FIREWALL", "KUBE-KUBELET-CANARY"],
    "nat": ["KUBE-KUBELET-CANARY"],
    "mangle": ["KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"],
}


class KubeNode:
    """One node, ``localhost``, of ``api``'s cluster."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.root = api.root / "node"
        self.socket = self.root / "containerd.sock"
        self._lock = contextlib.ExitStack()
        self._processes: list[str] = []

    def start(self, timeout: float = 180.0) -> KubeNode:
        """containerd, the pause image, kube-scheduler and the kubelet; return once the
        node is Ready."""
        for program in ("containerd", "ctr", "/usr/sbin/runc", str(CNI_BIN / "bridge")):
            if shutil.which(program) is None:
                raise RuntimeError(f"{program} is missing: run scripts/install-system-deps.sh")
        self._lock.enter_context(machine_lock("kube-node"))
        deadline = time.monotonic() + timeout
        self.root.mkdir()
        self._containerd(deadline)
        self.import_image(self._pause_image())
        api = self.api
        api._spawn(
            "kube-scheduler",
            binary("kube-scheduler"),
            "--kubeconfig", str(api.kubeconfig),
            "--authentication-kubeconfig", str(api.kubeconfig),
            "--authorization-kubeconfig", str(api.kubeconfig),
            "--bind-address", "127.0.0.1",
            "--secure-port", str(free_port()),
            "--cert-dir", str(self.root / "scheduler-certs"),
            "--leader-elect=false",
        )  # fmt: skip
        config = self.root / "kubelet.json"
        config.write_text(json.dumps(self._kubelet_config()))
        api._spawn(
            "kubelet",
            binary("kubelet"),
            "--kubeconfig", str(api.kubeconfig),
            "--config", str(config),
            "--root-dir", str(self.root / "kubelet"),
            "--hostname-override", NODE,
        )  # fmt: skip
        api.until(self._ready, deadline, "the node Ready")
        return self

    def import_image(self, archive: Path) -> None:
        """An OCI archive into containerd's Kubernetes namespace (its own names kept)."""
        self._ctr("images", "import", str(archive))

    def process(self, container: str) -> int:
        """The pid, on this machine, of the running container named ``container`` (its
        name in the pod spec)."""
        running = {}
        for line in self._ctr("tasks", "list").stdout.splitlines()[1:]:
            task, pid, status = line.split()
            if status == "RUNNING":
                running[task] = int(pid)
        for task, pid in running.items():
            info = json.loads(self._ctr("containers", "info", task).stdout)
            if info.get("Labels", {}).get("io.kubernetes.container.name") == container:
                return pid
        raise RuntimeError(f"no running container {container}")

    def stop(self) -> None:
        """Delete every pod, wait for the kubelet to tear them down, stop the processes
        and remove what they left on the machine."""
        try:
            if self._ready():
                # The workloads first: a ReplicaSet would make its pods again.
                for kinds in ("deployments,replicasets,statefulsets,daemonsets,jobs", "pods"):
                    self.api.kubectl(
                        "delete", kinds, "--all", "--all-namespaces", "--wait=false", check=False
                    )  # fmt: skip
                with contextlib.suppress(RuntimeError):
                    self.api.until(self._no_pod, time.monotonic() + 120, "every pod gone")
            self.api.stop_processes()  # the kubelet and scheduler, containerd, the rest
        finally:
            self._clean_machine()
            self.api.stop()
            self._lock.close()

    # --- containerd ------------------------------------------------------------------

    def _containerd(self, deadline: float) -> None:
        cni = self.root / "cni"
        (cni / "net.d").mkdir(parents=True)
        (cni / "net.d" / "10-bridge.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": NETWORK,
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": SUBNET}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(cni / "ipam"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                }
            )
        )
        cri = '[plugins."io.containerd.grpc.v1.cri"'
        (self.root / "containerd.toml").write_text(
            f"""version = 2
root = "{self.root / "containerd"}"
state = "{self.root / "containerd-state"}"
[grpc]
  address = "{self.socket}"
{cri}]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri}.containerd.runtimes.runc.options]
  BinaryName = "/usr/sbin/runc"
  Root = "{self.root / "runc"}"
  SystemdCgroup = false
{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cni / "net.d"}"
"""
        )
        self.api._spawn(
            "containerd",
            Path(str(shutil.which("containerd"))),
            "--config",
            str(self.root / "containerd.toml"),
        )
        self.api.until(
            lambda: self._ctr("version", check=False).returncode == 0, deadline, "containerd"
        )

    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {done.stderr}")
        return done

    def _tasks(self) -> list[str]:
        listed = self._ctr("tasks", "list", "--quiet", check=False)
        return listed.stdout.split() if listed.returncode == 0 else []

    def _pause_image(self) -> Path:
        """The pause image, made here: Kubernetes' own pause.c (from its module, the
        kubelet's release) compiled statically, as a one-layer OCI archive."""
        release = binary("kubelet")
        version = subprocess.run(
            [str(release), "--version"], capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        found = subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            capture_output=True, text=True, check=True, cwd="/tmp",
        )  # fmt: skip
        source = Path(json.loads(found.stdout)["Dir"]) / "build" / "pause" / "linux" / "pause.c"
        program = self.root / "pause"
        subprocess.run(
            ["gcc", "-Os", "-static", "-DVERSION=sidecar-test", "-o", str(program), str(source)],
            check=True, capture_output=True,
        )  # fmt: skip
        return oci_archive(self.root / "pause.oci.tar", PAUSE, {"pause": program}, ["/pause"])

    # --- kubelet ---------------------------------------------------------------------

    def _kubelet_config(self) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # The API server reaches it for logs and exec; loopback only.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "address": "127.0.0.1",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzPort": 0,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": str(self.root / "pod-logs"),
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failSwapOn": False,
            "failCgroupV1": False,
            "clusterDomain": "cluster.local",
            # A shared machine's disk: no eviction, no image collection.
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "localStorageCapacityIsolation": False,
        }

    def _no_pod(self) -> bool:
        listed = self.api.kubectl("get", "pods", "--all-namespaces", "-o", "name", check=False)
        return listed.returncode == 0 and not listed.stdout.strip() and not self._tasks()

    def _ready(self) -> bool:
        found = self.api.kubectl("get", "node", NODE, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # --- the machine -----------------------------------------------------------------

    def _clean_machine(self) -> None:
        # containerd's shims outlive it (each pod's, by design): ours name our socket.
        for pid in [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]:
            line = command_line(pid) or ""
            if "containerd-shim" in line and f"-address {self.socket}" in line:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        mounts = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(self.root))
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
        for tool in ("iptables", "ip6tables"):
            for table, chains in CHAINS.items():
                for chain in chains:
                    for parent in ("INPUT", "OUTPUT"):
                        subprocess.run(
                            [tool, "-t", table, "-D", parent, "-j", chain], capture_output=True
                        )
                    subprocess.run([tool, "-t", table, "-F", chain], capture_output=True)
                    subprocess.run([tool, "-t", table, "-X", chain], capture_output=True)
        for cached in Path("/var/lib/cni/results").glob(f"{NETWORK}-*"):
            cached.unlink()
        # containerd 1.6 keeps its shims' sockets in /run/containerd/s whatever its config.
        for folder in (Path("/run/containerd/s"), Path("/run/containerd")):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty: another containerd's stay


def oci_archive(path: Path, name: str, files: dict[str, Path], entrypoint: list[str]) -> Path:
    """A one-layer OCI image archive at ``path``, named ``name`` for ``ctr images
    import``: ``files`` (path in the image: file here, executable), run as 65535."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as layer:
        for inside, outside in files.items():
            info = layer.gettarinfo(str(outside), arcname=inside)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with outside.open("rb") as content:
                layer.addfile(info, content)
    diff = layer_tar.getvalue()
    compressed = gzip.compress(diff, mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": entrypoint, "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_sha(diff)}"]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
            "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar+gzip", compressed)],
        }
    ).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                **_descriptor("application/vnd.oci.image.manifest.v1+json", manifest),
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                },
            }
        ],
    }
    with tarfile.open(path, "w") as archive:
        blobs = [compressed, config, manifest]
        entries = {f"blobs/sha256/{_sha(blob)}": blob for blob in blobs}
        entries["oci-layout"] = b'{"imageLayoutVersion": "1.0.0"}'
        entries["index.json"] = json.dumps(index).encode()
        for entry, data in entries.items():
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": f"sha256:{_sha(data)}", "size": len(data)}
