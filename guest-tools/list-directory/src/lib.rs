//! `list_directory`: the entries under a directory, down to `depth` levels;
//! with `tree`, the same walk drawn as an indented tree (`tree`).
//!
//! Entries come sorted as a tree (by path components), relative to the
//! directory listed, with their type from the directory read itself: nothing
//! is asked per entry unless `details` asks for size and modification time.
//! Symlinks are listed as symlinks, never followed. The walk is
//! breadth-first, so a listing cut at the entry limit keeps what lies
//! closest to the start, says it was cut and gives a cursor for the rest
//! (`loomfs_guest::page`). Denied names never appear: the host's filesystem
//! does not return them.
//!
//! Entries the root's ignore files (`.gitignore`, `.ignore`) exclude are
//! listed once, marked `ignored`, and by default not descended: a person
//! looking at a folder expects to see `target/`, not its million files.
//! `ignored: "include"` lists inside them (still marked).
//!
//! The reply is lean, since the model pays for every byte: a line per
//! entry, a directory ending in `/`, and a first column (the type, `!` for
//! ignored) only when some entry is neither a file nor a directory, or is
//! ignored; the structured form is the paths, with the types and ignored
//! marks of only the entries that need one. Sizes and times come only when
//! asked (`details`, or `sort_by` size or modified, which need them), and
//! then with a closing line: how many files, directories and others, and
//! the files' total size.

mod tree;

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use loomfs_guest::ignores::Ignored;
use loomfs_guest::page::Cursor;
use loomfs_guest::walk::{self, Flow, IgnoreFiles};
use loomfs_guest::{
    About, Answer, Context, Kind, Permission, ToolError, count_arg, locate_dir, modified_at, shown,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Deepest listing a call may ask for.
const MAX_DEPTH: u32 = 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    /// Relative to the root.
    #[serde(default)]
    path: Option<String>,
    /// Default 1 (tree: 3).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_DEPTH))]
    depth: Option<u32>,
    #[serde(default)]
    ignored: Ignored,
    #[serde(default)]
    details: bool,
    #[serde(default)]
    sort_by: SortBy,
    #[serde(default)]
    cursor: Option<String>,
    /// An indented tree instead; a cut one names what it left out.
    #[serde(default)]
    tree: bool,
    /// With tree: globs to leave out; without '/' a name at any depth.
    #[serde(default)]
    exclude: Vec<String>,
}

/// A listing, or with `tree` a tree.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum Listed {
    Entries(Listing),
    Tree(tree::Tree),
}

// The order of the entries (its values say it: no description).
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
enum SortBy {
    #[default]
    Name,
    Size,
    Modified,
}

/// One entry: its path, or with `details` its path, size and modification time.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry {
    Path(String),
    Details(String, Option<u64>, Option<String>),
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Path(path) | Entry::Details(path, ..) => path,
        }
    }
}

#[derive(Serialize, JsonSchema)]
struct Listing {
    /// The directory listed, relative to the root (`.` for the root itself).
    path: String,
    /// Strings: paths relative to `path`, sorted as a tree; a directory's ends in `/`. With
    /// `details`, each is `[path, size (files only, else null), modified (RFC 3339, UTC, or
    /// null)]`.
    #[schemars(schema_with = "loomfs_guest::tool::any_array")]
    entries: Vec<Entry>,
    /// The type of each entry that is neither a file nor a directory, by its path in
    /// `entries`.
    /// (Kinds by name: symlink, fifo, socket, char_device, block_device, unknown.)
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, String>")]
    types: BTreeMap<String, Kind>,
    /// Entries the root's .gitignore/.ignore files exclude (or inside a directory that is),
    /// as in `entries`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
    /// With details: counts of the entries listed and the files' total size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    totals: Option<Totals>,
    /// Set when the entry limit cut the listing.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    truncated: bool,
    /// Pass as `cursor` to get the next entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    unreadable_dirs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize, JsonSchema, Default)]
struct Totals {
    files: u64,
    directories: u64,
    /// Entries that are neither (symlinks, special files).
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    others: u64,
    /// Sum of the files' sizes.
    bytes: u64,
}

impl Totals {
    fn count(&mut self, kind: Kind, size: Option<u64>) {
        match kind {
            Kind::File => {
                self.files += 1;
                self.bytes += size.unwrap_or(0);
            }
            Kind::Directory => self.directories += 1,
            _ => self.others += 1,
        }
    }
}

const DESCRIPTION: &str = "A directory's entries; directories end in '/'. .gitignored entries are marked, not \
    entered unless ignored is include. Pass next_cursor as cursor to go on.";

loomfs_guest::tool!(ListDirectory(Args) -> Listed, {
    About::new("list_directory", DESCRIPTION, Permission::Read).path_optional()
});

/// What to do instead, when `path` is not a directory.
const NOT_A_DIRECTORY: &str = "use get_file_info or read_file";

fn call(ctx: Context, args: Args) -> Result<Answer<Listed>, ToolError> {
    if args.tree {
        let listing_only = [
            ("details", args.details),
            ("sort_by", args.sort_by != SortBy::Name),
            ("cursor", args.cursor.is_some()),
            ("ignored", args.ignored != Ignored::Skip),
        ];
        if let Some((name, _)) = listing_only.iter().find(|(_, given)| *given) {
            return Err(ToolError::InvalidArguments(format!(
                "'{name}' is not an argument of a tree"
            )));
        }
        let args = tree::Args {
            root: args.root,
            path: args.path,
            depth: args.depth,
            exclude: args.exclude,
        };
        return tree::call(ctx, args).map(|a| a.map(Listed::Tree));
    }
    if !args.exclude.is_empty() {
        return Err(ToolError::InvalidArguments(
            "'exclude' is an argument of a tree: give tree: true".into(),
        ));
    }
    list(ctx, args).map(|a| a.map(Listed::Entries))
}

fn list(ctx: Context, args: Args) -> Result<Answer<Listing>, ToolError> {
    let depth = count_arg("depth", args.depth, 1, MAX_DEPTH, "")?;
    let cursor = Cursor::parse(args.cursor.as_deref())?;
    let at = locate_dir(&ctx, &args.root, args.path.as_deref(), NOT_A_DIRECTORY)?;
    let rel = at.rel.as_str();
    let prefix = if rel == "." {
        String::new()
    } else {
        format!("{rel}/")
    };

    let max_entries = ctx.limits.max_entries as usize;
    let details = args.details || args.sort_by != SortBy::Name;
    let mut entries = Vec::new();
    // Beside each entry: its size and exact modification time, to sort by.
    let mut keys = Vec::new();
    let mut totals = Totals::default();
    let mut types = BTreeMap::new();
    let mut ignored = Vec::new();
    let mut next = None;
    let mut unlisted = 0;
    let ignore_files = IgnoreFiles::Apply {
        root: Path::new(&at.mount.dir),
    };
    let stats = walk::breadth_first(&at.full, rel, depth, ignore_files, |e| {
        // Not listed inside: an ignored directory, unless asked.
        let prune = e.ignored && args.ignored == Ignored::Skip;
        if let Some(flow) = cursor.passed(e, prune) {
            return flow;
        }
        if entries.len() == max_entries {
            next = Some(Cursor::at(e, 0));
            return Flow::Stop;
        }
        let rel = e.rel.strip_prefix(&prefix).unwrap_or(&e.rel);
        // Room for a directory's `/`.
        let mut path = String::with_capacity(rel.len() + 1);
        path.push_str(rel);
        match e.kind {
            Kind::File => {}
            Kind::Directory => path.push('/'),
            kind => {
                types.insert(path.clone(), kind);
            }
        }
        if e.ignored {
            ignored.push(path.clone());
        }
        entries.push(if details {
            let stat = e.stat();
            let size = stat
                .as_ref()
                .filter(|_| e.kind == Kind::File)
                .map(|s| s.size);
            totals.count(e.kind, size);
            let time = stat
                .as_ref()
                .and_then(|s| s.data_modification_timestamp)
                .map(|t| (t.seconds, t.nanoseconds));
            keys.push((size, time));
            Entry::Details(path, size, stat.as_ref().and_then(modified_at))
        } else {
            Entry::Path(path)
        });
        if prune {
            // Said when the depth would have listed inside.
            unlisted += u64::from(e.kind == Kind::Directory && e.depth < depth);
            return Flow::Prune;
        }
        Flow::Continue
    })?;
    // One level comes from the walk sorted by name, which is the tree's order.
    let entries = match (args.sort_by, depth) {
        (SortBy::Name, 1) => entries,
        _ => sorted(entries, keys, args.sort_by),
    };
    ignored.sort_by(|a, b| tree_order(a, b));

    let next_cursor = next.and_then(|n| n.next_after(cursor));
    let mut notes = Vec::new();
    if let Some(next) = &next_cursor {
        notes.push(format!(
            "listing cut at {max_entries} entries (nearest levels first); for the next \
             ones call again with cursor: \"{next}\""
        ));
        if args.sort_by != SortBy::Name {
            notes.push("sorted and totalled within this page only".into());
        }
    }
    if unlisted > 0 {
        notes.push(format!(
            "{unlisted} ignored directories (excluded by the root's .gitignore/.ignore \
             files) are shown but not listed inside: pass ignored: \"include\" to list \
             them"
        ));
    }
    notes.extend(stats.notes());
    let listing = Listing {
        path: rel.to_string(),
        truncated: next_cursor.is_some(),
        next_cursor,
        unreadable_dirs: stats.dirs_unreadable,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        entries,
        types,
        ignored,
        totals: details.then_some(totals),
    };
    let mut text = vec![render(
        &listing,
        args.cursor.is_some().then_some(cursor),
        args.sort_by,
    )];
    text.extend(listing.note.clone());
    Ok(Answer {
        text,
        result: listing,
        images: vec![],
    })
}

/// An entry's size (files) and modification time (seconds, nanoseconds).
type SortKey = (Option<u64>, Option<(u64, u32)>);

/// The entries in the order asked: as a tree, or by size (largest first,
/// what has none last) or modification time (newest first, unknown last),
/// ties as a tree. `keys` holds each entry's size and time (empty without
/// details).
fn sorted(entries: Vec<Entry>, keys: Vec<SortKey>, by: SortBy) -> Vec<Entry> {
    let mut rows: Vec<(Entry, SortKey)> = match keys.len() {
        0 => entries.into_iter().map(|e| (e, (None, None))).collect(),
        _ => entries.into_iter().zip(keys).collect(),
    };
    rows.sort_by(|(a, (a_size, a_time)), (b, (b_size, b_time))| {
        let first = match by {
            SortBy::Name => Ordering::Equal,
            // `Some` is greater than `None`: reversed, the largest come first
            // and what has no size last.
            SortBy::Size => b_size.cmp(a_size),
            SortBy::Modified => b_time.cmp(a_time),
        };
        first.then_with(|| tree_order(a.path(), b.path()))
    });
    rows.into_iter().map(|(e, _)| e).collect()
}

/// Orders paths as a tree: by component, so `a/x` sorts right after `a/`.
/// Compared byte by byte with `/` as the lowest byte, which is the same
/// order (a name holds neither `/` nor NUL, so where two paths first
/// differ, a `/` or the end on one side means its component ended first),
/// without splitting.
fn tree_order(a: &str, b: &str) -> Ordering {
    fn trim(p: &str) -> &[u8] {
        p.strip_suffix('/').unwrap_or(p).as_bytes()
    }
    let rank = |c: u8| if c == b'/' { 0 } else { c };
    let (a, b) = (trim(a), trim(b));
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => rank(x).cmp(&rank(y)),
        _ => a.len().cmp(&b.len()),
    }
}

/// An entry's type: from `types`, or its path (a directory's ends in `/`).
fn kind_of(listing: &Listing, path: &str) -> Kind {
    match listing.types.get(path) {
        Some(kind) => *kind,
        None if path.ends_with('/') => Kind::Directory,
        None => Kind::File,
    }
}

/// Every type, in the order the first line explains their marks.
const KINDS: [Kind; 8] = [
    Kind::Directory,
    Kind::File,
    Kind::Symlink,
    Kind::Fifo,
    Kind::Socket,
    Kind::CharDevice,
    Kind::BlockDevice,
    Kind::Unknown,
];

/// The first column's mark of a type, as `ls -l` writes it.
fn letter(kind: Kind) -> char {
    match kind {
        Kind::File => '-',
        Kind::Directory => 'd',
        Kind::Symlink => 'l',
        Kind::Fifo => 'p',
        Kind::Socket => 's',
        Kind::CharDevice => 'c',
        Kind::BlockDevice => 'b',
        Kind::Unknown => '?',
    }
}

/// The text: a first line naming the directory, the count and the columns
/// before the path if there are any, then one line per entry, its path
/// (shown by the naming rule) last. A directory's path ends in `/`, inside
/// the quotes of a quoted path (the slash is part of what text shows, and a
/// path ending in `/` names the same directory). The type column is there
/// only when some entry is neither a file nor a directory, or is ignored:
/// then on every line, and the first line says so, so no name can pass for
/// a mark.
fn render(listing: &Listing, cursor: Option<Cursor>, by: SortBy) -> String {
    let dir = shown(&listing.path);
    let from = cursor
        .map(|c| format!(" from cursor \"{c}\""))
        .unwrap_or_default();
    if listing.entries.is_empty() {
        return match from.is_empty() {
            true => format!("'{dir}' is empty"),
            false => format!("'{dir}': no entries{from}"),
        };
    }
    let ignored: HashSet<&str> = listing.ignored.iter().map(String::as_str).collect();
    let marks = !listing.types.is_empty() || !ignored.is_empty();
    let mut columns = Vec::new();
    if marks {
        let present: Vec<Kind> = listing
            .entries
            .iter()
            .map(|e| kind_of(listing, e.path()))
            .collect();
        let mut legend: Vec<String> = KINDS
            .into_iter()
            .filter(|k| present.contains(k))
            .map(|k| format!("{} {}", letter(k), k.name()))
            .collect();
        if !ignored.is_empty() {
            legend.push("then ! if ignored".into());
        }
        columns.push(format!("type ({})", legend.join(", ")));
    }
    let details = matches!(listing.entries[0], Entry::Details(..));
    if details {
        columns.push("size in bytes (files)".into());
        columns.push("modified (UTC)".into());
    }
    let n = listing.entries.len();
    // A page that is cut says so first: its count is not the directory's.
    let cut = match listing.truncated {
        true => ", cut: the cursor in the note below gives the next ones",
        false => "",
    };
    let order = match by {
        SortBy::Name => "",
        SortBy::Size => ", largest first",
        SortBy::Modified => ", newest first",
    };
    let mut out = format!(
        "'{dir}': {n} {}{order}{from}{cut}",
        if n == 1 { "entry" } else { "entries" }
    );
    if !columns.is_empty() {
        out.push_str(&format!("; each line: {}, path", columns.join(", ")));
    }
    out.push('\n');
    for e in &listing.entries {
        let path = e.path();
        if marks {
            out.push(letter(kind_of(listing, path)));
            if ignored.contains(path) {
                out.push('!');
            }
            out.push(' ');
        }
        if let Entry::Details(_, size, modified) = e {
            match size {
                Some(size) => out.push_str(&size.to_string()),
                None => out.push('-'),
            }
            out.push(' ');
            out.push_str(modified.as_deref().unwrap_or("-"));
            out.push(' ');
        }
        out.push_str(&shown(path));
        out.push('\n');
    }
    if let Some(t) = &listing.totals {
        let others = match t.others {
            0 => String::new(),
            n => format!(", {n} other"),
        };
        out.push_str(&format!(
            "total: {} files ({} bytes), {} directories{others}\n",
            t.files, t.bytes, t.directories
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte comparison orders paths as comparing them component by
    /// component does.
    #[test]
    fn tree_order_is_by_component() {
        let by_component = |a: &str, b: &str| {
            let (a, b) = (
                a.strip_suffix('/').unwrap_or(a),
                b.strip_suffix('/').unwrap_or(b),
            );
            a.split('/').cmp(b.split('/'))
        };
        let paths = [
            "a", "a/", "a/x", "a/x/", "a/x/y", "a.b", "a-b", "a b", "a!/x", "a0", "ab", "ab/c",
            "a/b.c", "a/b/c", "b", "B", "é", "é/a", "éa", "a/é", "a.b/c", "a/!", "a/ ",
        ];
        for a in paths {
            for b in paths {
                assert_eq!(tree_order(a, b), by_component(a, b), "{a:?} {b:?}");
            }
        }
    }
}
