//! What loom-fs keeps on disk beside the user's files, and in memory across
//! calls: the trash and its index, the per-call staging directories, the path
//! locks, the audit log and the byte quota. These are the operator's records
//! and the call path's safety nets; they never run a tool or speak MCP.

pub mod audit;
pub mod locks;
pub mod publish;
pub mod quota;
pub mod staging;
pub mod trash;

use std::time::Duration;

/// The trash directory of every root.
pub const TRASH_DIR: &str = ".mcp-trash";

/// Something a call moved or linked into a root's trash: where the previous
/// content of a path went (the trash tests' entries; a published call's are
/// [`publish::KeptEntry`]).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub root: String,
    /// Root-relative path it was taken from.
    pub from: String,
    /// Root-relative path in the trash (`.mcp-trash/<stamp>/…`).
    pub to: String,
}

/// A trash entry name for a call: UTC time to the microsecond
/// (`20261129T203000.123456Z`), strictly increasing within the process so
/// two calls never share an entry.
pub fn trash_stamp() -> String {
    use std::sync::Mutex;
    use std::time::{SystemTime, UNIX_EPOCH};
    static LAST: Mutex<u128> = Mutex::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let micros = now.max(*last + 1);
    *last = micros;
    let time = UNIX_EPOCH + Duration::from_micros(micros as u64);
    humantime::format_rfc3339_micros(time)
        .to_string()
        .replace(['-', ':'], "")
}
