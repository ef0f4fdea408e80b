//! `git blame`: for each line of a file at a revision, the commit that
//! last changed it. Lines pass to a parent whose version has them
//! unchanged (every parent of a merge is tried in order, as git does); a
//! line no parent has comes from the commit itself. Renames are not
//! followed: the commit that created the file at this path takes its lines.

use crate::diff::{is_binary, line_diff};
use crate::{Error, History, View};
use gix::ObjectId;
use imara_diff::InternedInput;
use loomfs_names::shown;
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
    let missing = || Error::NotFound(format!("{}: no such file at {}", shown(rel), shown(rev)));
    let bad_path = rel.is_empty()
        || rel
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..");
    if bad_path || view.is_hidden(rel) {
        return Err(missing());
    }
    let repo_path = view.in_repo(rel);
    let start = history.commit(rev)?;
    let mut nodes = Nodes::new(history, &repo_path);
    let blob = nodes.blob(start.id)?.ok_or_else(missing)?;
    let text = read(history, blob)?;
    if is_binary(&text) {
        return Err(Error::Refused(format!(
            "{}: binary file, no lines to blame",
            shown(rel)
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
    queue.push((nodes.node(start.id)?.time, start.id));
    while let Some((_, id)) = queue.pop() {
        let Some(suspect) = suspects.remove(&id) else {
            continue;
        };
        let parents = nodes.node(id)?.parents;
        let mut lines = suspect.lines;
        let mut data: Option<Vec<u8>> = None;
        let mut blobs = Vec::with_capacity(parents.len());
        for parent in &parents {
            blobs.push(nodes.blob(*parent)?);
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
                queue.push((nodes.node(parent)?.time, parent));
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

/// What a blame asks of each commit, read once: from the commit-graph
/// file when there is one (no commit to inflate), else from the commit.
#[derive(Clone)]
struct Node {
    /// Committer time, the order commits are visited in.
    time: i64,
    parents: Vec<ObjectId>,
    tree: ObjectId,
}

struct Nodes<'h> {
    history: &'h History,
    graph: Option<gix::commitgraph::Graph>,
    components: Vec<&'h str>,
    nodes: HashMap<ObjectId, Node>,
    /// (tree, depth of the path's component looked up in it) → the blob
    /// the rest of the path names, if any: trees shared between commits
    /// are read once.
    found: HashMap<(ObjectId, usize), Option<ObjectId>>,
}

impl<'h> Nodes<'h> {
    fn new(history: &'h History, repo_path: &'h str) -> Nodes<'h> {
        Nodes {
            history,
            graph: history.repo().commit_graph_if_enabled().ok().flatten(),
            components: repo_path.split('/').collect(),
            nodes: HashMap::new(),
            found: HashMap::new(),
        }
    }

    fn node(&mut self, id: ObjectId) -> Result<Node, Error> {
        if let Some(node) = self.nodes.get(&id) {
            return Ok(node.clone());
        }
        let from_graph = self.graph.as_ref().and_then(|graph| {
            let commit = graph.commit_by_id(id)?;
            let parents = commit
                .iter_parents()
                .map(|p| p.map(|pos| graph.id_at(pos).to_owned()))
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            Some(Node {
                time: i64::try_from(commit.committer_timestamp()).unwrap_or(i64::MAX),
                parents,
                tree: commit.root_tree_id().to_owned(),
            })
        });
        let node = match from_graph {
            Some(node) => node,
            None => {
                let commit = self.history.repo().find_commit(id).map_err(damaged)?;
                Node {
                    time: commit.time().map_err(damaged)?.seconds,
                    parents: commit.parent_ids().map(|p| p.detach()).collect(),
                    tree: commit.tree_id().map_err(damaged)?.detach(),
                }
            }
        };
        self.nodes.insert(id, node.clone());
        Ok(node)
    }

    /// The blob at the path in a commit, if the path is a file there.
    fn blob(&mut self, commit: ObjectId) -> Result<Option<ObjectId>, Error> {
        let tree = self.node(commit)?.tree;
        self.lookup(tree, 0)
    }

    fn lookup(&mut self, tree: ObjectId, depth: usize) -> Result<Option<ObjectId>, Error> {
        if let Some(found) = self.found.get(&(tree, depth)) {
            return Ok(*found);
        }
        let data = read(self.history, tree)?;
        let name = self.components[depth].as_bytes();
        let hash = self.history.repo().object_hash();
        let mut entry = None;
        for item in gix::objs::TreeRefIter::from_bytes(&data, hash) {
            let item = item.map_err(damaged)?;
            if item.filename == name {
                entry = Some((item.mode, item.oid.to_owned()));
                break;
            }
        }
        let last = depth + 1 == self.components.len();
        let found = match entry {
            Some((mode, oid)) if last && mode.is_blob_or_symlink() => Some(oid),
            Some((mode, oid)) if !last && mode.is_tree() => self.lookup(oid, depth + 1)?,
            _ => None,
        };
        self.found.insert((tree, depth), found);
        Ok(found)
    }
}

fn read(history: &History, blob: ObjectId) -> Result<Vec<u8>, Error> {
    Ok(history
        .repo()
        .find_object(blob)
        .map_err(damaged)?
        .detach()
        .data)
}

fn damaged(e: impl std::fmt::Display) -> Error {
    Error::Repository(format!("cannot read the history: {e}"))
}
