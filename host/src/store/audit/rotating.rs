//! The audit log's file: appended to, rotated by size, and held by one
//! server at a time (`<path>.lock`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An append-only file rotated by size, held by one server at a time. A
/// line past the process's file size limit (`EFBIG`) rotates it early.
///
/// It is opened `O_APPEND`, so every line goes to the current end: after an
/// operator's `truncate -s 0` (or logrotate's `copytruncate`) the next line
/// starts at offset 0, with no hole and nothing lost after it. The size
/// counter is checked against the file before a rotation, so a truncated
/// file is not rotated early.
pub(super) struct Rotating {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    backups: u32,
    /// The last rotation failed (said once until one succeeds).
    rotation_failing: bool,
    /// `<path>.lock`, locked (`flock`) while this server runs: a second
    /// instance on the same log would interleave and rotate under the first.
    _lock: File,
}

impl Rotating {
    pub(super) fn open(path: &Path, max_bytes: u64, backups: u32) -> io::Result<Rotating> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let lock = lock(path)?;
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            path: path.to_path_buf(),
            file,
            size,
            max_bytes,
            backups,
            rotation_failing: false,
            _lock: lock,
        })
    }

    pub(super) fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            // Someone may have truncated the file since: its real size decides.
            self.size = self.file.metadata()?.len();
        }
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            // A rotation that cannot be done now (no descriptor free, the
            // directory full) moves nothing: the line goes on in the current
            // file, over the size, rather than be lost; the next line tries
            // again.
            match self.rotate() {
                Ok(()) => self.rotation_failing = false,
                Err(e) if !self.rotation_failing => {
                    self.rotation_failing = true;
                    tracing::warn!(
                        "cannot rotate the audit log ({e}): lines go on in the current file until \
                         it can"
                    );
                }
                Err(_) => {}
            }
        }
        match self.append(line) {
            // Past the process's file size limit (`ulimit -f`, below
            // `max_bytes`): the log rotates early rather than fail closed.
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) && self.size > 0 => {
                self.rotate()?;
                self.append(line)
            }
            done => done,
        }
    }

    /// Appends `line` whole, or leaves the file as it was.
    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        if let Err(e) = self.file.write_all(line) {
            // A line cut short (the disk filled in its middle) is cut back
            // off, so the file never holds a torn line; the whole line is
            // written again later. Only what this write added: a file an
            // operator truncated meanwhile is not grown.
            if let Ok(now) = self.file.metadata().map(|m| m.len())
                && now > self.size
                && now < self.size + line.len() as u64
            {
                let _ = self.file.set_len(self.size);
            }
            return Err(e);
        }
        self.size += line.len() as u64;
        Ok(())
    }

    fn backup(&self, n: u32) -> PathBuf {
        self.beside(&n.to_string())
    }

    /// `<path>.<suffix>`.
    fn beside(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{suffix}"));
        PathBuf::from(name)
    }

    /// Moves the live file to `.1` (and each backup one further) and goes on
    /// in a new one. The new file is opened first, as `<path>.next`: if it
    /// cannot be, nothing has moved and the current file stays the live one.
    fn rotate(&mut self) -> io::Result<()> {
        if self.backups == 0 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        let next_path = self.beside("next");
        let next = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&next_path)?;
        // Left by a server killed mid-rotation: empty it.
        next.set_len(0)?;
        for n in (1..self.backups).rev() {
            let from = self.backup(n);
            if from.exists() {
                fs::rename(&from, self.backup(n + 1))?;
            }
        }
        fs::rename(&self.path, self.backup(1))?;
        if let Err(e) = fs::rename(&next_path, &self.path) {
            // The live name must not stay missing: the current file goes back.
            fs::rename(self.backup(1), &self.path)?;
            return Err(e);
        }
        self.file = next;
        self.size = 0;
        Ok(())
    }
}

/// Takes `<path>.lock` for this process, or says who holds it.
pub(super) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

fn lock(path: &Path) -> io::Result<File> {
    let lock_path = lock_path(path);
    // Never through a symlink: a planted `audit.log.lock -> elsewhere` must
    // not get that file emptied.
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&lock_path)?;
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        let holder = fs::read_to_string(&lock_path).unwrap_or_default();
        let holder = match holder.trim() {
            "" => String::new(),
            pid => format!(" (pid {pid})"),
        };
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "the audit log {} is in use by another loom-fs-mcp{holder}: give each instance \
                 its own audit_log file",
                path.display()
            ),
        ));
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}
