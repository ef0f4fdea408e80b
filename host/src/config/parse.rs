//! The config as written: the TOML tables, each refusing unknown keys, and
//! reading them from a file or from text. Nothing here judges a value;
//! `validate.rs` does.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;
use crate::policy::Role;

/// The whole file, as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) audit_log: Option<String>,
    pub(super) audit_log_max_bytes: Option<u64>,
    pub(super) audit_log_backups: Option<u64>,
    pub(super) max_search_results: Option<u64>,
    pub(super) max_search_bytes: Option<u64>,
    pub(super) max_list_entries: Option<u64>,
    pub(super) tool_timeout_ms: Option<u64>,
    pub(super) tool_memory_bytes: Option<u64>,
    pub(super) max_concurrent_calls: Option<u64>,
    pub(super) max_output_bytes: Option<u64>,
    pub(super) max_subscriptions: Option<u64>,
    pub(super) max_notifications_per_second: Option<u64>,
    pub(super) quota_bytes_per_minute: Option<u64>,
    pub(super) quota_burst_bytes: Option<u64>,
    pub(super) min_free_bytes: Option<u64>,
    pub(super) trash_max_bytes: Option<u64>,
    pub(super) client_roots: Option<String>,
    #[serde(default)]
    pub(super) read_only: bool,
    #[serde(default)]
    pub(super) landlock: bool,
    #[serde(default)]
    pub(super) deny: Vec<String>,
    #[serde(default)]
    pub(super) roots: Vec<RawRoot>,
    #[serde(default)]
    pub(super) components: Vec<RawComponent>,
    pub(super) trust: Option<RawTrust>,
}

/// A `[[components]]` table, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawComponent {
    pub(super) path: String,
    pub(super) sha256: Option<String>,
    #[serde(default)]
    pub(super) unpinned: bool,
    #[serde(default)]
    pub(super) signed: bool,
    pub(super) roots: Option<Vec<String>>,
    pub(super) permissions: Option<Vec<String>>,
    pub(super) memory_bytes: Option<u64>,
    pub(super) timeout_ms: Option<u64>,
    pub(super) max_output_bytes: Option<u64>,
}

/// The `[trust]` table, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrust {
    #[serde(default)]
    pub(super) keys: Vec<String>,
}

/// A `[[roots]]` table, as written (or made of a directory argument).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoot {
    pub(super) name: String,
    pub(super) path: String,
    pub(super) role: String,
    pub(super) permissions: Option<Vec<String>>,
    #[serde(default)]
    pub(super) deny: Vec<String>,
    pub(super) max_read_bytes: Option<u64>,
    pub(super) max_document_bytes: Option<u64>,
    pub(super) min_free_bytes: Option<u64>,
    pub(super) trash_max_bytes: Option<u64>,
    /// Whether the history tools serve the root: by default yes when it is
    /// a repository's top, no when it lies below one.
    pub(super) git_history: Option<bool>,
}

impl RawRoot {
    /// The table a directory given on the command line stands for: its
    /// name, path and role, every other key left to its default.
    pub(super) fn of_directory(name: String, path: String, role: Role) -> RawRoot {
        RawRoot {
            name,
            path,
            role: role.as_str().to_string(),
            permissions: None,
            deny: Vec::new(),
            max_read_bytes: None,
            max_document_bytes: None,
            min_free_bytes: None,
            trash_max_bytes: None,
            git_history: None,
        }
    }
}

/// Reads the config file at `path`, and the directory its relative paths
/// resolve against (the file's own; `.` for a bare file name).
pub(super) fn read(path: &Path) -> Result<(RawConfig, PathBuf), ConfigError> {
    let text = fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let raw = parse_text(&text, path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let base = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    Ok((raw, base.to_path_buf()))
}

/// Parses config text; `path` names it in the error.
pub(super) fn parse_text(text: &str, path: &Path) -> Result<RawConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
