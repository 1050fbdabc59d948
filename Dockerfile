# leasehold: a small runtime image with tini as PID 1 (it forwards signals to leasehold and
# reaps orphans), running as an unprivileged user. Debian's tini package also has tini-static,
# which deploy/kubernetes copies into the application's pod with leasehold.
#
#   docker build -t leasehold .          # builds the binary from source (what Compose does)
#   docker run --rm leasehold --help
#
# The published image, ghcr.io/leasehold/leasehold, is built by .github/workflows/release.yml
# with --build-arg BINARY=dist: from the binaries of the release archives (cargo xtask dist,
# glibc 2.17, the kubernetes feature), not from a build of its own, so that the archive and the
# image carry one binary.
ARG BINARY=source

FROM rust:1.95-bookworm AS source
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# Members of the workspace (the test kit, xtask): cargo reads them, the image does not build them.
COPY testkit ./testkit
COPY xtask ./xtask
# With the kubernetes feature: [kubernetes] (the leader's pod label) works from this image.
RUN cargo build --release --locked --bin leasehold --features kubernetes \
    && cp target/release/leasehold /leasehold

# The release workflow's binaries: dist/image/<arch>/leasehold, one per platform.
FROM scratch AS dist
ARG TARGETARCH
COPY dist/image/${TARGETARCH}/leasehold /leasehold

FROM ${BINARY} AS binary

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin leasehold
COPY --from=binary /leasehold /usr/local/bin/leasehold
USER 10001:10001
# [http].listen in the shipped Compose and Kubernetes configs: /healthz, /readyz, /status, /metrics.
EXPOSE 9464
# tini signals leasehold alone (no -g): leasehold decides when its child's process group is
# signalled, and releases the lease only once the child is gone.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/leasehold"]
CMD ["--help"]
