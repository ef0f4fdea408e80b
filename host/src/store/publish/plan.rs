//! A call's changes as the steps that publish them, in an order that is
//! safe to stop after any one of them and to finish from the journal: keep
//! what is replaced in place, take away (into the trash, or out of the way
//! to be moved) what goes, deepest first, then make and put in place what
//! is new, shallowest first, then the hard links and times.

use rustix::fs::{AtFlags, Mode};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::steps::{
    Outcome, PlanRoot, Step, moved_from, parent_of, run_step, sync_dirs, sync_staged,
};
use super::*;
use crate::store::TRASH_DIR;
use crate::sys::beneath;

/// The steps of one publish and the roots they act in.
pub struct Plan {
    pub(super) roots: Vec<PlanRoot>,
    pub(super) steps: Vec<Step>,
    /// The call's trash entry.
    pub(super) stamp: String,
    /// What the checks compare before anything is done.
    pub(super) checks: Vec<(usize, PathBuf, Expect)>,
    /// Staged files that take the permission bits of the file they
    /// replace (WASI cannot set them, and an edit must not make a private
    /// file readable or a script not executable): root, staged path, mode.
    pub(super) modes: Vec<(usize, PathBuf, rustix::fs::RawMode)>,
    /// The staged entries, synced before the commit.
    pub(super) staged: Vec<(usize, PathBuf)>,
    /// Each root's stage directory on its own filesystem (where its
    /// journal goes), by root index.
    pub(super) stages: Vec<Option<PathBuf>>,
}

/// What the checks want at a path before anything is done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Expect {
    /// This entry, unchanged.
    Is(Identity),
    /// Nothing, in a directory that is there.
    Free,
    /// Nothing, or a directory (a directory the call makes, made by
    /// someone else meanwhile, is the same directory).
    FreeOrDir,
}

impl Plan {
    pub(super) fn new(changes: &[&Changes], stamp: &str) -> Result<Plan, Refused> {
        let mut plan = Plan {
            roots: Vec::new(),
            steps: Vec::new(),
            stamp: stamp.to_string(),
            checks: Vec::new(),
            modes: Vec::new(),
            staged: Vec::new(),
            stages: Vec::new(),
        };
        for (r, c) in changes.iter().enumerate() {
            let fd = beneath::open_root(&c.root).map_err(|error| Refused::Io {
                root: c.root.name.clone(),
                error,
            })?;
            plan.roots.push(PlanRoot {
                root: Arc::clone(&c.root),
                fd,
            });
            plan.stages.push(c.stage.clone());
            plan.add(r, c)?;
        }
        Ok(plan)
    }

    /// The trash slot of what was at `from`: `.mcp-trash/<stamp>/<from>`.
    fn slot(&self, from: &Path) -> PathBuf {
        Path::new(TRASH_DIR).join(&self.stamp).join(from)
    }

    fn add(&mut self, r: usize, c: &Changes) -> Result<(), Refused> {
        let unsupported = |what: String| Refused::Io {
            root: c.root.name.clone(),
            error: io::Error::new(io::ErrorKind::Unsupported, what),
        };
        let taken: HashMap<&Path, &Taken> = c.taken.iter().map(|t| (t.from.as_path(), t)).collect();
        let mut copies = 0u32;
        let no_stage = || unsupported("no stage directory for the host's copies".into());
        let temp = |prefix: &str, n: &mut u32| {
            *n += 1;
            c.stage.as_ref().map(|s| s.join(format!("{prefix}{n}")))
        };
        for t in &c.taken {
            self.checks.push((r, t.from.clone(), Expect::Is(t.was)));
        }
        // Files replaced by a file of the call's at the same place: kept
        // by a link (or a copy), then replaced in one rename.
        let mut in_place: HashSet<&Path> = HashSet::new();
        for m in &c.made {
            let (New::Staged(stage), Check::Replaces(from)) = (&m.new, &m.check) else {
                continue;
            };
            let Some(t) = taken.get(from.as_path()) else {
                continue;
            };
            if *from != m.at || t.moved || t.was.kind == Kind::Dir {
                continue;
            }
            in_place.insert(&m.at);
            let slot = self.slot(&m.at);
            if t.was.dev == c.dev {
                self.steps.push(Step::Link {
                    root: r,
                    at: m.at.clone(),
                    slot,
                    was: t.was,
                });
            } else {
                let temp = temp("k", &mut copies).ok_or_else(no_stage)?;
                self.steps.push(Step::Copy {
                    root: r,
                    at: m.at.clone(),
                    temp,
                    slot,
                    was: t.was,
                });
            }
            if t.was.kind == Kind::File {
                self.modes.push((r, stage.clone(), t.was.mode & 0o777));
            }
        }
        // What goes: deepest first, so that what lies below an entry
        // taken whole is taken before it.
        let mut going: Vec<&Taken> = c
            .taken
            .iter()
            .filter(|t| !in_place.contains(t.from.as_path()))
            .collect();
        going.sort_by_key(|t| std::cmp::Reverse(t.from.components().count()));
        let mut lifted: HashMap<&Path, PathBuf> = HashMap::new();
        let mut lifts = 0u32;
        for t in going {
            if t.moved {
                let stage = c.stage_on(t.was.dev).ok_or_else(|| {
                    unsupported(format!(
                        "no stage on the filesystem of '{}'",
                        t.from.display()
                    ))
                })?;
                lifts += 1;
                let to = stage.join(format!("m{lifts}"));
                lifted.insert(&t.from, to.clone());
                self.steps.push(Step::Take {
                    root: r,
                    from: t.from.clone(),
                    to,
                    was: t.was,
                });
            } else if t.was.dev == c.dev {
                self.steps.push(Step::Take {
                    root: r,
                    from: t.from.clone(),
                    to: self.slot(&t.from),
                    was: t.was,
                });
            } else if t.was.kind == Kind::Dir {
                return Err(unsupported(format!(
                    "'{}' is a directory on another filesystem than the trash",
                    t.from.display()
                )));
            } else {
                self.steps.push(Step::Copy {
                    root: r,
                    at: t.from.clone(),
                    temp: temp("k", &mut copies).ok_or_else(no_stage)?,
                    slot: self.slot(&t.from),
                    was: t.was,
                });
                self.steps.push(Step::Unlink {
                    root: r,
                    at: t.from.clone(),
                    was: t.was,
                });
            }
        }
        // What comes: shallowest first, so that a directory is there before
        // what goes into it.
        let mut coming: Vec<&Made> = c.made.iter().collect();
        coming.sort_by_key(|m| m.at.components().count());
        let mut links = Vec::new();
        for m in &coming {
            match &m.check {
                Check::Free(at) => self.checks.push((
                    r,
                    at.clone(),
                    if matches!(m.new, New::Dir) {
                        Expect::FreeOrDir
                    } else {
                        Expect::Free
                    },
                )),
                Check::Is(at, was) => self.checks.push((r, at.clone(), Expect::Is(*was))),
                Check::Replaces(_) | Check::Inside => {}
            }
            match &m.new {
                New::Dir => self.steps.push(Step::Mkdir {
                    root: r,
                    at: m.at.clone(),
                }),
                New::Staged(stage) => {
                    let over = in_place
                        .contains(m.at.as_path())
                        .then(|| taken[m.at.as_path()].was);
                    self.staged.push((r, stage.clone()));
                    self.steps.push(Step::Put {
                        root: r,
                        from: stage.clone(),
                        at: m.at.clone(),
                        over,
                    });
                }
                New::Moved(from) => {
                    let lift = lifted.get(from.as_path()).ok_or_else(|| {
                        unsupported(format!("'{}' is moved but not taken", from.display()))
                    })?;
                    self.steps.push(Step::Put {
                        root: r,
                        from: lift.clone(),
                        at: m.at.clone(),
                        over: None,
                    });
                }
                New::LinkTo(to) => links.push(Step::HardLink {
                    root: r,
                    from: to.clone(),
                    at: m.at.clone(),
                }),
                New::LinkDisk { from, was } => {
                    if taken.contains_key(from.as_path()) {
                        return Err(unsupported(format!(
                            "a hard link to '{}', which the call also moves or removes",
                            from.display()
                        )));
                    }
                    self.checks.push((r, from.clone(), Expect::Is(*was)));
                    links.push(Step::HardLink {
                        root: r,
                        from: from.clone(),
                        at: m.at.clone(),
                    });
                }
                New::Touch => {}
            }
        }
        self.steps.extend(links);
        // Times last, deepest first: what is made in a directory changes
        // its times.
        for m in coming.iter().rev() {
            if let Some(times) = m.times {
                self.steps.push(Step::SetTimes {
                    root: r,
                    at: m.at.clone(),
                    times,
                });
            }
        }
        Ok(())
    }

    /// Whether more than one name changes: then a kill part-way would
    /// leave some changed and some not, and the journal is written first.
    /// Keeping a version (a link or a copy into the trash) and making a
    /// directory change no name a reader relies on.
    pub(super) fn needs_journal(&self) -> bool {
        self.steps
            .iter()
            .filter(|s| {
                !matches!(
                    s,
                    Step::Link { .. } | Step::Copy { .. } | Step::Mkdir { .. }
                )
            })
            .count()
            > 1
    }

    /// Checks that what the call saw is still there (see [`Expect`]).
    pub(super) fn check(&self) -> Result<(), Refused> {
        for (r, path, expect) in &self.checks {
            let root = &self.roots[*r];
            let now = steps::lstat(&root.fd, path);
            let holds = match (expect, &now) {
                (Expect::Is(was), Ok(Some(now))) => was.unchanged(now),
                (Expect::Free, Ok(None)) => true,
                (Expect::FreeOrDir, Ok(None)) => true,
                (Expect::FreeOrDir, Ok(Some(now))) => now.kind == Kind::Dir,
                // Its directory gone, or no longer a directory: changed.
                (_, Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP)) => false,
                (_, Err(e)) => {
                    return Err(Refused::Io {
                        root: root.root.name.clone(),
                        error: (*e).into(),
                    });
                }
                _ => false,
            };
            if !holds {
                return Err(Refused::Conflict {
                    root: root.root.name.clone(),
                    path: path.clone(),
                });
            }
        }
        Ok(())
    }
}

impl Plan {
    /// Commits and does the steps (see the module).
    pub(super) fn run(self) -> Result<Published, Refused> {
        let io = |r: usize, error: Errno| Refused::Io {
            root: self.roots[r].root.name.clone(),
            error: error.into(),
        };
        // Before the commit: nothing here changes a user's file.
        for (r, stage, mode) in &self.modes {
            let (dir, n) = parent_of(&self.roots[*r].fd, stage).map_err(|e| io(*r, e))?;
            let _ = rustix::fs::chmodat(&dir, n, Mode::from_raw_mode(*mode), AtFlags::empty());
        }
        for (r, stage) in &self.staged {
            sync_staged(&self.roots[*r].fd, stage).map_err(|e| io(*r, e))?;
        }
        let journal = if self.needs_journal() {
            Some(
                super::journal::write(&self.roots, &self.stamp, &self.steps, &self.stages)
                    .map_err(|e| Refused::Io {
                        root: self.roots[0].root.name.clone(),
                        error: e,
                    })?,
            )
        } else {
            None
        };
        let mut out = Outcome::default();
        for (n, step) in self.steps.iter().enumerate() {
            run_step(&self.roots, &self.stamp, step, &mut out);
            super::pause(n + 1);
            // Without a journal the one step that changes a name is all
            // there is: once it failed, nothing changed; the version kept
            // for it is taken back out of the trash (it is still in place).
            if journal.is_none()
                && let Some((r, e)) = out.failed
            {
                self.take_back_keeps(&out.published);
                return Err(io(r, e));
            }
        }
        sync_dirs(&self.roots, &out.dirs);
        if let Some(journal) = journal {
            super::journal::finish(&self.roots, &journal);
        }
        moved_from(&self.steps, &self.roots, &mut out.published);
        Ok(out.published)
    }

    /// Removes the hard links a publish that changed nothing made in the
    /// trash (each file is still where it was, as it was).
    fn take_back_keeps(&self, published: &Published) {
        for k in &published.kept {
            let Some((r, root)) = self
                .roots
                .iter()
                .enumerate()
                .find(|(_, p)| p.root.name == k.root)
            else {
                continue;
            };
            let linked = self.steps.iter().any(|s| {
                matches!(s, Step::Link { root: sr, slot, .. } if *sr == r && slot == Path::new(&k.to))
            });
            if !linked {
                continue;
            }
            if let Ok((dir, n)) = parent_of(&root.fd, Path::new(&k.to)) {
                let _ = rustix::fs::unlinkat(&dir, n, AtFlags::empty());
            }
        }
    }
}
