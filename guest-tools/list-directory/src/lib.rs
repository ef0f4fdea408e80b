//! `list_directory`: the entries under a directory, down to `depth` levels.
//!
//! Entries come sorted as a tree (by path components), each with its type,
//! size and modification time. Symlinks are listed as symlinks, never
//! followed. The walk is breadth-first, so a listing cut at the entry limit
//! keeps what lies closest to the start and says it was cut. Denied names
//! never appear: the host's filesystem does not return them.
//!
//! Entries the root's ignore files (`.gitignore`, `.ignore`) exclude are
//! listed once, marked `ignored`, and by default not descended: a person
//! looking at a folder expects to see `target/`, not its million files.
//! `ignored: "include"` lists inside them (still marked).

use std::cmp::Ordering;
use std::path::Path;

use loomfs_guest::ignores::Ignored;
use loomfs_guest::walk::{self, Flow, IgnoreFiles};
use loomfs_guest::{
    About, Answer, Context, Kind, Permission, ToolError, count_arg, human_bytes, locate_dir,
    modified_at, shown,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Deepest listing a call may ask for.
const MAX_DEPTH: u32 = 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Name of the root (see list_roots).
    root: String,
    /// Directory relative to the root; default: the root itself.
    #[serde(default)]
    path: Option<String>,
    /// Levels to list; default 1 (direct entries only).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_DEPTH))]
    depth: Option<u32>,
    /// Directories excluded by the root's .gitignore/.ignore files are always listed, marked
    /// `ignored`: `skip` (default) does not list inside them; `include` does. A `path` named
    /// directly is listed even if ignored.
    #[serde(default)]
    ignored: Ignored,
}

#[derive(Serialize, JsonSchema)]
struct Entry {
    /// Relative to the root.
    path: String,
    #[serde(rename = "type")]
    kind: Kind,
    size: Option<u64>,
    /// RFC 3339, UTC.
    modified: Option<String>,
    /// Excluded by the root's .gitignore/.ignore files (or inside a directory that is).
    ignored: bool,
}

#[derive(Serialize, JsonSchema)]
struct Listing {
    path: String,
    entries: Vec<Entry>,
    /// True when the entry limit cut the listing.
    truncated: bool,
    unreadable_dirs: u64,
    /// Entries listed marked `ignored`.
    ignored: u64,
    note: Option<String>,
}

const DESCRIPTION: &str = "List a directory's entries with type, size and modification time, \
    sorted; `depth` (1-10) lists subdirectories too. Symlinks are shown, \
    not followed. Entries the root's .gitignore/.ignore files exclude \
    are shown marked `ignored`, and ignored directories are not listed \
    inside unless `ignored: \"include\"`.";

loomfs_guest::tool!(ListDirectory(Args) -> Listing, {
    About::new("list_directory", DESCRIPTION, Permission::Read).path_optional()
});

/// What to do instead, when `path` is not a directory.
const NOT_A_DIRECTORY: &str = "use get_file_info or read_file";

fn call(ctx: Context, args: Args) -> Result<Answer<Listing>, ToolError> {
    let depth = count_arg("depth", args.depth, 1, MAX_DEPTH, "")?;
    let at = locate_dir(&ctx, &args.root, args.path.as_deref(), NOT_A_DIRECTORY)?;
    let rel = at.rel.as_str();

    let max_entries = ctx.limits.max_entries as usize;
    let mut entries = Vec::new();
    let mut truncated = false;
    let (mut ignored, mut unlisted) = (0, 0);
    let ignore_files = IgnoreFiles::Apply {
        root: Path::new(&at.mount.dir),
    };
    let stats = walk::breadth_first(&at.full, rel, depth, ignore_files, |e| {
        if entries.len() == max_entries {
            truncated = true;
            return Flow::Stop;
        }
        ignored += u64::from(e.ignored);
        let stat = e.stat();
        let is_file = e.kind == Kind::File;
        entries.push(Entry {
            path: e.rel.clone(),
            kind: e.kind,
            size: stat.as_ref().filter(|_| is_file).map(|s| s.size),
            modified: stat.as_ref().and_then(modified_at),
            ignored: e.ignored,
        });
        if e.ignored && args.ignored == Ignored::Skip {
            // Not listed inside: said when the depth would have.
            unlisted += u64::from(e.kind == Kind::Directory && e.depth < depth);
            return Flow::Prune;
        }
        Flow::Continue
    })?;
    entries.sort_by(|a, b| tree_order(&a.path, &b.path));

    let mut notes = Vec::new();
    if truncated {
        notes.push(format!(
            "listing cut at {max_entries} entries (nearest levels first); list a \
             subdirectory or use a smaller depth to see the rest"
        ));
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
        truncated,
        unreadable_dirs: stats.dirs_unreadable,
        ignored,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        entries,
    };
    let mut text = vec![render(&listing)];
    text.extend(listing.note.clone());
    Ok(Answer {
        text,
        result: listing,
        images: vec![],
    })
}

/// Orders paths as a tree: by component, so `a/x` sorts right after `a`.
fn tree_order(a: &str, b: &str) -> Ordering {
    a.split('/').cmp(b.split('/'))
}

/// One line per entry: type, size, modification time, path (directories end
/// in `/`, inside the quotes of a quoted path: the slash is part of what
/// text shows, and a path ending in `/` names the same directory).
fn render(listing: &Listing) -> String {
    if listing.entries.is_empty() {
        return format!("'{}' is empty", shown(&listing.path));
    }
    // A column of its own, before the path: a name cannot forge it. Only
    // when something is ignored, so other listings look as they always did.
    let marks = listing.entries.iter().any(|e| e.ignored);
    let mut out = String::new();
    for e in &listing.entries {
        let size = e.size.map(human_bytes).unwrap_or_default();
        let mark = match (marks, e.ignored) {
            (false, _) => "",
            (true, true) => "ignored  ",
            (true, false) => "         ",
        };
        let path = if e.kind == Kind::Directory {
            shown(&format!("{}/", e.path)).into_owned()
        } else {
            shown(&e.path).into_owned()
        };
        out.push_str(&format!(
            "{:<9} {:>10}  {:<20}  {mark}{path}\n",
            e.kind.name(),
            size,
            e.modified.as_deref().unwrap_or("-"),
        ));
    }
    out
}
