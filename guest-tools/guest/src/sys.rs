//! File facts std cannot give on WASI: the exact type of a special file and
//! the hard link count. std goes through wasi-libc, whose `st_mode` has no
//! FIFO or socket; `wasi:filesystem` itself has both, so ask it directly.

use std::path::Path;

use wasip2::filesystem::preopens;
use wasip2::filesystem::types::{DescriptorStat, DescriptorType, PathFlags};

use crate::Kind;

/// `stat-at` of `path` (an absolute guest path under a preopen), following a
/// final symlink when `follow`; `None` if it fails.
pub fn stat(path: &Path, follow: bool) -> Option<DescriptorStat> {
    let path = path.to_str()?;
    let dirs = preopens::get_directories();
    // The preopen whose directory is the longest prefix of `path`.
    let (dir, rest) = dirs
        .iter()
        .filter_map(|(dir, name)| {
            let rest = path.strip_prefix(name.as_str())?;
            match rest {
                "" => Some((dir, ".")),
                _ => rest.strip_prefix('/').map(|r| (dir, r)),
            }
        })
        .min_by_key(|(_, rest)| rest.len())?;
    let flags = if follow {
        PathFlags::SYMLINK_FOLLOW
    } else {
        PathFlags::empty()
    };
    dir.stat_at(flags, rest).ok()
}

/// The kind of `path` as `wasi:filesystem` reports it.
pub fn kind(path: &Path, follow: bool) -> Kind {
    match stat(path, follow).map(|s| s.type_) {
        Some(DescriptorType::RegularFile) => Kind::File,
        Some(DescriptorType::Directory) => Kind::Directory,
        Some(DescriptorType::SymbolicLink) => Kind::Symlink,
        Some(DescriptorType::Fifo) => Kind::Fifo,
        Some(DescriptorType::Socket) => Kind::Socket,
        Some(DescriptorType::CharacterDevice) => Kind::CharDevice,
        Some(DescriptorType::BlockDevice) => Kind::BlockDevice,
        Some(DescriptorType::Unknown) | None => Kind::Unknown,
    }
}

/// Hard link count of `path` (symlinks followed).
pub fn link_count(path: &Path) -> Option<u64> {
    stat(path, true).map(|s| s.link_count)
}
