# leasehold: a small runtime image with tini as PID 1 (it forwards signals to leasehold and
# reaps orphans), running as an unprivileged user. Debian's tini package also has tini-static,
# which deploy/kubernetes copies into the application's pod with leasehold.
#
#   docker build -t leasehold .
#   docker run --rm leasehold --help

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# A member of the workspace (the test kit): cargo reads it, the image does not build it.
COPY testkit ./testkit
# With the kubernetes feature: [kubernetes] (the leader's pod label) works from this image.
RUN cargo build --release --locked --bin leasehold --features kubernetes

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin leasehold
COPY --from=build /src/target/release/leasehold /usr/local/bin/leasehold
USER 10001:10001
# [http].listen in the shipped Compose and Kubernetes configs: /healthz, /readyz, /status, /metrics.
EXPOSE 9464
# tini signals leasehold alone (no -g): leasehold decides when its child's process group is
# signalled, and releases the lease only once the child is gone.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/leasehold"]
CMD ["--help"]
