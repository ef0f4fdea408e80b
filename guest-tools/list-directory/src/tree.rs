//! `list_directory` with `tree`: a directory's tree, `depth` levels down,
//! as indented text and as a nested structure.
//!
//! What `list_directory` gives as sorted paths, drawn as a tree: a line per
//! entry, two spaces of indentation per level, directories first and then
//! the other entries, each group by name. The walk is the library's
//! (breadth-first, types from the directory read, symlinks shown and never
//! followed, denied names never returned by the host), so a tree cut at the
//! entry limit keeps the levels nearest the start; the walk then reads the
//! directories it had queued, without showing them, to name in the note
//! those whose entries were left out (bounded: it gives up after a few
//! times the limit). Entries the root's ignore files exclude are shown
//! once, marked, and not descended, as `list_directory` does; `exclude`
//! globs leave entries out with everything below them.
//!
//! The structured form is nested and lean: a file (or other non-directory)
//! is its name; a directory whose entries are shown is `{"name/": [...]}`;
//! one whose entries are not (the depth, ignored, or the cut) is the string
//! `"name/"`. Types other than file and directory, and ignored marks, are
//! given by path, as `list_directory` gives them.

use super::letter;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use loomfs_guest::glob::Pattern;
use loomfs_guest::walk::{self, Flow, IgnoreFiles};
use loomfs_guest::{Answer, Context, Kind, ToolError, count_arg, locate_dir, shown};
use schemars::JsonSchema;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// Deepest tree a call may ask for.
const MAX_DEPTH: u32 = 10;
/// Levels shown when `depth` is not given.
const DEFAULT_DEPTH: u32 = 3;
/// Most `exclude` globs a call may give.
const MAX_EXCLUDES: usize = 64;
/// Most directories the note of a cut tree names.
const MAX_NAMED: usize = 20;
/// After the cut, how many entries (per entry of the limit) the walk still
/// reads to name the directories left out, before it gives up.
const LOOK_PAST: usize = 4;

/// Its part of `list_directory`'s arguments.
pub(crate) struct Args {
    pub(crate) root: String,
    pub(crate) path: Option<String>,
    pub(crate) depth: Option<u32>,
    pub(crate) exclude: Vec<String>,
}

/// One node of the nested structure.
enum Node {
    /// A file or other non-directory, by name.
    Leaf(String),
    /// A directory whose entries are not shown: `name/`.
    Closed(String),
    /// A directory and its entries: `{"name/": [...]}`.
    Open(String, Vec<Node>),
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Leaf(name) => s.serialize_str(name),
            Node::Closed(name) => s.serialize_str(&format!("{name}/")),
            Node::Open(name, children) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry(&format!("{name}/"), children)?;
                map.end()
            }
        }
    }
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct Tree {
    /// The directory shown, relative to the root (`.` for the root itself).
    path: String,
    /// Its entries, directories first then by name: a name for a file (or other
    /// non-directory); `{"name/": [entries]}` for a directory shown inside; `"name/"` for one
    /// not shown inside (depth, ignored, or the cut).
    #[schemars(schema_with = "loomfs_guest::tool::any_array")]
    tree: Vec<Node>,
    /// Entries shown.
    entries: usize,
    /// The type of each entry that is neither a file nor a directory, by its path relative to
    /// `path`.
    /// (Kinds by name: symlink, fifo, socket, char_device, block_device, unknown.)
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, String>")]
    types: BTreeMap<String, Kind>,
    /// Entries the root's .gitignore/.ignore files exclude, by path relative to `path`
    /// (directories end in '/'); shown, not descended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
    /// Set when the entry limit cut the tree; the note names the directories left out.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    truncated: bool,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    unreadable_dirs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// What to do instead, when `path` is not a directory.
const NOT_A_DIRECTORY: &str = "use get_file_info or read_file";

/// An entry the walk met, relative to the tree's start.
struct Met {
    rel: String,
    kind: Kind,
    ignored: bool,
    depth: u32,
}

pub(crate) fn call(ctx: Context, args: Args) -> Result<Answer<Tree>, ToolError> {
    let depth = count_arg("depth", args.depth, DEFAULT_DEPTH, MAX_DEPTH, "")?;
    if args.exclude.len() > MAX_EXCLUDES {
        return Err(ToolError::InvalidArguments(format!(
            "'exclude' holds {} patterns, more than {MAX_EXCLUDES}",
            args.exclude.len()
        )));
    }
    let exclude = (args.exclude.iter())
        .map(|p| Pattern::new(p, "exclude"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ToolError::InvalidArguments)?;
    let at = locate_dir(&ctx, &args.root, args.path.as_deref(), NOT_A_DIRECTORY)?;
    let rel = at.rel.as_str();
    let prefix = if rel == "." {
        String::new()
    } else {
        format!("{rel}/")
    };

    let max_entries = ctx.limits.max_entries as usize;
    let mut shown_entries: Vec<Met> = Vec::new();
    // After the cut: entries left out, counted by their directory.
    let mut left_out: HashMap<String, usize> = HashMap::new();
    let mut looked_past = 0;
    let mut gave_up = false;
    let ignore_files = IgnoreFiles::Apply {
        root: Path::new(&at.mount.dir),
    };
    let stats = walk::breadth_first(&at.full, rel, depth, ignore_files, |e| {
        let path = e.rel.strip_prefix(&prefix).unwrap_or(&e.rel);
        if exclude.iter().any(|p| p.matches(path)) {
            return Flow::Prune;
        }
        if shown_entries.len() == max_entries {
            if looked_past == max_entries.saturating_mul(LOOK_PAST) {
                gave_up = true;
                return Flow::Stop;
            }
            looked_past += 1;
            let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
            *left_out.entry(parent.to_string()).or_default() += 1;
            return Flow::Prune;
        }
        shown_entries.push(Met {
            rel: path.to_string(),
            kind: e.kind,
            ignored: e.ignored,
            depth: e.depth,
        });
        if e.ignored {
            Flow::Prune
        } else {
            Flow::Continue
        }
    })?;
    let truncated = !left_out.is_empty() || gave_up;

    let mut types = BTreeMap::new();
    let mut ignored = Vec::new();
    for m in &shown_entries {
        if !matches!(m.kind, Kind::File | Kind::Directory) {
            types.insert(m.rel.clone(), m.kind);
        }
        if m.ignored {
            let slash = if m.kind == Kind::Directory { "/" } else { "" };
            ignored.push(format!("{}{slash}", m.rel));
        }
    }
    ignored.sort();
    // Which directories show their entries: read within the limit, not
    // ignored, not at the depth limit, and none of their entries left out
    // unseen (a cut that gave up leaves every directory without shown
    // entries in doubt).
    let has_children: HashSet<&str> = (shown_entries.iter())
        .filter_map(|m| m.rel.rsplit_once('/').map(|(p, _)| p))
        .collect();
    let open = |m: &Met| {
        m.kind == Kind::Directory
            && !m.ignored
            && m.depth < depth
            && (has_children.contains(m.rel.as_str())
                || (!left_out.contains_key(&m.rel) && !gave_up))
    };
    let tree = nest(&shown_entries, &open);

    let mut notes = Vec::new();
    if truncated {
        let mut dirs: Vec<(&String, &usize)> = left_out.iter().collect();
        dirs.sort();
        let mut named: Vec<String> = (dirs.iter().take(MAX_NAMED))
            .map(|(d, n)| {
                let d = if d.is_empty() { "." } else { d.as_str() };
                format!("'{}' ({n})", shown(d))
            })
            .collect();
        if dirs.len() > MAX_NAMED {
            named.push(format!("{} more directories", dirs.len() - MAX_NAMED));
        }
        let mut note = format!(
            "tree cut at {max_entries} entries (nearest levels first); entries not shown, \
             by directory: {}",
            named.join(", ")
        );
        if gave_up {
            note.push_str(", and more not counted");
        }
        note.push_str("; call again with 'path' set to one of them");
        notes.push(note);
    }
    let unlisted = (shown_entries.iter())
        .filter(|m| m.ignored && m.kind == Kind::Directory && m.depth < depth)
        .count();
    if unlisted > 0 {
        notes.push(format!(
            "{unlisted} ignored directories (excluded by the root's .gitignore/.ignore files) \
             are shown but not descended: list_directory with ignored: \"include\" or a \
             'path' inside one lists them"
        ));
    }
    notes.extend(stats.notes());
    let result = Tree {
        path: rel.to_string(),
        entries: shown_entries.len(),
        tree,
        types,
        ignored,
        truncated,
        unreadable_dirs: stats.dirs_unreadable,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    };
    let mut text = vec![render(&result, depth)];
    text.extend(result.note.clone());
    Ok(Answer {
        text,
        result,
        images: vec![],
    })
}

/// The entries as nested nodes, each directory's directories first, then
/// the rest, each group by name.
fn nest(entries: &[Met], open: &dyn Fn(&Met) -> bool) -> Vec<Node> {
    let mut children: HashMap<&str, Vec<&Met>> = HashMap::new();
    for m in entries {
        let parent = m.rel.rsplit_once('/').map_or("", |(p, _)| p);
        children.entry(parent).or_default().push(m);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| {
            let dir = |m: &Met| m.kind != Kind::Directory;
            (dir(a), name(&a.rel)).cmp(&(dir(b), name(&b.rel)))
        });
    }
    fn build(
        dir: &str,
        children: &HashMap<&str, Vec<&Met>>,
        open: &dyn Fn(&Met) -> bool,
    ) -> Vec<Node> {
        let Some(list) = children.get(dir) else {
            return Vec::new();
        };
        list.iter()
            .map(|m| {
                let n = name(&m.rel).to_string();
                match m.kind {
                    Kind::Directory if open(m) => Node::Open(n, build(&m.rel, children, open)),
                    Kind::Directory => Node::Closed(n),
                    _ => Node::Leaf(n),
                }
            })
            .collect()
    }
    build("", &children, open)
}

fn name(rel: &str) -> &str {
    rel.rsplit_once('/').map_or(rel, |(_, n)| n)
}

/// The text: a first line naming the directory, the count, the depth and
/// the order, then one line per entry, indented two spaces per level, its
/// name (by the naming rule) last, a directory's ending in `/`. A column
/// before the name gives the type (`!` after it if ignored) when some
/// entry is neither a file nor a directory, or is ignored, or has a name
/// starting with a space (which the indentation would make look deeper):
/// then on every line, and the first line says so.
fn render(tree: &Tree, depth: u32) -> String {
    let dir = shown(&tree.path);
    if tree.tree.is_empty() {
        return format!("'{dir}' is empty");
    }
    let mut lines: Vec<(usize, Kind, bool, String)> = Vec::new();
    fn walk(
        nodes: &[Node],
        at: &str,
        level: usize,
        tree: &Tree,
        out: &mut Vec<(usize, Kind, bool, String)>,
    ) {
        for node in nodes {
            let (name, kind, children) = match node {
                Node::Leaf(n) => (n, None, None),
                Node::Closed(n) => (n, Some(Kind::Directory), None),
                Node::Open(n, c) => (n, Some(Kind::Directory), Some(c)),
            };
            let rel = if at.is_empty() {
                name.clone()
            } else {
                format!("{at}/{name}")
            };
            let kind = kind.unwrap_or_else(|| *tree.types.get(&rel).unwrap_or(&Kind::File));
            let key = if kind == Kind::Directory {
                format!("{rel}/")
            } else {
                rel.clone()
            };
            let ignored = tree.ignored.contains(&key);
            out.push((level, kind, ignored, name.clone()));
            if let Some(children) = children {
                walk(children, &rel, level + 1, tree, out);
            }
        }
    }
    walk(&tree.tree, "", 0, tree, &mut lines);
    let marks = !tree.types.is_empty()
        || !tree.ignored.is_empty()
        || lines.iter().any(|(_, _, _, n)| n.starts_with(' '));
    let n = tree.entries;
    let mut out = format!(
        "'{dir}': {n} {}, depth {depth}, directories first, then by name",
        if n == 1 { "entry" } else { "entries" }
    );
    if tree.truncated {
        out.push_str(", cut: the note below names what was left out");
    }
    if marks {
        let mut legend: Vec<String> = Vec::new();
        for kind in [
            Kind::Directory,
            Kind::File,
            Kind::Symlink,
            Kind::Fifo,
            Kind::Socket,
            Kind::CharDevice,
            Kind::BlockDevice,
            Kind::Unknown,
        ] {
            if lines.iter().any(|(_, k, _, _)| *k == kind) {
                legend.push(format!("{} {}", letter(kind), kind.name()));
            }
        }
        if !tree.ignored.is_empty() {
            legend.push("then ! if ignored".into());
        }
        out.push_str(&format!("; each line: type ({}), name", legend.join(", ")));
    }
    out.push('\n');
    for (level, kind, ignored, name) in lines {
        for _ in 0..level {
            out.push_str("  ");
        }
        if marks {
            out.push(letter(kind));
            if ignored {
                out.push('!');
            }
            out.push(' ');
        }
        // A directory's slash is part of what text shows (inside the quotes
        // of a quoted name), as in list_directory.
        let slash = if kind == Kind::Directory { "/" } else { "" };
        out.push_str(&shown(&format!("{name}{slash}")));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn met(rel: &str, kind: Kind, depth: u32) -> Met {
        Met {
            rel: rel.into(),
            kind,
            ignored: false,
            depth,
        }
    }

    fn tree_of(entries: &[Met], depth: u32) -> Tree {
        let names: Vec<&str> = entries.iter().map(|m| m.rel.as_str()).collect();
        let open = |m: &Met| m.kind == Kind::Directory && m.depth < depth;
        let types = (entries.iter())
            .filter(|m| !matches!(m.kind, Kind::File | Kind::Directory))
            .map(|m| (m.rel.clone(), m.kind))
            .collect();
        assert!(!names.is_empty());
        Tree {
            path: ".".into(),
            tree: nest(entries, &open),
            entries: entries.len(),
            types,
            ignored: vec![],
            truncated: false,
            unreadable_dirs: 0,
            note: None,
        }
    }

    #[test]
    fn directories_come_first_then_names_in_byte_order() {
        let entries = [
            met("b", Kind::File, 1),
            met("z", Kind::Directory, 1),
            met("A", Kind::File, 1),
            met("a", Kind::Directory, 1),
            met("z/y", Kind::File, 2),
            met("z/x", Kind::Directory, 2),
        ];
        let t = tree_of(&entries, 2);
        assert_eq!(
            serde_json::to_value(&t.tree).unwrap(),
            serde_json::json!([{"a/": []}, {"z/": ["x/", "y"]}, "A", "b"])
        );
        assert_eq!(
            render(&t, 2),
            "'.': 6 entries, depth 2, directories first, then by name\na/\nz/\n  x/\n  y\nA\nb\n"
        );
    }

    #[test]
    fn a_name_that_starts_with_a_space_cannot_pass_for_a_deeper_entry() {
        let entries = [
            met("d", Kind::Directory, 1),
            met("d/x", Kind::File, 2),
            met("  x", Kind::File, 1),
        ];
        let text = render(&tree_of(&entries, 2), 2);
        assert!(
            text.contains("; each line: type (d directory, - file), name\n"),
            "{text}"
        );
        assert!(text.ends_with("d d/\n  - x\n-   x\n"), "{text}");
    }

    #[test]
    fn a_name_with_a_line_break_is_quoted_on_its_line() {
        let entries = [met("a\nd x", Kind::File, 1), met("b", Kind::Directory, 1)];
        let text = render(&tree_of(&entries, 1), 1);
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("\n\"a\\nd x\"\n"), "{text}");
    }
}
