//! The `loom-fs-mcp` binary: the command line is [`loom_fs_mcp::cli`].
//! Nothing else lives here but the allocator.

/// mimalloc rather than the system's: less CPU per tool call (see
/// docs/benchmarks.md, Design measurements). The library and its tests keep the system
/// allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    loom_fs_mcp::cli::main()
}

/// Off Unix the server is not built (see the crate's docs): say so rather
/// than run without confinement.
#[cfg(not(unix))]
fn main() -> std::process::ExitCode {
    eprintln!(
        "loom-fs does not run on {} yet: it confines every path with Unix descriptors \
         (openat2 on Linux) and has no {} confinement yet",
        std::env::consts::OS,
        std::env::consts::OS
    );
    std::process::ExitCode::FAILURE
}
