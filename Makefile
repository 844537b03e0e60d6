# Two commands do all the set-up on a fresh machine:
#   make demo   local Kafka + the service (SQLite) + a demo PySpark job whose lag goes to zero
#   make test   virtualenv, jars, lint, type checks and the whole test suite
# The inner loop (CONTRIBUTING.md): make check   lint, types, tests without broker/Spark/podman
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Jars, Spark driver environments and tools are kept outside the clone, shared by every
# checkout on the machine, each in a folder keyed by what it is made of.
CACHE ?= $(or $(SPARK_OFFSET_SIDECAR_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/spark-offset-sidecar)
export SPARK_OFFSET_SIDECAR_CACHE := $(CACHE)

# Azurite, Microsoft's Azure Storage emulator (npm; looked up 2026-11-25: 3.37.0 is the
# newest), for the follower's abfs:// tests.
AZURITE_VERSION := 3.37.0
AZURITE := .local/bin/azurite-blob
AZURITE_HOME := $(CACHE)/tools/azurite-$(AZURITE_VERSION)
AZURITE_CACHED := $(AZURITE_HOME)/node_modules/.bin/azurite-blob

HELM_VERSION := v3.16.4
HELM := .local/bin/helm
HELM_CACHED := $(CACHE)/tools/helm-$(HELM_VERSION)/helm
# syft reads the image's SBOM in `make dist` (scripts/dist.py), built from the Go module
# proxy (looked up 2026-12-02: v1.57.2 is the newest) when dist first needs it, not by
# `make tools`: 6 minutes of compiling on 2 cores, which the suite overlaps with its tests.
SYFT_VERSION := v1.57.2
SYFT := .local/bin/syft
SYFT_CACHED := $(CACHE)/tools/syft-$(SYFT_VERSION)/syft
# go-containerregistry's crane (from the Go module proxy; looked up 2026-12-06: v0.22.1 is
# the newest): `crane registry serve`, an OCI registry in one process on a loopback
# address, its blobs in a folder, for the tests that publish the release's image and
# chart and install them from it (tests/e2e/test_registries.py).
CRANE_VERSION := v0.22.1
CRANE := .local/bin/crane
CRANE_CACHED := $(CACHE)/tools/crane-$(CRANE_VERSION)/crane
# Kubernetes for the chart's tests on a real API server and node (tests/e2e/test_kubernetes.py,
# test_kubernetes_node.py; harness/kube_api.py, kube_node.py): kube-apiserver,
# kube-controller-manager, kubectl, kube-scheduler and the kubelet of one release, built
# from the Go module proxy (scripts/build-kubernetes.sh: about 5 minutes of 2 idle cores,
# figures there), and
# kine, etcd's API over SQLite, as their store (224 s of CPU; 20 minutes on the busy cores
# of 2026-12-06). v1.34.4: the release tried here first (v1.34.0 to v1.37.2 are served).
KUBERNETES_VERSION := v1.34.4
KUBERNETES_HOME := $(CACHE)/tools/kubernetes-$(KUBERNETES_VERSION)
KUBERNETES_BINARIES := kube-apiserver kube-controller-manager kubectl kube-scheduler kubelet
KINE_VERSION := v0.17.5
KINE := .local/bin/kine
KINE_CACHED := $(CACHE)/tools/kine-$(KINE_VERSION)/kine
# Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule) for the chart's tests, from the
# Go module proxy (GitHub is not reachable from everywhere).
PROMETHEUS_OPERATOR := github.com/prometheus-operator/prometheus-operator@v0.78.2

.PHONY: test check demo docs dist bench fuzz lint typecheck venv jars tools system-deps dist-deps kafka-start kafka-stop kafka-cluster-start kafka-cluster-stop clean

# The virtualenv is installed by uv, itself installed by the new virtualenv's pip (brought
# up to date: it builds the wheelhouse) at the version the dev extra allows, its bytecode
# compiled as pip would, with the wheels of what PyPI has only as source from the machine's
# wheelhouse (scripts/wheelhouse.py): docs/decisions.md, "The virtualenv installed by uv".
# UV_SYSTEM_CERTS: the machine's certificate store, as pip uses it (a company's proxy, a
# mirror with a CA of its own).
UV_REQUIREMENT := $(shell grep -o '"uv[<>=][^"]*"' pyproject.toml)
INSTALL = $(PY) -m pip install -q --disable-pip-version-check --upgrade pip $(UV_REQUIREMENT) && \
	UV_SYSTEM_CERTS=1 $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) \
	--find-links "$$($(PY) scripts/wheelhouse.py)"

$(STAMP): pyproject.toml jobs/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(INSTALL) -e '.[spark,dev,postgres,s3,azure,gcs,msk-iam,oidc]' -e ./jobs
	touch $(STAMP)

venv: $(STAMP)

# Debian packages: every one the tests use, or (dist-deps) only those make dist uses, a subset
# (scripts/install-system-deps.sh lists both).
system-deps:
	scripts/install-system-deps.sh

dist-deps:
	scripts/install-system-deps.sh dist

jars: venv system-deps
	scripts/fetch-jars.sh kafka >/dev/null
	scripts/fetch-jars.sh spark $(PY) >/dev/null
	scripts/build-jvm-listener.sh >/dev/null

$(HELM_CACHED):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) GOFLAGS=-mod=mod go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(HELM): $(HELM_CACHED)
	mkdir -p .local/bin
	ln -sf $(HELM_CACHED) $(HELM)

$(SYFT_CACHED):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) GOFLAGS=-mod=mod go install -ldflags "-X main.version=$(SYFT_VERSION)" \
	  github.com/anchore/syft/cmd/syft@$(SYFT_VERSION)

$(SYFT): $(SYFT_CACHED)
	mkdir -p .local/bin
	ln -sf $(SYFT_CACHED) $(SYFT)

$(CRANE_CACHED):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) GOFLAGS=-mod=mod go install \
	  github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)

$(CRANE): $(CRANE_CACHED)
	mkdir -p .local/bin
	ln -sf $(CRANE_CACHED) $(CRANE)

# Installed into a folder of its own, run once, then moved into place: an install cut short
# (or two at once into one cache) left modules missing and every Azure test red. The
# `installed` mark is written only by a whole install; a folder without it is replaced.
$(AZURITE_HOME)/installed:
	rm -rf $(AZURITE_HOME).partial.$$$$ && mkdir -p $(AZURITE_HOME).partial.$$$$ && \
	npm install --silent --no-audit --no-fund --prefix $(AZURITE_HOME).partial.$$$$ \
	  azurite@$(AZURITE_VERSION) && \
	$(AZURITE_HOME).partial.$$$$/node_modules/.bin/azurite-blob --version >/dev/null && \
	touch $(AZURITE_HOME).partial.$$$$/installed && \
	rm -rf $(AZURITE_HOME) && mv $(AZURITE_HOME).partial.$$$$ $(AZURITE_HOME)

$(AZURITE): | $(AZURITE_HOME)/installed
	mkdir -p .local/bin
	ln -sf $(AZURITE_CACHED) $(AZURITE)

# One build per machine: a second checkout (or a second make) waits on the lock and
# finds the folder made.
# The kubelet, built last, marks a whole folder.
$(KUBERNETES_HOME)/kubelet:
	mkdir -p $(CACHE)/tools
	flock $(KUBERNETES_HOME).lock sh -c 'test -x $@ || \
	  scripts/build-kubernetes.sh $(KUBERNETES_VERSION) $(KUBERNETES_HOME)'

$(addprefix .local/bin/,$(KUBERNETES_BINARIES)): $(KUBERNETES_HOME)/kubelet
	mkdir -p .local/bin
	ln -sf $(KUBERNETES_HOME)/$(notdir $@) $@

# CGO: kine's SQLite is the C library (mattn/go-sqlite3).
$(KINE_CACHED):
	mkdir -p $(dir $@)
	flock $(dir $@).lock sh -c 'test -x $@ || GOBIN=$(dir $@) GOFLAGS=-mod=mod CGO_ENABLED=1 \
	  go install -ldflags "-X github.com/k3s-io/kine/pkg/version.Version=$(KINE_VERSION)" \
	  github.com/k3s-io/kine@$(KINE_VERSION)'

$(KINE): $(KINE_CACHED)
	mkdir -p .local/bin
	ln -sf $(KINE_CACHED) $(KINE)

tools: system-deps $(HELM) $(AZURITE) $(CRANE) $(addprefix .local/bin/,$(KUBERNETES_BINARIES)) $(KINE)
	go mod download -json $(PROMETHEUS_OPERATOR) >/dev/null

lint: venv
	$(VENV)/bin/ruff check service jobs migrations tests harness bench scripts stubs
	$(VENV)/bin/ruff format --check service jobs migrations tests harness bench scripts stubs
	$(VENV)/bin/hadolint Dockerfile

typecheck: venv
	$(VENV)/bin/mypy --strict

# The suite runs in TEST_WORKERS pytest-xdist workers, each with its own broker, PostgreSQL
# and folders (tests/conftest.py); TEST_WORKERS=0 runs it in this one process. Three on 2
# cores: its tests wait on brokers, Spark and the clock, and with two workers the cores
# sat idle (docs/decisions.md, "Three test workers"). The inner loop's tests only
# compute: CHECK_WORKERS, one a core.
TEST_WORKERS ?= 3
CHECK_WORKERS ?= 2

# --durations: the slowest tests close every run's output (where a cold run's time goes).
# --no-loadscope-reorder: tests are handed out in tests/conftest.py's order (the release
# folder's build, then long tests, then Spark), an xdist_group where its first test stands;
# by default loadgroup hands out every group of two tests or more before any other test.
# compileall: the checkout's modules compiled once, before the hundreds of services and
# children the suite starts import them (docs/decisions.md, "The checkout compiled once").
test: jars tools lint typecheck docs
	$(PY) -m compileall -q service migrations harness tests bench jobs scripts
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
		--durations=30 $(PYTEST_ARGS)

# The inner loop needs the virtualenv alone: every test that needs no broker, Spark,
# container or program beside the virtualenv (markers kafka, spark, container, tools, read
# from the fixtures a test uses: tests/conftest.py); INNER_LOOP=1 makes an unmarked test
# that reaches for one fail, naming the marker.
check: venv lint typecheck docs
	INNER_LOOP=1 $(PY) -m pytest -q -n $(CHECK_WORKERS) --dist loadgroup \
		-m "not kafka and not spark and not container and not tools" $(PYTEST_ARGS)

# The manual (docs/, mkdocs.yml) as a site in .local/site: every warning an error (broken
# links and anchors, pages outside the navigation); the generated pages must be current.
docs: venv
	$(PY) scripts/release.py stamp --check
	$(PY) scripts/chart_readme.py --check
	$(PY) scripts/api_reference.py --check
	$(PY) scripts/references.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# A release of this tree in one folder, dist/<version>/ (scripts/dist.py; docs/versions.md):
# wheels, sdist, the JVM listener's jars and POM, the chart, the image as an OCI archive,
# an SBOM of each, SHA256SUMS. Not on a clean tree tagged v<version> (releases.toml), it is
# a development build, <version>-dev<N>; RELEASE=1 refuses that instead.
dist: venv dist-deps $(HELM) $(SYFT)
	$(PY) scripts/dist.py $(if $(RELEASE),--release)

# The benchmarks (bench/__main__.py): `make bench` lists them, `make bench SCENARIO=name
# ARGS="..."` runs one (a brand-new broker when it needs one). Results: docs/benchmarks/.
bench: jars tools
	$(PY) -m bench $(SCENARIO) $(ARGS)

# `make demo` asks for no more than it uses: Python 3.11 and Java 17. The virtualenv gets the
# service, PySpark and the listener (no test extras); the jars come from Maven Central
# (scripts/mvn.sh fetches Maven itself when there is no mvn); no Debian package, no root.
DEMO_STAMP := $(VENV)/.demo-installed

$(DEMO_STAMP): pyproject.toml jobs/pyproject.toml
	@echo "[demo] installing the service, PySpark and the listener into $(VENV) (once)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(INSTALL) -e '.[spark]' -e ./jobs
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@scripts/fetch-jars.sh kafka >/dev/null
	@scripts/fetch-jars.sh spark $(PY) >/dev/null
	@$(PY) -m jobs.demo

# The fuzz tests, longer than in `make test` (120 examples a test there); prints figures.
FUZZ_EXAMPLES ?= 2000
FUZZ_SEED ?= 30
fuzz: jars
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) $(PY) -m pytest -s \
	  --hypothesis-show-statistics tests/e2e/test_fuzz_api.py tests/unit/test_parsers_fuzz.py

kafka-start: jars
	scripts/local-kafka.sh start

kafka-stop:
	scripts/local-kafka.sh stop

kafka-cluster-start: jars
	scripts/local-kafka-cluster.sh start

kafka-cluster-stop:
	scripts/local-kafka-cluster.sh stop

clean:
	-scripts/local-kafka.sh stop
	-scripts/local-kafka-cluster.sh stop
	rm -rf $(VENV) .local .mypy_cache .ruff_cache .pytest_cache
