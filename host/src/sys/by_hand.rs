//! Resolution beneath a directory by hand, one name at a time: the one
//! algorithm of the portable walks, for any system that can open a single
//! name relative to a directory handle without following it. Linux's
//! ([`super::walk`], on descriptors) is held by its tests to answer as
//! `openat2(RESOLVE_BENEATH)` does; Windows' (`super::windows::beneath`,
//! on handles) runs the same steps.
//!
//! Every name is opened relative to the handle of the directory before it,
//! never followed, and kept: a directory renamed or swapped for a link
//! after it was checked leads nowhere else. A link is read from the handle
//! of the link that was checked and its target walked the same way: an
//! absolute target, or `..` above the starting directory, is an escape;
//! more than [`MAX_LINKS`] links is a loop. `..` pops back to the handle of
//! the directory it entered from, never asks the system for a parent.

use std::collections::VecDeque;

pub use super::MAX_LINKS;

/// What a name opened to be checked is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Directory,
    /// A symlink (or a junction): a path to walk, never followed by the
    /// system.
    Link,
    /// Anything else.
    Other,
}

/// Why a walk stops, in the system's own error type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// An empty path.
    Empty,
    /// A name before the last is not there.
    Missing,
    /// Out of the starting directory: an absolute path or link target, or
    /// `..` above the start.
    Escape,
    /// More than [`MAX_LINKS`] links, or a link where none may be followed.
    Loop,
    /// A name before the last, or the last before a trailing separator,
    /// is not a directory.
    NotADirectory,
}

/// The calls a walk is made of, on one system; `None` for a directory is
/// the starting one.
pub trait Steps {
    /// An open handle (descriptor) of what a name named.
    type Handle;
    /// A path's unit: a byte on Unix, a UTF-16 unit on Windows.
    type Unit: Copy + Eq + From<u8>;
    type Error;

    fn is_separator(unit: Self::Unit) -> bool;
    fn error(stop: Stop) -> Self::Error;
    /// `name` in `dir`, opened to be checked, never followed; `None` when
    /// nothing is there.
    fn probe(
        &self,
        dir: Option<&Self::Handle>,
        name: &[Self::Unit],
    ) -> Result<Option<Self::Handle>, Self::Error>;
    fn kind(&self, handle: &Self::Handle) -> Result<Kind, Self::Error>;
    /// The target of the link `handle`; an escape for a link that is
    /// absolute by its kind (a junction).
    fn target(&self, handle: &Self::Handle) -> Result<Vec<Self::Unit>, Self::Error>;
    /// `dir` itself, opened as the caller asked (the path named a
    /// directory reached, as `.` and `a/..` do).
    fn here(&self, dir: Option<&Self::Handle>) -> Result<Self::Handle, Self::Error>;
    /// The last name, opened as the caller asked. `checked` is what the
    /// walk found there, `None` when nothing was: a system may make the
    /// name then, or answer that it is missing.
    fn last(
        &self,
        dir: Option<&Self::Handle>,
        name: &[Self::Unit],
        checked: Option<Self::Handle>,
    ) -> Result<Self::Handle, Self::Error>;
}

/// Opens `path` beneath the start of `steps`, following a link at the last
/// name if `follow_last` and none anywhere if `no_links`. A path that
/// starts with a separator is an escape; one that ends with one must name
/// a directory (a link there is followed).
pub fn walk<S: Steps>(
    steps: &S,
    path: &[S::Unit],
    follow_last: bool,
    no_links: bool,
) -> Result<S::Handle, S::Error> {
    let Some(&first) = path.first() else {
        return Err(S::error(Stop::Empty));
    };
    if S::is_separator(first) {
        return Err(S::error(Stop::Escape));
    }
    let mut pending = names::<S>(path);
    let mut trailing = path.last().is_some_and(|&u| S::is_separator(u));
    // The directories entered, the current one on top; empty: the start.
    let mut entered: Vec<S::Handle> = Vec::new();
    let mut links = 0;
    let (dot, dots) = (
        [S::Unit::from(b'.')],
        [S::Unit::from(b'.'), S::Unit::from(b'.')],
    );
    loop {
        let Some(name) = pending.pop_front() else {
            return steps.here(entered.last());
        };
        if name == dot {
            continue;
        }
        if name == dots {
            entered.pop().ok_or_else(|| S::error(Stop::Escape))?;
            continue;
        }
        let last = pending.is_empty();
        let cur = entered.last();
        let Some(found) = steps.probe(cur, &name)? else {
            if !last {
                return Err(S::error(Stop::Missing));
            }
            return steps.last(cur, &name, None);
        };
        let kind = steps.kind(&found)?;
        if kind == Kind::Link && (!last || follow_last || trailing) {
            links += 1;
            if no_links || links > MAX_LINKS {
                return Err(S::error(Stop::Loop));
            }
            let target = steps.target(&found)?;
            if target.first().is_some_and(|&u| S::is_separator(u)) {
                return Err(S::error(Stop::Escape));
            }
            // The path's own trailing separator holds for the target too.
            if last {
                trailing |= target.last().is_some_and(|&u| S::is_separator(u));
            }
            for n in names::<S>(&target).into_iter().rev() {
                pending.push_front(n);
            }
            continue;
        }
        if !last {
            if kind != Kind::Directory {
                return Err(S::error(Stop::NotADirectory));
            }
            entered.push(found);
            continue;
        }
        if trailing && kind != Kind::Directory {
            return Err(S::error(Stop::NotADirectory));
        }
        return steps.last(cur, &name, Some(found));
    }
}

/// The names of a path, in order; empty ones (`a//b`) left out.
fn names<S: Steps>(path: &[S::Unit]) -> VecDeque<Vec<S::Unit>> {
    path.split(|&u| S::is_separator(u))
        .filter(|n| !n.is_empty())
        .map(<[S::Unit]>::to_vec)
        .collect()
}
