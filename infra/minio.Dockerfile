# MinIO for the Docker Compose stack (compose.yaml). Build context: the repository root (nothing
# from it is copied; the server is built from its Go module).
#
# Why build it: the community edition is source-only and unmaintained; minio/minio was deleted from
# Docker Hub (Sept 2026) and the frozen quay.io images predate the last security fixes.
# The version is the last commit of the archived repository (2026-02-12). The pseudo-version of the
# last release tag (RELEASE.2025-10-15T17-29-55Z) is refused by the Go module proxy; this one is
# served, and it contains everything the tag does plus the later fixes on master.
ARG MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

FROM golang:1.26-bookworm AS build
ARG MINIO_VERSION
# A static, reproducible binary: no cgo (runs on any base), no local paths baked in, no symbol table.
ENV CGO_ENABLED=0 \
    GOFLAGS=-trimpath
RUN go install -ldflags='-s -w' "github.com/minio/minio@${MINIO_VERSION}" \
    && /go/bin/minio --version

FROM debian:bookworm-slim
ARG MINIO_VERSION
LABEL org.opencontainers.image.title="minio" \
      org.opencontainers.image.version="${MINIO_VERSION}" \
      org.opencontainers.image.licenses="AGPL-3.0-only" \
      org.opencontainers.image.source="https://github.com/minio/minio"

# ca-certificates: webhook targets over https. curl: the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 minio \
    && useradd --system --uid 10001 --gid minio --home-dir /data --no-create-home --shell /usr/sbin/nologin minio \
    # /data holds the buckets. /queue holds undelivered bucket events (MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_*):
    # kept out of /data, where a top-level directory would show up as a bucket.
    && install -d -o minio -g minio -m 0750 /data /queue

COPY --from=build /go/bin/minio /usr/local/bin/minio

VOLUME ["/data", "/queue"]
USER minio:minio

# 9000: the S3 API. 9001: the web console (kept internal by compose.yaml).
EXPOSE 9000 9001

ENTRYPOINT ["/usr/local/bin/minio"]
# Without --console-address the console would bind a random port.
CMD ["server", "/data", "--address", ":9000", "--console-address", ":9001"]

HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=5 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:9000/minio/health/ready"]
