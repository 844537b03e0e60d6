# syntax=docker/dockerfile:1
# The sidecar service (not the Spark side: the listener is its own wheel, jobs/pyproject.toml).
# Multi-stage: build a wheel, install it into a virtualenv, copy only that into a slim
# runtime that runs as a non-root user and writes only to /data (SQLite) and /tmp.

# The base image: Python 3.11 on Debian. make dist and the tests build on ones made of Debian
# packages (mmdebstrap, harness/pod.py) where no registry is reachable: --build-arg BASE=...
# for the runtime, with Debian's CA certificates alone, and BUILD_BASE=... for the build
# stage, which adds the build machine's own CA certificates to reach the package index:
# the image trusts none of them (docs/decisions.md, "The image's build trusts the machine,
# the image does not").
ARG BASE=python:3.11-slim
ARG BUILD_BASE=${BASE}

FROM ${BUILD_BASE} AS build
# make dist gives the commit's time: pip then compiles the image's .pyc files by their
# sources' hashes, not their times (PEP 552), so the same commit builds the same files.
ARG SOURCE_DATE_EPOCH
# The optional extras installed: PostgreSQL, S3, MSK IAM and jobs' OIDC tokens by default;
# add azure (abfs://, abfss://) and gcs (gs://) for followed folders there:
# --build-arg EXTRAS=postgres,s3,msk-iam,oidc,azure,gcs
ARG EXTRAS=postgres,s3,msk-iam,oidc
# Wheels only: no compiler in the image, and pip's resolver, backtracking between s3fs's
# botocore pin and the MSK signer's boto3, never tries to build an old sdist (PyYAML 5.4).
WORKDIR /src
RUN python -m venv /opt/sidecar
COPY pyproject.toml README.md ./
COPY service ./service
COPY migrations ./migrations
RUN /opt/sidecar/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/sidecar/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/sidecar/bin/pip install --no-cache-dir --only-binary :all: "$(ls /wheels/*.whl)[${EXTRAS}]"

FROM ${BASE}
# The image says what it is (OCI annotations): the release (releases.toml; make dist gives a
# development build's version and the commit; scripts/release.py writes the default).
ARG VERSION=0.3.0
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH
LABEL org.opencontainers.image.title="spark-offset-sidecar" \
      org.opencontainers.image.description="Commits Spark Structured Streaming's Kafka offsets to consumer groups on every checkpoint." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN groupadd --system --gid 10001 sidecar \
 && useradd --system --uid 10001 --gid sidecar --home-dir /data --shell /usr/sbin/nologin sidecar \
 && mkdir -p /data && chown sidecar:sidecar /data
COPY --from=build /opt/sidecar /opt/sidecar
ENV PATH=/opt/sidecar/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SIDECAR_HOST=0.0.0.0 \
    SIDECAR_PORT=8000 \
    SIDECAR_DATABASE_URL=sqlite:////data/sidecar.db
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
# Live = the commit loop runs (not: Kafka is up). tests/e2e/test_packaging.py runs this command.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('SIDECAR_PORT', '8000')}/livez\", timeout=2).status != 200)"]
# serve applies pending migrations before it listens
ENTRYPOINT ["offset-sidecar"]
CMD ["serve"]
