//! What a call changed in one root, staged: the call's view of the root is
//! the disk with these changes over it, and the disk itself is changed
//! only when the call has succeeded ([`crate::store::publish`]).
//!
//! Paths here are the call's own (canonical: every symlink on the way
//! resolved, as the call sees the root now). `nodes` says what stands at a
//! path where the call changed something; `taken` says which disk entries,
//! by the path they had when the call began (their *start path*), the call
//! took from their place, and whether to another place of its (a rename:
//! a [`Node::Moved`] there names them) or for good (kept in the trash when
//! published). Everything else is the disk, as it is.
//!
//! Files and symlinks the call makes live in its stage (a directory of the
//! staging area on the filesystem of their place), so a file keeps one
//! descriptor from its creation to its publish; directories the call makes
//! are only a node until published.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::publish::{Check, Identity, Made, New, Taken, Times};

/// The most entries one call may change in one root: each costs the host
/// some memory until the call ends (the entry, its path).
pub const MAX_ENTRIES: usize = 200_000;

/// A file or symlink the call made, in its stage.
#[derive(Debug)]
pub struct Staged {
    /// Root-relative path of the staged entry.
    pub rel: PathBuf,
    /// The device of the stage's filesystem (the place's).
    pub dev: u64,
    /// For a symlink: its target.
    pub symlink: Option<String>,
}

/// What stands at a path the call changed.
#[derive(Clone, Debug)]
pub enum Node {
    /// Nothing: what the disk has there (taken by the call) is hidden.
    Gone,
    /// A file or symlink the call made (shared by its hard links).
    File(Arc<Staged>),
    /// A directory the call made: nothing of the disk shows below it.
    Dir(Option<Times>),
    /// The disk entry whose start path this is, moved here by the call
    /// (with what lies below it on disk).
    Moved(PathBuf, Option<Times>),
    /// The disk entry at this start path, left where it is, with new times.
    Touched(PathBuf, Times),
    /// A hard link to the disk file at this start path, which the call
    /// leaves where it is.
    Link(PathBuf),
}

/// A disk entry the call took from its place.
#[derive(Clone, Copy, Debug)]
pub struct Take {
    pub was: Identity,
    /// To a [`Node::Moved`] of the call's; otherwise for good.
    pub moved: bool,
}

/// One root's staged changes.
#[derive(Default, Debug)]
pub struct Overlay {
    pub nodes: BTreeMap<PathBuf, Node>,
    pub taken: BTreeMap<PathBuf, Take>,
    /// What each disk entry was when the call first saw it, by start path:
    /// the version a publish must still find.
    pub seen: HashMap<PathBuf, Identity>,
    /// Bytes of path the maps hold, for [`MAX_ENTRIES`]'s sibling bound.
    bytes: usize,
}

/// Where a path of the call's lies on disk when the call began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// At this start path (through the directories the call moved).
    At(PathBuf),
    /// Below a directory the call made: nowhere on disk.
    Made,
}

/// Why a change could not be staged.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// More than [`MAX_ENTRIES`] entries, or their paths more than
    /// [`MAX_BYTES`].
    Entries,
}

/// The most bytes of path one call's changes may hold in one root.
pub const MAX_BYTES: usize = 64 << 20;

impl Overlay {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.taken.is_empty()
    }

    /// Counts one more path held, or says the overlay is full.
    fn hold(&mut self, path: &Path) -> Result<(), Full> {
        self.bytes += path.as_os_str().len() + 64;
        if self.nodes.len() + self.taken.len() >= MAX_ENTRIES || self.bytes > MAX_BYTES {
            return Err(Full::Entries);
        }
        Ok(())
    }

    pub fn set(&mut self, at: PathBuf, node: Node) -> Result<(), Full> {
        self.hold(&at)?;
        self.nodes.insert(at, node);
        Ok(())
    }

    /// Notes a disk entry as taken (see [`Take`]), with the identity the
    /// call first saw it with.
    pub fn take(&mut self, start: PathBuf, now: Identity, moved: bool) -> Result<(), Full> {
        let was = self.seen.get(&start).copied().unwrap_or(now);
        self.hold(&start)?;
        self.taken.insert(start, Take { was, moved });
        Ok(())
    }

    /// Remembers what a disk entry was the first time the call saw it.
    pub fn saw(&mut self, start: &Path, now: Identity) {
        if !self.seen.contains_key(start) && self.seen.len() < MAX_ENTRIES {
            self.seen.insert(start.to_path_buf(), now);
        }
    }

    /// The nearest path at or above `at` that has a node, with it.
    pub fn nearest(&self, at: &Path) -> Option<(&Path, &Node)> {
        at.ancestors()
            .find_map(|a| self.nodes.get_key_value(a))
            .map(|(p, n)| (p.as_path(), n))
    }

    /// Where the place `at` was on disk when the call began: mapped back
    /// through the directories above it that the call moved (its own node
    /// does not count: the place, not what the call put there).
    pub fn start_of(&self, at: &Path) -> Start {
        let above = at.parent().and_then(|p| self.nearest_with_path(p));
        match above {
            None => Start::At(at.to_path_buf()),
            Some((a, Node::Moved(from, _) | Node::Touched(from, _))) => {
                let rest = at.strip_prefix(a).unwrap_or(Path::new(""));
                Start::At(from.join(rest))
            }
            // Below a directory the call made, or (which a walk never
            // reaches) below something that is not a directory.
            Some(_) => Start::Made,
        }
    }

    fn nearest_with_path(&self, at: &Path) -> Option<(&Path, &Node)> {
        // `Path::ancestors` of "" yields "", which is the root's own node.
        self.nearest(at)
    }

    /// The nodes strictly below `at`, in path order.
    pub fn below<'a>(&'a self, at: &'a Path) -> impl Iterator<Item = (&'a PathBuf, &'a Node)> + 'a {
        use std::ops::Bound;
        self.nodes
            .range::<Path, _>((Bound::Excluded(at), Bound::Unbounded))
            .take_while(move |(p, _)| p.starts_with(at))
            .filter(move |(p, _)| p.as_path() != at)
    }

    /// The nodes directly in the directory `at`.
    pub fn children<'a>(
        &'a self,
        at: &'a Path,
    ) -> impl Iterator<Item = (&'a PathBuf, &'a Node)> + 'a {
        let depth = at.components().count() + 1;
        self.below(at)
            .filter(move |(p, _)| p.components().count() == depth)
    }

    /// Whether the disk entry at `start` is left to the call's view: not
    /// taken, nor below something taken for good.
    pub fn is_taken(&self, start: &Path) -> bool {
        self.taken.contains_key(start)
    }

    /// Moves every node strictly below `from` to the same place below `to`
    /// (a directory renamed with what the call changed in it).
    pub fn move_below(&mut self, from: &Path, to: &Path) {
        let moving: Vec<PathBuf> = self.below(from).map(|(p, _)| p.clone()).collect();
        for p in moving {
            if let Some(node) = self.nodes.remove(&p) {
                let rest = p.strip_prefix(from).unwrap_or(&p).to_path_buf();
                self.nodes.insert(to.join(rest), node);
            }
        }
    }

    /// Drops every node strictly below `at` (a directory removed whole, or
    /// one the call made, removed empty). A disk entry moved there from
    /// elsewhere is taken for good instead: it goes to the trash.
    pub fn drop_below(&mut self, at: &Path) {
        let dropping: Vec<PathBuf> = self.below(at).map(|(p, _)| p.clone()).collect();
        for p in dropping {
            if let Some(Node::Moved(from, _) | Node::Touched(from, _)) = self.nodes.remove(&p)
                && let Some(t) = self.taken.get_mut(&from)
            {
                t.moved = false;
            }
        }
    }

    /// After the disk entry at `start` is taken whole for good: what lies
    /// below it on disk goes with it, so what the call took for good
    /// there is no longer taken on its own. What it moved out of there
    /// stays taken (it is moved out first).
    pub fn taken_whole(&mut self, start: &Path) {
        let below: Vec<PathBuf> = self
            .taken
            .iter()
            .filter(|(p, t)| p.as_path() != start && p.starts_with(start) && !t.moved)
            .map(|(p, _)| p.clone())
            .collect();
        for p in below {
            self.taken.remove(&p);
        }
    }

    /// The changes as the publish takes them, with the device of each
    /// staged file's filesystem needed for the stages; `dir_kind` tells
    /// whether a node's place holds a directory the call made.
    pub fn changes(&self) -> (Vec<Taken>, Vec<Made>) {
        let taken: Vec<Taken> = self
            .taken
            .iter()
            .map(|(from, t)| Taken {
                from: from.clone(),
                was: t.was,
                moved: t.moved,
            })
            .collect();
        let mut made = Vec::new();
        // The first place of each staged file gets it; its other names
        // are hard links to that place.
        let mut placed: Vec<(Arc<Staged>, PathBuf)> = Vec::new();
        for (at, node) in &self.nodes {
            let check = match self.start_of(at) {
                Start::Made => Check::Inside,
                Start::At(start) if self.taken.contains_key(&start) => Check::Replaces(start),
                Start::At(start) => Check::Free(start),
            };
            let (new, times) = match node {
                Node::Gone => continue,
                Node::File(staged) => match placed.iter().find(|(s, _)| Arc::ptr_eq(s, staged)) {
                    Some((_, first)) => (New::LinkTo(first.clone()), None),
                    None => {
                        placed.push((Arc::clone(staged), at.clone()));
                        (New::Staged(staged.rel.clone()), None)
                    }
                },
                Node::Dir(times) => (New::Dir, *times),
                Node::Moved(from, times) => (New::Moved(from.clone()), *times),
                Node::Touched(start, times) => {
                    let Some(was) = self.seen.get(start) else {
                        continue;
                    };
                    made.push(Made {
                        at: at.clone(),
                        new: New::Touch,
                        check: Check::Is(start.clone(), *was),
                        times: Some(*times),
                    });
                    continue;
                }
                Node::Link(start) => {
                    let Some(was) = self.seen.get(start) else {
                        continue;
                    };
                    (
                        New::LinkDisk {
                            from: start.clone(),
                            was: *was,
                        },
                        None,
                    )
                }
            };
            made.push(Made {
                at: at.clone(),
                new,
                check,
                times,
            });
        }
        (taken, made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::publish::Kind;

    fn id(ino: u64) -> Identity {
        Identity {
            dev: 1,
            ino,
            kind: Kind::File,
            mode: 0o644,
            size: 1,
            mtime: (0, 0),
            ctime: (0, 0),
        }
    }

    #[test]
    fn a_place_below_a_moved_directory_starts_where_the_directory_was() {
        let mut o = Overlay::default();
        o.take("a".into(), id(1), true).unwrap();
        o.set("a".into(), Node::Gone).unwrap();
        o.set("b".into(), Node::Moved("a".into(), None)).unwrap();
        assert_eq!(o.start_of(Path::new("b/x/y")), Start::At("a/x/y".into()));
        assert_eq!(o.start_of(Path::new("b")), Start::At("b".into()));
        assert_eq!(o.start_of(Path::new("c/d")), Start::At("c/d".into()));
        o.set("n".into(), Node::Dir(None)).unwrap();
        assert_eq!(o.start_of(Path::new("n/f")), Start::Made);
    }

    #[test]
    fn children_are_the_direct_entries_only() {
        let mut o = Overlay::default();
        for p in ["a", "a/b", "a/b/c", "a/d", "ab", "b"] {
            o.set(p.into(), Node::Dir(None)).unwrap();
        }
        let names: Vec<_> = o.children(Path::new("a")).map(|(p, _)| p.clone()).collect();
        assert_eq!(names, vec![PathBuf::from("a/b"), PathBuf::from("a/d")]);
        let top: Vec<_> = o.children(Path::new("")).map(|(p, _)| p.clone()).collect();
        assert_eq!(
            top,
            vec![PathBuf::from("a"), PathBuf::from("ab"), PathBuf::from("b")]
        );
    }

    #[test]
    fn the_first_sight_of_an_entry_is_its_version() {
        let mut o = Overlay::default();
        o.saw(Path::new("f"), id(1));
        o.saw(Path::new("f"), id(2));
        o.take("f".into(), id(3), false).unwrap();
        assert_eq!(o.taken[Path::new("f")].was.ino, 1);
    }

    #[test]
    fn a_staged_file_with_two_names_is_put_once_and_linked_once() {
        let mut o = Overlay::default();
        let staged = Arc::new(Staged {
            rel: "stage/f1".into(),
            dev: 1,
            symlink: None,
        });
        o.set("x".into(), Node::File(Arc::clone(&staged))).unwrap();
        o.set("y".into(), Node::File(staged)).unwrap();
        let (_, made) = o.changes();
        assert!(matches!(&made[0].new, New::Staged(p) if p == Path::new("stage/f1")));
        assert!(matches!(&made[1].new, New::LinkTo(p) if p == Path::new("x")));
    }

    #[test]
    fn removing_a_directory_whole_takes_what_was_moved_into_it() {
        let mut o = Overlay::default();
        o.take("elsewhere".into(), id(1), true).unwrap();
        o.set("elsewhere".into(), Node::Gone).unwrap();
        o.set("d/in".into(), Node::Moved("elsewhere".into(), None))
            .unwrap();
        o.drop_below(Path::new("d"));
        assert!(!o.taken[Path::new("elsewhere")].moved);
        assert!(o.nodes.get(Path::new("d/in")).is_none());
    }
}
