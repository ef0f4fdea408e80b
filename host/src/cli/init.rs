//! `loom-fs-mcp init`: writes a config file for the directories given (with
//! their role flags), every optional key shown commented out with its
//! default, then says what `check` says of it. Never overwrites a file.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::args::Cli;
use super::check::check_config;
use super::dir_args;
use crate::config::{Config, DirArg};
use crate::policy::{Role, Root};

pub(super) fn init(cli: &Cli, output: &Path) -> anyhow::Result<()> {
    let mut dirs = dir_args(cli);
    if dirs.is_empty() {
        // No directory: the current one, read only.
        dirs.push(DirArg {
            path: std::env::current_dir().context("no current directory")?,
            role: Role::Reference,
        });
    }
    // Named, resolved and validated as serving them would.
    let config = Config::load_with(None, &dirs, cli.roles.allow_filesystem_root, false)?;
    let text = config_text(&config.roots);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(output)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} exists: init never overwrites a file; give another with --output",
                output.display()
            ),
            _ => anyhow::anyhow!("cannot create {}: {e}", output.display()),
        })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", output.display()))?;
    let output = std::fs::canonicalize(output).unwrap_or_else(|_| output.to_path_buf());
    println!("wrote {}", output.display());
    println!(
        "serve it with: {} --config {}",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "loom-fs-mcp".into()),
        output.display()
    );
    println!();
    check_config(cli, Config::load(&output, cli.read_only)?)
}

/// A TOML string, quoted and escaped (a Windows path's backslashes too).
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The file: the global keys as in `roots.example.toml`, all commented out
/// at their defaults, then one `[[roots]]` per root with its absolute path.
fn config_text(roots: &[Arc<Root>]) -> String {
    let mut text = String::from(
        "# Written by `loom-fs-mcp init`. Every key is documented in loom-fs's docs/configuration.md;\n\
         # those commented out show their defaults. Check it with `loom-fs-mcp check --config FILE`.\n\
         \n\
         audit_log = \"stderr\"          # or a file path: rotated by size, never stdout\n\
         # audit_log_max_bytes = 8388608\n\
         # audit_log_backups = 3\n\
         # max_search_results = 200\n\
         # max_search_bytes = 67108864\n\
         # max_list_entries = 1000\n\
         # tool_timeout_ms = 30000\n\
         # tool_memory_bytes = 268435456\n\
         # max_concurrent_calls = 8\n\
         # quota_bytes_per_minute = 104857600  # byte quota, off unless set: 100 MiB a minute\n\
         # quota_burst_bytes = 104857600       # default: a minute's worth\n\
         # min_free_bytes = 268435456   # free space a change must leave on a root's disk (0: none)\n\
         # trash_max_bytes = 1073741824 # bytes a root's trash may hold (0: no budget)\n\
         # read_only = false\n\
         # landlock = false             # true: the kernel holds the server to its roots\n\
         # deny = [\"*.sqlite3\"]         # added to the built-in list, for every root\n",
    );
    for r in roots {
        let role = match r.role {
            Role::Reference => "read",
            Role::Sourcecode => "read, write (never delete)",
            Role::Workspace => "read, write, delete (kept in .mcp-trash)",
        };
        text.push_str(&format!(
            "\n[[roots]]\n\
             name = {}\n\
             path = {}\n\
             role = {:<23} # {role}\n\
             # deny = [\"*.tmp\"]             # this root's own deny patterns\n\
             # permissions = [\"read\"]       # narrow below the role, never widen\n\
             # max_read_bytes = 1048576\n\
             # max_document_bytes = 67108864 # read_document takes a document whole\n\
             # min_free_bytes = 268435456   # this root's reserve, over the global one\n\
             # trash_max_bytes = 1073741824 # this root's trash budget, over the global one\n",
            quoted(&r.name),
            quoted(&r.path.to_string_lossy()),
            quoted(r.role.as_str()),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_names_are_quoted_as_toml_strings() {
        // What it writes reads back as what it quoted: Windows paths'
        // backslashes, quotes of either kind, a newline.
        for text in [r"C:\Users\me\My Docs", r#"C:\x\"y"#, "it's", "a'b\"c\nd"] {
            let line = format!("k = {}", quoted(text));
            let v: toml::Value = toml::from_str(&line).unwrap();
            assert_eq!(v["k"].as_str(), Some(text), "{line}");
        }
    }
}
