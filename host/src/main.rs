//! The `loom-fs-mcp` binary: the command line is [`loom_fs_mcp::cli`].
//! Nothing else lives here.

fn main() -> std::process::ExitCode {
    loom_fs_mcp::cli::main()
}
