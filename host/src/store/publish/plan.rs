//! A call's changes as the steps that publish them, in an order that is
//! safe to stop after any one of them and to finish from the journal: keep
//! what is replaced in place, take away (into the trash, or out of the way
//! to be moved) what goes, deepest first, then make and put in place what
//! is new, shallowest first, then the hard links and times.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::steps::{
    self, Outcome, PlanRoot, Step, moved_from, parent_of, run_step, sync_dirs, sync_staged,
};
use super::{Changes, Check, Identity, Kind, Made, New, Published, Refused, Taken};
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

    /// Adds the steps and checks of root `r`'s changes, in four stages:
    /// what is replaced in place is kept, what goes is taken away, what
    /// comes is made or put in place (hard links after it), then the times
    /// are set.
    fn add(&mut self, r: usize, c: &Changes) -> Result<(), Refused> {
        let mut adding = Adding {
            r,
            changes: c,
            taken: c.taken.iter().map(|t| (t.from.as_path(), t)).collect(),
            copies: 0,
        };
        for t in &c.taken {
            self.checks.push((r, t.from.clone(), Expect::Is(t.was)));
        }
        let in_place = self.keep_in_place(&mut adding)?;
        let lifted = self.take_going(&mut adding, &in_place)?;
        let coming = self.make_coming(&adding, &in_place, &lifted)?;
        self.set_times(r, &coming);
        Ok(())
    }

    /// Files replaced by a file of the call's at the same place: kept by a
    /// link (or a copy), to be replaced in one rename. Returns their paths.
    fn keep_in_place<'c>(&mut self, a: &mut Adding<'c>) -> Result<HashSet<&'c Path>, Refused> {
        let (r, c) = (a.r, a.changes);
        let mut in_place: HashSet<&Path> = HashSet::new();
        for m in &c.made {
            let (New::Staged(stage), Check::Replaces(from)) = (&m.new, &m.check) else {
                continue;
            };
            let Some(t) = a.taken.get(from.as_path()) else {
                continue;
            };
            if *from != m.at || t.moved || t.was.kind == Kind::Dir {
                continue;
            }
            let was = t.was;
            in_place.insert(&m.at);
            let slot = self.slot(&m.at);
            if was.dev == c.dev {
                self.steps.push(Step::Link {
                    root: r,
                    at: m.at.clone(),
                    slot,
                    was,
                });
            } else {
                let temp = a.next_copy()?;
                self.steps.push(Step::Copy {
                    root: r,
                    at: m.at.clone(),
                    temp,
                    slot,
                    was,
                });
            }
            if was.kind == Kind::File {
                self.modes.push((r, stage.clone(), was.mode & 0o777));
            }
        }
        Ok(in_place)
    }

    /// What goes: deepest first, so that what lies below an entry taken
    /// whole is taken before it. Into the trash, or (what the call moves)
    /// out of the way into a stage directory: returns where each moved
    /// entry was lifted to.
    fn take_going<'c>(
        &mut self,
        a: &mut Adding<'c>,
        in_place: &HashSet<&Path>,
    ) -> Result<HashMap<&'c Path, PathBuf>, Refused> {
        let (r, c) = (a.r, a.changes);
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
                    a.unsupported(format!(
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
                return Err(a.unsupported(format!(
                    "'{}' is a directory on another filesystem than the trash",
                    t.from.display()
                )));
            } else {
                self.steps.push(Step::Copy {
                    root: r,
                    at: t.from.clone(),
                    temp: a.next_copy()?,
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
        Ok(lifted)
    }

    /// What comes: shallowest first, so that a directory is there before
    /// what goes into it; each with the check of its place, the hard links
    /// after everything else. Returns what comes, in that order.
    fn make_coming<'c>(
        &mut self,
        a: &Adding<'c>,
        in_place: &HashSet<&Path>,
        lifted: &HashMap<&Path, PathBuf>,
    ) -> Result<Vec<&'c Made>, Refused> {
        let r = a.r;
        let mut coming: Vec<&Made> = a.changes.made.iter().collect();
        coming.sort_by_key(|m| m.at.components().count());
        let mut links = Vec::new();
        for m in &coming {
            self.check_place(r, m);
            match &m.new {
                New::Dir => self.steps.push(Step::Mkdir {
                    root: r,
                    at: m.at.clone(),
                }),
                New::Staged(stage) => {
                    let over = in_place
                        .contains(m.at.as_path())
                        .then(|| a.taken[m.at.as_path()].was);
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
                        a.unsupported(format!("'{}' is moved but not taken", from.display()))
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
                    if a.taken.contains_key(from.as_path()) {
                        return Err(a.unsupported(format!(
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
        Ok(coming)
    }

    /// The check of the place `m` comes to: free (or a directory, for a
    /// directory made), or still the entry the call saw.
    fn check_place(&mut self, r: usize, m: &Made) {
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
    }

    /// Times last, deepest first: what is made in a directory changes its
    /// times.
    fn set_times(&mut self, r: usize, coming: &[&Made]) {
        for m in coming.iter().rev() {
            if let Some(times) = m.times {
                self.steps.push(Step::SetTimes {
                    root: r,
                    at: m.at.clone(),
                    times,
                });
            }
        }
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

/// One root's changes while [`Plan::add`] plans them: what its stages share.
struct Adding<'c> {
    /// The root's index in the plan.
    r: usize,
    changes: &'c Changes,
    /// What the call takes away, by where it was.
    taken: HashMap<&'c Path, &'c Taken>,
    /// Temporary copies named so far in the stage directory.
    copies: u32,
}

impl Adding<'_> {
    /// The refusal of what this root cannot do.
    fn unsupported(&self, what: String) -> Refused {
        Refused::Io {
            root: self.changes.root.name.clone(),
            error: io::Error::new(io::ErrorKind::Unsupported, what),
        }
    }

    /// The path of the next temporary copy in the stage directory.
    fn next_copy(&mut self) -> Result<PathBuf, Refused> {
        self.copies += 1;
        let name = format!("k{}", self.copies);
        match &self.changes.stage {
            Some(stage) => Ok(stage.join(name)),
            None => Err(self.unsupported("no stage directory for the host's copies".into())),
        }
    }
}
