//! Straight `wasi:filesystem` calls where std falls short on WASI. The exact
//! type of a special file and the hard link count: std goes through
//! wasi-libc, whose `st_mode` has no FIFO or socket. Directory reads: a
//! wasi-libc `readdir` asks the host for every entry's inode (one more call
//! per entry, which no walk here needs).

use std::path::Path;

use wasip2::filesystem::preopens;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorStat, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

use crate::Kind;

/// Most failed entries in a row before a directory read is given up (by
/// the walk and by the ignore-file lookup alike).
pub(crate) const MAX_FAILED_ENTRIES: u64 = 64;

thread_local! {
    /// The preopened directories, asked for once: each ask makes the host
    /// hand out (and check) new descriptors.
    static PREOPENS: Vec<(Descriptor, String)> = preopens::get_directories();
}

/// Calls `f` with the preopen holding `path` (an absolute guest path) and
/// the path relative to it: the preopen whose directory is the longest
/// prefix. `None` when no preopen holds it.
fn under_preopen<T>(path: &Path, f: impl FnOnce(&Descriptor, &str) -> T) -> Option<T> {
    let path = path.to_str()?;
    PREOPENS.with(|dirs| {
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
        Some(f(dir, rest))
    })
}

fn path_flags(follow: bool) -> PathFlags {
    if follow {
        PathFlags::SYMLINK_FOLLOW
    } else {
        PathFlags::empty()
    }
}

/// `stat-at` of `path` (an absolute guest path under a preopen), following a
/// final symlink when `follow`; `None` if it fails.
pub fn stat(path: &Path, follow: bool) -> Option<DescriptorStat> {
    under_preopen(path, |dir, rest| dir.stat_at(path_flags(follow), rest).ok())?
}

/// Opens the directory `path` (an absolute guest path under a preopen) for
/// reading its entries, following symlinks on the way when `follow`.
pub fn open_dir(path: &Path, follow: bool) -> Result<Descriptor, ErrorCode> {
    under_preopen(path, |dir, rest| {
        dir.open_at(
            path_flags(follow),
            rest,
            OpenFlags::DIRECTORY,
            DescriptorFlags::READ,
        )
    })
    .unwrap_or(Err(ErrorCode::NoEntry))
}

/// Opens the file `path` (an absolute guest path under a preopen) for
/// reading, following a final symlink only when `follow`.
pub fn open_file(path: &Path, follow: bool) -> Result<Descriptor, ErrorCode> {
    under_preopen(path, |dir, rest| {
        dir.open_at(
            path_flags(follow),
            rest,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
    })
    .unwrap_or(Err(ErrorCode::NoEntry))
}

/// The kind of `path` as `wasi:filesystem` reports it.
pub fn kind(path: &Path, follow: bool) -> Kind {
    Kind::from_wasi(stat(path, follow).map(|s| s.type_))
}

impl Kind {
    /// The kind a `wasi:filesystem` type names (`None`: unknown).
    pub fn from_wasi(type_: Option<DescriptorType>) -> Kind {
        match type_ {
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
}

/// Hard link count of `path` (symlinks followed).
pub fn link_count(path: &Path) -> Option<u64> {
    stat(path, true).map(|s| s.link_count)
}
