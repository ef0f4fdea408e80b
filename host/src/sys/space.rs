//! Free space on a root's disk against its reserve (`min_free_bytes`): a
//! change that would leave less is refused, before the call runs when its
//! size can be told from its arguments, and write by write while it runs
//! (a directory copy, an edit that grows a file). Metadata only (`statvfs`):
//! nothing here reads or writes a file. Also the file size limit: a write
//! past it fails (`EFBIG`) rather than end the server.

use std::path::Path;

use crate::policy::{Root, Rule};

/// A change that does not fit above a root's reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Short {
    /// The root's `min_free_bytes`.
    pub reserve: u64,
    /// Bytes free on its disk (for an unprivileged user) when it was asked.
    pub free: u64,
    /// Bytes the change would write.
    pub needed: u64,
}

/// Bytes free on the disk holding `path`, for a process without the
/// privilege to use the blocks reserved for root: what a user's programs
/// have left.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let st = rustix::fs::statvfs(path)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether writing `needed` more bytes in `root` keeps its reserve free.
/// A disk whose free space cannot be read is let through: the write itself
/// will say what is wrong.
pub fn check(root: &Root, needed: u64) -> Result<(), Short> {
    if root.min_free_bytes == 0 {
        return Ok(());
    }
    match free_bytes(&root.path) {
        Ok(free) if free < root.min_free_bytes.saturating_add(needed) => Err(Short {
            reserve: root.min_free_bytes,
            free,
            needed,
        }),
        _ => Ok(()),
    }
}

impl Short {
    /// The refusal, naming the reserve and the way out.
    pub fn text(&self, root: &str) -> String {
        format!(
            "refused by rule '{}': root '{root}' keeps min_free_bytes = {} ({}) free on its \
             disk, which has {} free, and this change would write {}",
            Rule::Reserve,
            self.reserve,
            human(self.reserve),
            human(self.free),
            if self.needed == 0 {
                "more".to_string()
            } else {
                format!("{} more", human(self.needed))
            },
        )
    }

    /// What the operator can do.
    pub const WAY_OUT: &'static str = "free space on that disk (`loom-fs-mcp trash purge \
         --older-than 30d` empties the trash of old versions) or lower min_free_bytes";
}

/// Has a write past the process's file size limit (`RLIMIT_FSIZE`, set by
/// `ulimit -f` or a service manager and inherited) fail with `EFBIG`, which
/// the server names to the model, the file unchanged. By default the kernel
/// sends `SIGXFSZ` instead, whose default action ends the whole server
/// mid-call, before any error is seen. Process-wide; call once at start.
pub fn ignore_file_size_signal() {
    // SAFETY: `SIG_IGN` runs no code in the process; setting a disposition
    // is async-signal-safe and has no other effect.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Bytes as a person reads them: `512 B`, `1.5 KiB`, `256 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() < 0.05 || value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_a_person_reads_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(256 << 20), "256 MiB");
        assert_eq!(human(1 << 40), "1 TiB");
    }

    #[test]
    fn a_root_without_a_reserve_is_never_short_and_one_above_any_disk_always() {
        let tmp = tempfile::TempDir::new().unwrap();
        let mut root = Root::workspace_for_tests("ws", tmp.path());
        assert_eq!(check(&root, u64::MAX), Ok(()));
        root.min_free_bytes = 1 << 50;
        let short = check(&root, 10).unwrap_err();
        assert_eq!((short.reserve, short.needed), (1 << 50, 10));
        let text = short.text("ws");
        assert!(
            text.contains("min_free_bytes = 1125899906842624 (1 PiB)"),
            "{text}"
        );
        assert!(text.contains("10 B more"), "{text}");
    }
}
