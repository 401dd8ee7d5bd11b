# syntax=docker/dockerfile:1
# roster's container image: built from this checkout, run as an unprivileged user.
#
#   docker build -t roster .
#   docker run -d --name roster -p 8848:8848 -p 9848:9848 -v roster-data:/var/lib/roster \
#       -e ROSTER_ADMIN_PASSWORD roster    # the password from your environment, not argv
#
# Two stages: the Rust toolchain builds a release binary; the runtime image holds that
# binary, the CA certificates (sync sources over HTTPS) and nothing else of note.

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# The console is served from console-ui/dist, committed and embedded at build time: no
# Node.js here. --locked: exactly the versions in Cargo.lock.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p roster-server --bin roster \
    && install -D -m 0755 target/release/roster /out/roster

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 roster \
    && useradd --system --uid 10001 --gid roster --home-dir /var/lib/roster --shell /usr/sbin/nologin roster \
    && install -d -m 0700 -o roster -g roster /var/lib/roster
COPY --from=builder /out/roster /usr/local/bin/roster

# Listen on every interface inside the container; the peer address others dial is the
# node's --members entry. gRPC defaults to the HTTP port + 1000 (9848).
ENV ROSTER_HTTP=0.0.0.0:8848 \
    ROSTER_PEER=0.0.0.0:7848 \
    ROSTER_DATA_DIR=/var/lib/roster
# HTTP API, metrics and health; Nacos 2.x gRPC; the peer channel; DNS (with --dns 0.0.0.0:8600).
EXPOSE 8848/tcp 9848/tcp 7848/tcp 8600/udp 8600/tcp
# The Raft log, snapshots, the audit trail and initial-admin-password. A named volume
# takes the directory's owner (roster) from the image; a host directory must be
# writable by uid 10001.
VOLUME ["/var/lib/roster"]
USER 10001:10001

# Healthy = ready to serve (/health/ready: a leader is known and the state is loaded).
# The image has no curl or wget, and roster has no probe subcommand: bash's /dev/tcp
# sends the request. It reads the port from ROSTER_HTTP; over HTTPS (--http-tls-cert)
# use the orchestrator's own probe instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${ROSTER_HTTP##*:} && printf 'GET /health/ready HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]

ENTRYPOINT ["/usr/local/bin/roster"]
