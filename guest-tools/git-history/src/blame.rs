//! `git blame`: for each line of a file at a revision, the commit that
//! last changed it. Lines pass to a parent whose version has them
//! unchanged (every parent of a merge is tried in order, as git does); a
//! line no parent has comes from the commit itself. Renames are not
//! followed: the commit that created the file at this path takes its lines.

use crate::diff::{is_binary, line_diff};
use crate::{Error, History, View};
use gix::ObjectId;
use imara_diff::InternedInput;
use std::collections::{BinaryHeap, HashMap};

/// One line of a blame.
#[derive(Debug, Clone)]
pub struct BlameLine {
    /// The commit that last changed it.
    pub commit: String,
    pub author_name: String,
    pub author_email: String,
    pub author_time: i64,
    pub author_offset: i32,
    /// Its line number (1-based) in that commit's version of the file.
    pub original_line: u32,
}

/// A commit still holding lines to pass on.
struct Suspect {
    blob: ObjectId,
    /// (line in this commit's version, line in the blamed version), both
    /// 0-based, in order.
    lines: Vec<(u32, u32)>,
}

/// The blame of the root-relative `path` at `rev`, one entry per line, and
/// the file's text. A hidden path fails exactly as a missing one; a binary
/// file is refused.
pub fn blame(
    history: &History,
    rev: &str,
    path: &str,
    view: &View<'_>,
) -> Result<(Vec<BlameLine>, Vec<u8>), Error> {
    let rel = path.trim_matches('/');
    let missing = || Error::NotFound(format!("{rel}: no such file at {rev}"));
    let bad_path = rel.is_empty()
        || rel
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..");
    if bad_path || view.is_hidden(rel) {
        return Err(missing());
    }
    let repo_path = view.in_repo(rel);
    let start = history.commit(rev)?;
    let blob = blob_at(history, start.id, &repo_path)?.ok_or_else(missing)?;
    let text = read(history, blob)?;
    if is_binary(&text) {
        return Err(Error::Refused(format!(
            "{rel}: binary file, no lines to blame"
        )));
    }
    let count = text.split_inclusive(|&b| b == b'\n').count() as u32;
    let mut owner: Vec<Option<(ObjectId, u32)>> = vec![None; count as usize];
    let mut suspects: HashMap<ObjectId, Suspect> = HashMap::new();
    let mut queue = BinaryHeap::new();
    suspects.insert(
        start.id,
        Suspect {
            blob,
            lines: (0..count).map(|i| (i, i)).collect(),
        },
    );
    queue.push((commit_time(history, start.id)?, start.id));
    while let Some((_, id)) = queue.pop() {
        let Some(suspect) = suspects.remove(&id) else {
            continue;
        };
        let commit = history.repo().find_commit(id).map_err(damaged)?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        let mut lines = suspect.lines;
        let mut data: Option<Vec<u8>> = None;
        let mut blobs = Vec::with_capacity(parents.len());
        for parent in &parents {
            blobs.push(blob_at(history, *parent, &repo_path)?);
        }
        // A parent with the very same version takes every line (the first
        // such parent, as git does); otherwise each parent in order takes
        // the lines it has unchanged.
        let order: Vec<(ObjectId, Option<ObjectId>)> =
            match blobs.iter().position(|b| *b == Some(suspect.blob)) {
                Some(same) => vec![(parents[same], blobs[same])],
                None => parents.iter().copied().zip(blobs).collect(),
            };
        for (parent, parent_blob) in order {
            if lines.is_empty() {
                break;
            }
            let Some(parent_blob) = parent_blob else {
                continue;
            };
            let passed: Vec<(u32, u32)>;
            if parent_blob == suspect.blob {
                passed = std::mem::take(&mut lines);
            } else {
                let ours = match &data {
                    Some(d) => d,
                    None => data.insert(read(history, suspect.blob)?),
                };
                let theirs = read(history, parent_blob)?;
                let map = unchanged_lines(&theirs, ours);
                let mut kept = Vec::new();
                let mut moved = Vec::new();
                for (at, blamed) in lines {
                    match map.get(at as usize).copied().flatten() {
                        Some(before) => moved.push((before, blamed)),
                        None => kept.push((at, blamed)),
                    }
                }
                lines = kept;
                passed = moved;
            }
            if passed.is_empty() {
                continue;
            }
            let entry = suspects.entry(parent).or_insert_with(|| Suspect {
                blob: parent_blob,
                lines: Vec::new(),
            });
            if entry.lines.is_empty() {
                queue.push((commit_time(history, parent)?, parent));
            }
            entry.lines.extend(passed);
            entry.lines.sort_unstable();
            entry.lines.dedup_by_key(|l| l.1);
        }
        for (at, blamed) in lines {
            owner[blamed as usize] = Some((id, at));
        }
    }
    let mut authors: HashMap<ObjectId, (String, String, i64, i32)> = HashMap::new();
    let mut out = Vec::with_capacity(owner.len());
    for slot in owner {
        let (id, at) =
            slot.ok_or_else(|| Error::Repository("a line was left without a commit".into()))?;
        let (name, email, time, offset) = match authors.entry(id) {
            std::collections::hash_map::Entry::Occupied(known) => known.get().clone(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let commit = history.repo().find_commit(id).map_err(damaged)?;
                let author = commit.author().map_err(damaged)?;
                let time = author.time().unwrap_or_default();
                let who = (
                    author.name.to_string(),
                    author.email.to_string(),
                    time.seconds,
                    time.offset,
                );
                slot.insert(who).clone()
            }
        };
        out.push(BlameLine {
            commit: id.to_string(),
            author_name: name,
            author_email: email,
            author_time: time,
            author_offset: offset,
            original_line: at + 1,
        });
    }
    Ok((out, text))
}

/// For each line of `after`, the line of `before` it is unchanged from.
fn unchanged_lines(before: &[u8], after: &[u8]) -> Vec<Option<u32>> {
    let input = InternedInput::new(before, after);
    let diff = line_diff(&input);
    let mut map = Vec::with_capacity(input.after.len());
    let (mut b, mut a) = (0u32, 0u32);
    for hunk in diff.hunks() {
        while a < hunk.after.start {
            map.push(Some(b));
            a += 1;
            b += 1;
        }
        map.extend(std::iter::repeat_n(None, hunk.after.len()));
        a = hunk.after.end;
        b = hunk.before.end;
    }
    while (a as usize) < input.after.len() {
        map.push(Some(b));
        a += 1;
        b += 1;
    }
    map
}

fn blob_at(
    history: &History,
    commit: ObjectId,
    repo_path: &str,
) -> Result<Option<ObjectId>, Error> {
    let commit = history.repo().find_commit(commit).map_err(damaged)?;
    let tree = commit.tree().map_err(damaged)?;
    let entry = tree.lookup_entry_by_path(repo_path).map_err(damaged)?;
    Ok(entry
        .filter(|e| e.mode().is_blob_or_symlink())
        .map(|e| e.object_id()))
}

fn read(history: &History, blob: ObjectId) -> Result<Vec<u8>, Error> {
    Ok(history
        .repo()
        .find_object(blob)
        .map_err(damaged)?
        .detach()
        .data)
}

fn commit_time(history: &History, id: ObjectId) -> Result<i64, Error> {
    let commit = history.repo().find_commit(id).map_err(damaged)?;
    commit.time().map(|t| t.seconds).map_err(damaged)
}

fn damaged(e: impl std::fmt::Display) -> Error {
    Error::Repository(format!("cannot read the history: {e}"))
}
