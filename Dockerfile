# loom-fs-mcp in a container: built from this repository, run as a
# non-root user on a read-only filesystem. See README.md, "Container".
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# rust-toolchain.toml names Rust 1.95 and the wasm32-wasip2 target; the
# build compiles the tool components and embeds them in the binary.
RUN cargo build --release --locked -p loom-fs-mcp

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin loomfs
COPY --from=build /src/target/release/loom-fs-mcp /usr/local/bin/loom-fs-mcp
# The compiled-component cache lives on the tmpfs: the image stays read-only.
ENV LOOMFS_CACHE_DIR=/tmp/loom-fs-cache
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["/usr/local/bin/loom-fs-mcp"]
# HTTP inside the container must listen beyond loopback to be published;
# the token makes that safe. For stdio, override the command (README).
CMD ["--config", "/config/roots.toml", "--transport", "http", "--listen", "0.0.0.0:3000", \
     "--allow-non-loopback", "--allowed-host", "localhost", "--auth-token-file", "/run/secrets/loomfs_token"]
