#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl, kube-scheduler and kubelet of one
# Kubernetes release from the Go module proxy into a folder (`make tools`; the chart's tests
# on a real API server and node, harness/kube_api.py and harness/kube_node.py):
#   scripts/build-kubernetes.sh v1.34.4 DEST
# k8s.io/kubernetes's module leaves out its staging folders, which its go.mod (and go.work,
# hence GOWORK=off) replaces 31 k8s.io/* modules with (./staging/src/k8s.io/X); each is
# pointed at the published module of the same release (v0.34.4 for v1.34.4) instead. The
# version ldflags are those of hack/lib/version.sh: without them the binaries say v0.0.0-master, and Helm (kubeVersion
# constraints, .Capabilities) reads the server's. Built into DEST.partial.PID, checked, then
# moved into place: a build cut short leaves no half folder behind.
# Measured 2026-12-06 on 2 cores shared with five other builds and suites (load 15-20):
# kube-apiserver 1663 s, then kube-controller-manager 217 s and kubectl 61 s (they reuse
# its packages); 640 s of CPU in all, about 5 minutes on 2 idle cores. kube-scheduler and
# the kubelet after them, on idle cores: 5 s and 30 s. With Go's build cache warm, 60 s.
set -euo pipefail
version=${1:?usage: build-kubernetes.sh vX.Y.Z DEST}
dest=${2:?usage: build-kubernetes.sh vX.Y.Z DEST}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "not a Kubernetes release: $version" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
staging="v0.${minor}.${BASH_REMATCH[2]}"
partial="$dest.partial.$$"
work=$(mktemp -d)
trap 'rm -rf "$work" "$partial"' EXIT

module=$(go mod download -json "k8s.io/kubernetes@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp -r "$module" "$work/kubernetes"
chmod -R u+w "$work/kubernetes"
cd "$work/kubernetes"
sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging#" go.mod
if grep -q '=> ./staging' go.mod; then
  echo "go.mod still replaces modules with staging folders:" >&2
  grep '=> ./staging' go.mod >&2
  exit 1
fi

build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
mkdir -p "$partial"
# One at a time, each timed (the later ones reuse the packages the first compiled).
for cmd in kube-apiserver kube-controller-manager kubectl kube-scheduler kubelet; do
  start=$(date +%s)
  CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" \
    -o "$partial/$cmd" "./cmd/$cmd"
  echo "built $cmd $version in $(( $(date +%s) - start )) s" >&2
done
# Read whole, then compared (grep -q closing the pipe early fails it under pipefail).
said=$("$partial/kube-apiserver" --version)
[ "$said" = "Kubernetes $version" ] || { echo "kube-apiserver says: $said" >&2; exit 1; }
said=$("$partial/kubectl" version --client)
[[ $said == *"Client Version: $version"* ]] || { echo "kubectl says: $said" >&2; exit 1; }
rm -rf "$dest"
mv "$partial" "$dest"
