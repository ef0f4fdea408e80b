# loom-fs-mcp in a container: built from this repository, run as a
# non-root user on a read-only filesystem. See docs/http.md, "Container".
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# rust-toolchain.toml names Rust 1.95 and the wasm32-wasip2 target; the
# build compiles the tool components and embeds them in the binary.
RUN cargo build --release --locked -p loom-fs-mcp

# The runtime stage: scripts/container-test builds it from this text, with a
# binary built on the host in place of the build stage's.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin loomfs
COPY --from=build /src/target/release/loom-fs-mcp /usr/local/bin/loom-fs-mcp
# The components are compiled once, here, into the image: a start maps them
# (no second of compiling), the cache is read-only like the rest of the image
# (a server under landlock never writes it anyway), and any --user can read it.
ENV LOOMFS_CACHE_DIR=/var/cache/loom-fs
RUN mkdir -p "$LOOMFS_CACHE_DIR" \
 && loom-fs-mcp check --allow-root --reference /tmp >/dev/null \
 && chmod -R a+rX "$LOOMFS_CACHE_DIR"
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["/usr/local/bin/loom-fs-mcp"]
# HTTP inside the container must listen beyond loopback to be published;
# the token makes that safe. For stdio, override the command (docs/http.md).
CMD ["--config", "/config/roots.toml", "--transport", "http", "--listen", "0.0.0.0:3000", \
     "--allow-non-loopback", "--allowed-host", "localhost", "--auth-token-file", "/run/secrets/loomfs_token"]
