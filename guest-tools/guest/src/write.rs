//! Changing files without losing anything.
//!
//! A file is replaced atomically: the new content goes to a temporary file
//! in the same directory (so never outside the root), is flushed to disk,
//! then renamed over the target; a crash or a full disk leaves the old file
//! whole. Before that, the old file is kept in the root's trash
//! (`<trash>/<stamp>/<path>`) by a hard link — no copy, and the link is the
//! old inode, untouched by the rename. Deletion is a move into the same place.

use std::fs::{self, File};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Located, ToolError, io_error};

/// What replacing a file did.
pub struct Replaced {
    /// Bytes of the new content.
    pub bytes: u64,
    /// Whether the file did not exist before.
    pub created: bool,
    /// Where the previous content went (`.mcp-trash/<stamp>/<path>`), if any.
    pub previous: Option<String>,
}

/// Where the previous content of `at` goes: its guest path in the trash, and
/// the root-relative path shown to the model.
fn trash_slot(at: &Located) -> Result<(PathBuf, String), ToolError> {
    let trash = at.mount.trash.as_ref().ok_or_else(|| {
        ToolError::Refused(format!(
            "root '{}' has no trash for this call, so nothing here can be replaced or deleted",
            at.mount.name
        ))
    })?;
    let rel = format!("{}/{}", trash.stamp, at.shown);
    Ok((
        Path::new(&trash.dir).join(&rel),
        format!(".mcp-trash/{rel}"),
    ))
}

/// Creates the missing parent directories of `path`.
pub fn create_parents(path: &Path, shown: &str) -> Result<(), ToolError> {
    match path.parent() {
        Some(parent) => fs::create_dir_all(parent).map_err(|e| io_error(shown, &e)),
        None => Ok(()),
    }
}

/// Keeps the file (or symlink) at `at` in the trash with a hard link,
/// copying only where the filesystem has no hard links. `at` stays as it is.
pub fn keep_by_link(at: &Located) -> Result<String, ToolError> {
    let (slot, shown) = trash_slot(at)?;
    create_parents(&slot, &at.shown)?;
    if fs::hard_link(&at.full, &slot).is_ok() {
        return Ok(shown);
    }
    let mut from = File::open(&at.full).map_err(|e| io_error(&at.shown, &e))?;
    let mut to = File::create_new(&slot).map_err(|e| io_error(&at.shown, &e))?;
    io::copy(&mut from, &mut to).map_err(|e| io_error(&at.shown, &e))?;
    to.sync_all().map_err(|e| io_error(&at.shown, &e))?;
    Ok(shown)
}

/// Moves what is at `at` (file, symlink or directory) into the trash.
pub fn keep_by_move(at: &Located) -> Result<String, ToolError> {
    let (slot, shown) = trash_slot(at)?;
    create_parents(&slot, &at.shown)?;
    fs::rename(&at.full, &slot).map_err(|e| io_error(&at.shown, &e))?;
    Ok(shown)
}

/// How new content takes its place.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Replace whatever stands there, keeping it in the trash first.
    Replace,
    /// Only where nothing stands: fails, changing nothing, if something
    /// appeared meanwhile (published with `link`, which never replaces).
    New,
}

/// Writes the file at `at` with what `write` produces, atomically: a
/// temporary file beside it, flushed to disk, then published. Missing
/// parent directories are created.
pub fn replace(
    at: &Located,
    publish: Publish,
    write: impl FnOnce(&mut File) -> io::Result<u64>,
) -> Result<Replaced, ToolError> {
    let shown = at.shown.as_str();
    create_parents(&at.full, shown)?;
    let temp = temp_path(&at.full);
    let written = (|| {
        let mut file = File::create_new(&temp)?;
        let bytes = write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        Ok::<u64, io::Error>(bytes)
    })();
    // This call created the temporary file: it may remove it without delete
    // permission.
    let discard = || {
        let _ = fs::remove_file(&temp);
    };
    let bytes = written.map_err(|e| {
        discard();
        io_error(shown, &e)
    })?;
    let published = match publish {
        Publish::New => publish_new(&temp, at).map(|()| (true, None)),
        // Checked now, not before the (possibly long) write: whatever stands
        // there at this moment is kept.
        Publish::Replace => match fs::symlink_metadata(&at.full) {
            Ok(_) => keep_by_link(at).and_then(|kept| {
                fs::rename(&temp, &at.full)
                    .map(|()| (false, Some(kept)))
                    .map_err(|e| io_error(shown, &e))
            }),
            Err(_) => fs::rename(&temp, &at.full)
                .map(|()| (true, None))
                .map_err(|e| io_error(shown, &e)),
        },
    };
    let (created, previous) = published.inspect_err(|_| discard())?;
    sync_parent(&at.full);
    Ok(Replaced {
        bytes,
        created,
        previous,
    })
}

/// Publishes `temp` at `at` only if nothing stands there: a hard link fails
/// rather than replace. Where hard links are impossible, a check then a
/// rename (a narrow race, the best the filesystem allows).
fn publish_new(temp: &Path, at: &Located) -> Result<(), ToolError> {
    let taken = || {
        ToolError::Refused(format!(
            "'{}' already exists; nothing was written",
            at.shown
        ))
    };
    match publish_new_file(temp, &at.full) {
        Ok(()) => {
            let _ = fs::remove_file(temp);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(taken()),
        Err(e) => Err(io_error(&at.shown, &e)),
    }
}

/// Links `temp` at `to` only if nothing stands there (`AlreadyExists`
/// otherwise); `temp` stays. Where hard links are impossible, a check then
/// a rename (a narrow race, the best the filesystem allows).
pub fn publish_new_file(temp: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(temp, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
        Err(_) if fs::symlink_metadata(to).is_ok() => Err(io::ErrorKind::AlreadyExists.into()),
        Err(_) => fs::rename(temp, to),
    }
}

/// A temporary name beside `path`, unlikely to exist and matching no
/// ordinary deny pattern.
pub fn temp_path(path: &Path) -> PathBuf {
    let random = RandomState::new().hash_one(path);
    path.with_file_name(format!(".loom-fs-write-{random:016x}"))
}

/// Flushes a directory entry change (a rename) to disk, where the
/// filesystem allows opening the directory.
fn sync_parent(path: &Path) {
    if let Some(parent) = path.parent()
        && let Ok(dir) = File::open(parent)
    {
        let _ = dir.sync_all();
    }
}
