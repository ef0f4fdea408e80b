//! Resolution beneath a directory handle, one name at a time: the Windows
//! twin of [`crate::sys::walk`] (which answers as Linux's
//! `openat2(RESOLVE_BENEATH)` does).
//!
//! Every name is opened relative to the handle of the directory before it
//! (`NtCreateFile` with `RootDirectory`), with `FILE_OPEN_REPARSE_POINT`,
//! and kept: a directory renamed or swapped for a junction after it was
//! checked leads nowhere else. A symlink's target is read from the handle
//! of the link that was checked and walked the same way: a junction or an
//! absolute symlink is an escape (`ERROR_NOT_SAME_DEVICE`, as an absolute
//! symlink is `EXDEV` under `RESOLVE_BENEATH`), and so is `..` above the
//! starting directory; more than [`MAX_LINKS`] links is a loop
//! (`ERROR_CANT_RESOLVE_FILENAME`). `..` pops back to the handle of the
//! directory it entered from, never asks the system for a parent. Names
//! the Windows naming rules refuse (`CON`, `a:b`, `PROGRA~1`) are refused
//! before this by `policy::windows`; a stream colon is refused here again
//! ([`super::nt::open_at`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsHandle, BorrowedHandle, OwnedHandle};

use windows_sys::Wdk::Storage::FileSystem::FILE_OPEN;
use windows_sys::Win32::Foundation::{
    ERROR_CANT_RESOLVE_FILENAME, ERROR_DIRECTORY, ERROR_NOT_SAME_DEVICE, ERROR_PATH_NOT_FOUND,
    ERROR_RETRY,
};
use windows_sys::Win32::Storage::FileSystem::FILE_READ_ATTRIBUTES;

use super::nt::{self, Kind, Open, Target};
use crate::sys::MAX_LINKS;

/// How each name on the way is opened to be checked: its attributes only.
const PROBE: Open = Open {
    access: FILE_READ_ATTRIBUTES,
    disposition: FILE_OPEN,
    options: 0,
};

fn error(code: u32) -> io::Error {
    io::Error::from_raw_os_error(code as i32)
}

/// Opens `path` (names separated by `\` or `/`) beneath `dir` with `how`,
/// following a link at the last name only if `follow_last`. A path that
/// starts with a separator is absolute: an escape. The last name, when it
/// existed at its check, must be the same file when opened with `how`;
/// otherwise the answer is `ERROR_RETRY` (callers try again, as they do
/// for `EAGAIN` on Linux).
pub fn beneath(
    dir: BorrowedHandle<'_>,
    path: &[u16],
    how: Open,
    follow_last: bool,
) -> io::Result<OwnedHandle> {
    if path.is_empty() {
        return Err(error(ERROR_PATH_NOT_FOUND));
    }
    if is_separator(path[0]) {
        return Err(error(ERROR_NOT_SAME_DEVICE));
    }
    let mut pending = names(path);
    // A trailing separator: the last name must be a directory, and a link
    // there is followed.
    let mut trailing = path.last().is_some_and(|&c| is_separator(c));
    // The directories entered, the current one on top; empty: `dir`.
    let mut entered: Vec<OwnedHandle> = Vec::new();
    let mut links = 0;
    loop {
        let cur = entered.last().map_or(dir, |h| h.as_handle());
        let Some(name) = pending.pop_front() else {
            // The path named a directory reached (`.`, `a\..`).
            return nt::reopen(cur, how);
        };
        match name.as_slice() {
            [0x2e] => continue,
            [0x2e, 0x2e] => {
                entered.pop().ok_or_else(|| error(ERROR_NOT_SAME_DEVICE))?;
                continue;
            }
            _ => {}
        }
        let last = pending.is_empty();
        let os = OsString::from_wide(&name);
        let found = match nt::open_at(cur, &os, PROBE) {
            Ok(found) => found,
            // The last name may be made by `how`.
            Err(e) if last && e.kind() == io::ErrorKind::NotFound => {
                let made = nt::open_at(cur, &os, how)?;
                // A link made there since the check is not followed.
                return match nt::kind(made.as_handle())? {
                    Kind::Link if follow_last || trailing => Err(error(ERROR_RETRY)),
                    _ => Ok(made),
                };
            }
            Err(e) => return Err(e),
        };
        let kind = nt::kind(found.as_handle())?;
        if kind == Kind::Link && (!last || follow_last || trailing) {
            links += 1;
            if links > MAX_LINKS {
                return Err(error(ERROR_CANT_RESOLVE_FILENAME));
            }
            let Target::Relative(target) = nt::link_target(found.as_handle())? else {
                return Err(error(ERROR_NOT_SAME_DEVICE));
            };
            if target.first().is_some_and(|&c| is_separator(c)) {
                return Err(error(ERROR_NOT_SAME_DEVICE));
            }
            if last {
                trailing |= target.last().is_some_and(|&c| is_separator(c));
            }
            for n in names(&target).into_iter().rev() {
                pending.push_front(n);
            }
            continue;
        }
        if !last {
            if kind != Kind::Directory {
                return Err(error(ERROR_DIRECTORY));
            }
            entered.push(found);
            continue;
        }
        if trailing && kind != Kind::Directory {
            return Err(error(ERROR_DIRECTORY));
        }
        if how == PROBE {
            return Ok(found);
        }
        // Opened again with the caller's access: it must be what was checked.
        let opened = nt::open_at(cur, &os, how)?;
        return if nt::identity(opened.as_handle())? == nt::identity(found.as_handle())? {
            Ok(opened)
        } else {
            Err(error(ERROR_RETRY))
        };
    }
}

/// A path as UTF-16 for [`beneath`].
pub fn wide(path: &std::ffi::OsStr) -> Vec<u16> {
    path.encode_wide().collect()
}

fn is_separator(c: u16) -> bool {
    c == u16::from(b'\\') || c == u16::from(b'/')
}

/// The names of a path, in order; empty ones (`a\\b`) left out.
fn names(path: &[u16]) -> VecDeque<Vec<u16>> {
    path.split(|&c| is_separator(c))
        .filter(|n| !n.is_empty())
        .map(<[u16]>::to_vec)
        .collect()
}
