//! Resolution beneath a directory handle on Windows: the portable walk
//! ([`crate::sys::by_hand`], the steps Linux's tests hold to
//! `openat2(RESOLVE_BENEATH)`) on handles.
//!
//! Each name is opened with [`nt::open_at`] relative to the handle of the
//! directory before it, reparse points opened, not followed. A junction or
//! an absolute symlink is an escape (`ERROR_NOT_SAME_DEVICE`, as an
//! absolute symlink is `EXDEV` under `RESOLVE_BENEATH`), and so is `..`
//! above the start; more than 40 links is a loop
//! (`ERROR_CANT_RESOLVE_FILENAME`). Names the Windows naming rules refuse
//! (`CON`, `a:b`, `PROGRA~1`) are refused before this by `policy::windows`;
//! a stream colon is refused here again ([`nt::open_at`]).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsHandle, BorrowedHandle, OwnedHandle};

use windows_sys::Wdk::Storage::FileSystem::{FILE_DIRECTORY_FILE, FILE_OPEN};
use windows_sys::Win32::Foundation::{
    ERROR_CANT_RESOLVE_FILENAME, ERROR_DIRECTORY, ERROR_NOT_SAME_DEVICE, ERROR_PATH_NOT_FOUND,
    ERROR_RETRY,
};
use windows_sys::Win32::Storage::FileSystem::FILE_READ_ATTRIBUTES;

use super::nt::{self, Open, Target};
use crate::sys::by_hand::{self, Kind, Stop};

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
/// starts with a separator is absolute: an escape. A last name that is not
/// there is made if `how`'s disposition makes it. The last name, when it
/// existed at its check, must be the same file when opened with `how`;
/// otherwise the answer is `ERROR_RETRY` (callers try again, as they do
/// for `EAGAIN` on Linux).
pub fn beneath(
    dir: BorrowedHandle<'_>,
    path: &[u16],
    how: Open,
    follow_last: bool,
) -> io::Result<OwnedHandle> {
    let trailing = path
        .last()
        .is_some_and(|&u| <Handles as by_hand::Steps>::is_separator(u));
    let steps = Handles {
        start: dir,
        how,
        follow_last,
        trailing,
    };
    by_hand::walk(&steps, path, follow_last, false)
}

/// A path as UTF-16 for [`beneath`].
pub fn wide(path: &OsStr) -> Vec<u16> {
    path.encode_wide().collect()
}

/// The walk's steps on handles, from `start`, the last name opened `how`.
struct Handles<'a> {
    start: BorrowedHandle<'a>,
    how: Open,
    follow_last: bool,
    /// The path ends with a separator: what is made at its end must be a
    /// directory.
    trailing: bool,
}

impl Handles<'_> {
    fn at<'b>(&'b self, dir: Option<&'b OwnedHandle>) -> BorrowedHandle<'b> {
        dir.map_or(self.start, |h| h.as_handle())
    }
}

impl by_hand::Steps for Handles<'_> {
    type Handle = OwnedHandle;
    type Unit = u16;
    type Error = io::Error;

    fn is_separator(unit: u16) -> bool {
        unit == u16::from(b'\\') || unit == u16::from(b'/')
    }

    fn error(stop: Stop) -> io::Error {
        error(match stop {
            Stop::Empty | Stop::Missing => ERROR_PATH_NOT_FOUND,
            Stop::Escape => ERROR_NOT_SAME_DEVICE,
            Stop::Loop => ERROR_CANT_RESOLVE_FILENAME,
            Stop::NotADirectory => ERROR_DIRECTORY,
        })
    }

    fn probe(&self, dir: Option<&OwnedHandle>, name: &[u16]) -> io::Result<Option<OwnedHandle>> {
        match nt::open_at(self.at(dir), &OsString::from_wide(name), PROBE) {
            Ok(h) => Ok(Some(h)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn kind(&self, handle: &OwnedHandle) -> io::Result<Kind> {
        nt::kind(handle.as_handle())
    }

    fn target(&self, handle: &OwnedHandle) -> io::Result<Vec<u16>> {
        match nt::link_target(handle.as_handle())? {
            Target::Relative(names) => Ok(names),
            Target::Absolute => Err(error(ERROR_NOT_SAME_DEVICE)),
        }
    }

    fn here(&self, dir: Option<&OwnedHandle>) -> io::Result<OwnedHandle> {
        nt::reopen(self.at(dir), self.how)
    }

    fn last(
        &self,
        dir: Option<&OwnedHandle>,
        name: &[u16],
        checked: Option<OwnedHandle>,
    ) -> io::Result<OwnedHandle> {
        let name = OsString::from_wide(name);
        let Some(found) = checked else {
            // Made by `how`, or missing; a link made there since the check
            // is not followed.
            if self.trailing && self.how.options & FILE_DIRECTORY_FILE == 0 {
                return Err(error(ERROR_DIRECTORY));
            }
            let made = nt::open_at(self.at(dir), &name, self.how)?;
            return match nt::kind(made.as_handle())? {
                Kind::Link if self.follow_last || self.trailing => Err(error(ERROR_RETRY)),
                _ => Ok(made),
            };
        };
        if self.how == PROBE {
            return Ok(found);
        }
        // Opened again with the caller's access: it must be what was checked.
        let opened = nt::open_at(self.at(dir), &name, self.how)?;
        if nt::identity(opened.as_handle())? == nt::identity(found.as_handle())? {
            Ok(opened)
        } else {
            Err(error(ERROR_RETRY))
        }
    }
}
