//! Writing files atomically.
//!
//! New content goes to a temporary file beside its target, is flushed to
//! disk, then renamed over the target: a crash or a full disk leaves the
//! old file whole. Under loom-fs the host also stages the whole call and
//! publishes it when the call succeeds, keeping every version it replaces
//! in the root's trash, so a tool keeps nothing itself and never sees a
//! temporary file (the call's changes are out of every listing until they
//! are published). Under a standalone wasmtime there is no host: the
//! rename still makes each write atomic, the temporary file shows beside
//! its target while it is written, and nothing is kept.

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
}

/// Creates the missing parent directories of `path` (`rel` in messages).
pub fn create_parents(path: &Path, rel: &str) -> Result<(), ToolError> {
    match path.parent() {
        Some(parent) => fs::create_dir_all(parent).map_err(|e| io_error(rel, &e)),
        None => Ok(()),
    }
}

/// How new content takes its place.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Replace whatever stands there (the host keeps it).
    Replace,
    /// Only where nothing stands: fails, changing nothing, if something is
    /// there (published with `link`, which never replaces).
    New,
}

/// Writes the file at `at` with what `write` produces, atomically (see the
/// module). Missing parent directories are created.
pub fn replace(
    at: &Located,
    publish: Publish,
    write: impl FnOnce(&mut File) -> io::Result<u64>,
) -> Result<Replaced, ToolError> {
    let rel = at.rel.as_str();
    create_parents(&at.full, rel)?;
    let temp = Temporary(temp_beside(&at.full));
    let bytes = (|| {
        let mut file = File::create_new(&temp.0)?;
        let bytes = write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        Ok::<u64, io::Error>(bytes)
    })()
    .map_err(|e| io_error(rel, &e))?;
    let created = fs::symlink_metadata(&at.full).is_err();
    let published = match publish {
        Publish::New => publish_new_file(&temp.0, &at.full),
        Publish::Replace => fs::rename(&temp.0, &at.full),
    };
    match published {
        Ok(()) => {
            sync_parent(&at.full);
            Ok(Replaced { bytes, created })
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && publish == Publish::New => {
            Err(ToolError::Refused(format!(
                "'{}' already exists; nothing was written",
                at.shown()
            )))
        }
        Err(e) => Err(io_error(rel, &e)),
    }
}

/// A temporary file this call made: removed when dropped (gone already
/// once renamed into place).
pub struct Temporary(pub PathBuf);

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Links `temp` at `to` only if nothing stands there (`AlreadyExists`
/// otherwise); `temp` stays. Where hard links are impossible, a check then
/// a rename (a narrow race, the best the filesystem allows).
pub fn publish_new_file(temp: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(temp, to) {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::CrossesDevices
            ) =>
        {
            Err(e)
        }
        Err(_) if fs::symlink_metadata(to).is_ok() => Err(io::ErrorKind::AlreadyExists.into()),
        Err(_) => fs::rename(temp, to),
    }
}

/// A temporary name beside `path`, unlikely to exist and matching no
/// ordinary deny pattern.
pub fn temp_beside(path: &Path) -> PathBuf {
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
