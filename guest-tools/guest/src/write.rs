//! Changing files without losing anything.
//!
//! A file is replaced atomically: the new content goes to a temporary file,
//! is flushed to disk, then renamed over the target; a crash or a full disk
//! leaves the old file whole. The temporary file is written in the call's
//! staging directory (`mount.staging`), out of every listing, so no partial
//! file is ever seen under the root; the host makes it on the filesystem
//! of the target (a mount point inside the root has a staging area of its
//! own). Without one (a standalone run), or where it is on another
//! filesystem than the target after all, it is written beside the target.
//! Before the rename, the old file is kept in the root's trash
//! (`<trash>/<stamp>/<path>`) by a hard link — no copy, and the link is the
//! old inode, untouched by the rename — or, where the trash is on another
//! filesystem, by a copy. Deletion is a move into the same place (a copy,
//! then a removal, for a file on another filesystem).
//!
//! Under the host, a rename from the staging directory over a file is an
//! exchange: what it replaces is exactly the version kept, and over a file
//! the call read it fails with `busy` when that file changed since it was
//! read ([`Published::Changed`]): the caller reads it again.

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

/// How a publish ended.
pub enum Published {
    Done(Replaced),
    /// The file changed since the call read it: nothing was written.
    Changed,
}

/// Where the previous content of `at` goes: its guest path in the trash
/// (its parent directories made), and its exact root-relative path (for
/// results; text shows it by the rule). A call that keeps the same path
/// again (a publish tried again after the file changed) keeps it under
/// `<path>.~N~`, N its attempt.
fn trash_slot(at: &Located, attempt: u32) -> Result<(PathBuf, String), ToolError> {
    let trash = at.mount.trash.as_ref().ok_or_else(|| {
        ToolError::Refused(format!(
            "root '{}' has no trash for this call, so nothing here can be replaced or deleted",
            at.mount.name
        ))
    })?;
    let mut rel = format!("{}/{}", trash.stamp, at.rel);
    if attempt > 1 {
        rel.push_str(&format!(".~{attempt}~"));
    }
    let slot = Path::new(&trash.dir).join(&rel);
    trash_dirs(Path::new(&trash.dir), &slot).map_err(|e| io_error(&at.rel, &e))?;
    Ok((slot, format!(".mcp-trash/{rel}")))
}

/// Makes the directories above `slot` from the trash down, one name at a
/// time, a name already there taken as made. The trash tells nothing back,
/// not even whether a directory is there, so `create_dir_all` (which looks
/// when a name exists) cannot be used.
fn trash_dirs(trash: &Path, slot: &Path) -> io::Result<()> {
    let below = slot
        .parent()
        .and_then(|p| p.strip_prefix(trash).ok())
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut dir = trash.to_path_buf();
    let made = |dir: &Path| match fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    };
    made(&dir)?;
    for name in below.components() {
        dir.push(name);
        made(&dir)?;
    }
    Ok(())
}

/// Creates the missing parent directories of `path` (`rel` in messages).
pub fn create_parents(path: &Path, rel: &str) -> Result<(), ToolError> {
    match path.parent() {
        Some(parent) => fs::create_dir_all(parent).map_err(|e| io_error(rel, &e)),
        None => Ok(()),
    }
}

/// Keeps the file (or symlink) at `at` in the trash with a hard link,
/// copying only where that is impossible (a filesystem without hard links,
/// or another filesystem than the trash's: one mounted inside the root).
/// `at` stays as it is. `attempt` numbers the calls's tries at one publish
/// (see [`trash_slot`]).
pub fn keep_by_link(at: &Located, attempt: u32) -> Result<String, ToolError> {
    let (slot, kept) = trash_slot(at, attempt)?;
    if fs::hard_link(&at.full, &slot).is_ok() {
        return Ok(kept);
    }
    copy_to_slot(at, &slot)?;
    Ok(kept)
}

/// Copies the file at `at` to its trash slot `slot`, synced. Under the host
/// the copy reaches the trash only once synced (it is written elsewhere
/// until then), so a copy cut short, even by a kill, is never taken for
/// the old version.
fn copy_to_slot(at: &Located, slot: &Path) -> Result<(), ToolError> {
    let mut from = File::open(&at.full).map_err(|e| io_error(&at.rel, &e))?;
    // Write-only: the trash gives nothing back, so it refuses a read-write
    // open (which `File::create_new` is).
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(slot)
        .map_err(|e| io_error(&at.rel, &e))?;
    let copied = io::copy(&mut from, &mut to).and_then(|_| to.sync_all());
    if let Err(e) = copied {
        // A copy cut short (a full disk) keeps nothing: the file is still
        // in place, and a partial copy must not pass for the old version.
        let _ = fs::remove_file(slot);
        drop(to);
        return Err(io_error(&at.rel, &e));
    }
    Ok(())
}

/// Takes back what [`keep_by_link`] kept of `at` (`kept`, as it returned
/// it) when the change it was kept for did not happen: `at` is still in
/// place. Under the host a call may remove only what it put in the trash
/// itself, a copy or a link to a file still in place, so nothing kept is
/// lost. Best effort: what cannot be taken back stays kept.
pub fn unkeep(at: &Located, kept: &str) {
    let Some(trash) = at.mount.trash.as_ref() else {
        return;
    };
    if let Some(rel) = kept.strip_prefix(".mcp-trash/") {
        let _ = fs::remove_file(Path::new(&trash.dir).join(rel));
    }
}

/// Moves what is at `at` (file, symlink or directory) into the trash. A
/// file on another filesystem than the trash (one mounted inside the root)
/// is copied there, then removed; a directory or symlink there is refused,
/// nothing changed: a directory goes to the trash whole, which a copy
/// could not do (the entries the deny list hides would stay behind).
pub fn keep_by_move(at: &Located) -> Result<String, ToolError> {
    let (slot, kept) = trash_slot(at, 1)?;
    match fs::rename(&at.full, &slot) {
        Ok(()) => Ok(kept),
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            let meta = fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
            if !meta.is_file() {
                return Err(ToolError::Refused(format!(
                    "'{}' is on another filesystem than the trash of root '{}' (one mounted \
                     inside the root), and a {} is only ever moved to the trash whole, which \
                     cannot cross filesystems; nothing was changed",
                    at.shown(),
                    at.mount.name,
                    if meta.is_dir() {
                        "directory"
                    } else {
                        "symlink"
                    }
                )));
            }
            copy_to_slot(at, &slot)?;
            if let Err(e) = fs::remove_file(&at.full) {
                // Still in place: the copy would be a second version.
                let _ = fs::remove_file(&slot);
                return Err(io_error(&at.rel, &e));
            }
            Ok(kept)
        }
        Err(e) => Err(io_error(&at.rel, &e)),
    }
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

/// Writes the file at `at` with what `write` produces, atomically (see the
/// module). Missing parent directories are created. A file that changed
/// since the call read it is not replaced: see [`replace_checked`].
pub fn replace(
    at: &Located,
    publish: Publish,
    write: impl FnOnce(&mut File) -> io::Result<u64>,
) -> Result<Replaced, ToolError> {
    match replace_checked(at, publish, 1, write)? {
        Published::Done(done) => Ok(done),
        Published::Changed => Err(ToolError::Refused(format!(
            "'{}' changed while it was being written; nothing was written; read it again",
            at.shown()
        ))),
    }
}

/// [`replace`], telling a file that changed since the call last read it
/// ([`Published::Changed`]; nothing written) from other failures. `attempt`
/// counts the caller's tries (1 first).
pub fn replace_checked(
    at: &Located,
    publish: Publish,
    attempt: u32,
    write: impl FnOnce(&mut File) -> io::Result<u64>,
) -> Result<Published, ToolError> {
    let rel = at.rel.as_str();
    create_parents(&at.full, rel)?;
    let staged = temp_path(at);
    let mut temp = Temporary(staged.clone());
    let bytes = (|| {
        let mut file = File::create_new(&temp.0)?;
        let bytes = write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        Ok::<u64, io::Error>(bytes)
    })()
    .map_err(|e| io_error(rel, &e))?;
    let published = match publish {
        Publish::New => publish_new(&mut temp, at).map(|()| (true, None)),
        // Checked now, not before the (possibly long) write: whatever stands
        // there at this moment is kept.
        Publish::Replace => match fs::symlink_metadata(&at.full) {
            Ok(_) => {
                let kept = keep_by_link(at, attempt)?;
                rename_into_place(&mut temp, at)
                    .map(|()| (false, Some(kept.clone())))
                    .inspect_err(|e| {
                        // Not replaced: what was kept for it is taken back
                        // (the file is still in place), but where the file
                        // changed meanwhile (the call tries again).
                        if e.kind() != io::ErrorKind::ResourceBusy {
                            unkeep(at, &kept);
                        }
                    })
            }
            Err(_) => rename_into_place(&mut temp, at).map(|()| (true, None)),
        },
    };
    match published {
        Ok((created, previous)) => {
            sync_parent(&at.full);
            Ok(Published::Done(Replaced {
                bytes,
                created,
                previous,
            }))
        }
        Err(e) if e.kind() == io::ErrorKind::ResourceBusy => Ok(Published::Changed),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && publish == Publish::New => {
            Err(ToolError::Refused(format!(
                "'{}' already exists; nothing was written",
                at.shown()
            )))
        }
        Err(e) => Err(io_error(rel, &e)),
    }
}

/// A temporary file this call made: removed when dropped, unless it was
/// published (this call made it, so it may remove it without delete
/// permission; the host also removes a staging directory when the call
/// ends).
struct Temporary(PathBuf);

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Renames `temp` over `at`. Where the rename would cross filesystems (a
/// staging directory on another one than the target), the file is first
/// copied beside the target.
fn rename_into_place(temp: &mut Temporary, at: &Located) -> io::Result<()> {
    match fs::rename(&temp.0, &at.full) {
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            let near = beside(&temp.0, &at.full)?;
            fs::rename(&near.0, &at.full)
        }
        done => done,
    }
}

/// Publishes `temp` at `at` only if nothing stands there: a hard link fails
/// rather than replace. Where hard links are impossible, a check then a
/// rename (a narrow race, the best the filesystem allows).
fn publish_new(temp: &mut Temporary, at: &Located) -> io::Result<()> {
    match publish_new_file(&temp.0, &at.full) {
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            let near = beside(&temp.0, &at.full)?;
            publish_new_file(&near.0, &at.full)
        }
        done => done,
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

/// A copy of `temp` in a temporary file beside `target`, flushed to disk.
fn beside(temp: &Path, target: &Path) -> io::Result<Temporary> {
    let near = Temporary(temp_beside(target));
    let mut from = File::open(temp)?;
    let mut to = File::create_new(&near.0)?;
    io::copy(&mut from, &mut to)?;
    to.sync_all()?;
    Ok(near)
}

/// Where the new content of `at` is written before it is published: the
/// call's staging directory, or beside the target without one.
pub fn temp_path(at: &Located) -> PathBuf {
    match &at.mount.staging {
        Some(staging) => Path::new(staging).join(temp_name(&at.full)),
        None => temp_beside(&at.full),
    }
}

/// A temporary name beside `path`, unlikely to exist and matching no
/// ordinary deny pattern.
pub fn temp_beside(path: &Path) -> PathBuf {
    path.with_file_name(temp_name(path))
}

fn temp_name(path: &Path) -> String {
    let random = RandomState::new().hash_one(path);
    format!(".loom-fs-write-{random:016x}")
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
