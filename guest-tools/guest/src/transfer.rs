//! What `move_file` and `copy_file` share: their argument and result
//! types, the rules for what may stand at the destination, and copying a
//! tree.
//!
//! A destination that exists is replaced only with `overwrite`, only if it
//! is not a directory (a directory is never replaced or merged into); the
//! host keeps its previous content in the trash. A directory is never moved
//! or copied into itself. A tree copy skips symlinks (their targets would
//! mean something else at the new place) and special files, and says so;
//! denied entries are not even seen. A tree is built under a temporary name
//! beside the destination and renamed into place whole, so even under a
//! standalone wasmtime a copy cut short leaves nothing at the destination
//! (under loom-fs the host publishes the call whole anyway).

use std::fs::{self, File};
use std::io;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk::{self, Flow, IgnoreFiles};
use crate::write::{create_parents, temp_beside};
use crate::{Context, Kind, Located, PathArgument, Permission, ToolError, io_error, locate, shown};

/// The arguments of a move or a copy.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferArgs {
    pub root: String,
    /// Relative to the root.
    pub source: String,
    /// Relative to destination_root (default: root).
    pub destination: String,
    #[serde(default)]
    pub destination_root: Option<String>,
    #[serde(default)]
    pub overwrite: bool,
}

/// The two path arguments: the source with `source_op` (and, for a move,
/// delete when the destination is another root), the destination with write.
pub fn path_arguments(
    source_op: Permission,
    across_roots: Option<Permission>,
) -> Vec<PathArgument> {
    vec![
        PathArgument {
            root_field: "root".into(),
            root_fallback: None,
            path_field: "source".into(),
            permission: source_op,
            across_roots,
            optional: false,
        },
        PathArgument {
            root_field: "destination_root".into(),
            root_fallback: Some("root".into()),
            path_field: "destination".into(),
            permission: Permission::Write,
            across_roots: None,
            optional: false,
        },
    ]
}

/// The result of a move or copy.
#[derive(Serialize, JsonSchema, Default)]
pub struct Transferred {
    pub source: String,
    pub destination: String,
    pub destination_root: String,
    /// Type of the source.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub overwritten: bool,
    /// Where the replaced destination was kept (root-relative, in the trash of the destination
    /// root); filled in by the host.
    pub previous: Option<String>,
    pub files: u64,
    pub directories: u64,
    pub bytes: u64,
    /// Entries of a directory not copied (symlinks, special files).
    pub skipped: Vec<String>,
    /// `skipped` as text shows it: each name by the rule, then its type.
    #[serde(skip)]
    pub skipped_shown: Vec<String>,
}

/// Both ends located under their mounts.
pub fn locate_ends<'a>(
    ctx: &'a Context,
    args: &TransferArgs,
) -> Result<(Located<'a>, Located<'a>), ToolError> {
    let source = locate(ctx, &args.root, &args.source)?;
    let dest_root = args.destination_root.as_deref().unwrap_or(&args.root);
    let destination = locate(ctx, dest_root, &args.destination)?;
    Ok((source, destination))
}

/// Whether `inner` is `outer` or lies below it, on the same root (lexically:
/// the host has already resolved every symlink on the way).
pub fn within(outer: &Located, inner: &Located) -> bool {
    outer.mount.name == inner.mount.name
        && (outer.rel == "."
            || inner.rel == outer.rel
            || inner.rel.starts_with(&format!("{}/", outer.rel)))
}

/// Checks what stands at the destination. `Ok(true)`: a file or symlink that
/// `overwrite` allows replacing; `Ok(false)`: nothing.
pub fn check_destination(
    destination: &Located,
    source_is_dir: bool,
    overwrite: bool,
) -> Result<bool, ToolError> {
    let refused =
        |why: &str| ToolError::Refused(format!("destination '{}' {why}", destination.shown()));
    match fs::symlink_metadata(&destination.full) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error(&destination.rel, &e)),
        Ok(meta) if meta.is_dir() => Err(refused(
            "is an existing directory; a directory is never replaced (name a new path)",
        )),
        Ok(_) if source_is_dir => Err(refused(
            "exists; a directory is only moved or copied to a new path",
        )),
        Ok(_) if !overwrite => Err(refused(
            "exists; pass overwrite: true to replace it (its content is then kept in the trash)",
        )),
        Ok(_) => Ok(true),
    }
}

/// Copies the directory `source` to the new path `destination`: built
/// under a temporary name beside it and renamed into place whole.
pub fn copy_tree(
    source: &Located,
    destination: &Located,
    out: &mut Transferred,
) -> Result<(), ToolError> {
    // List everything first: a copy never sees its own output.
    let mut entries = Vec::new();
    let stats = walk::breadth_first(&source.full, &source.rel, u32::MAX, IgnoreFiles::Off, |e| {
        entries.push((e.rel.clone(), e.kind, e.full()));
        Flow::Continue
    })?;
    // What the walk could not see is not copied: said, never silent.
    for (n, what) in [
        (stats.dirs_unreadable, "directories that could not be read"),
        (stats.entries_skipped, "entries whose names are not UTF-8"),
    ] {
        if n > 0 {
            out.skipped.push(format!("{n} {what}"));
            out.skipped_shown.push(format!("{n} {what}"));
        }
    }
    create_parents(&destination.full, &destination.rel)?;
    let built = temp_beside(&destination.full);
    let copied = copy_entries(source, &built, &destination.rel, &entries, out).and_then(|()| {
        // A directory that appeared meanwhile is never replaced, even an
        // empty one (which a rename would).
        if fs::symlink_metadata(&destination.full).is_ok() {
            return Err(ToolError::Refused(format!(
                "destination '{}' appeared while the copy was made; nothing was copied there",
                destination.shown()
            )));
        }
        fs::rename(&built, &destination.full).map_err(|e| io_error(&destination.rel, &e))
    });
    if copied.is_err() {
        let _ = fs::remove_dir_all(&built);
    }
    copied
}

/// Copies the listed `entries` of `source` to the new directory `to`
/// (`rel_to` in messages), a tree no one sees yet.
fn copy_entries(
    source: &Located,
    to: &Path,
    rel_to: &str,
    entries: &[(String, Kind, std::path::PathBuf)],
    out: &mut Transferred,
) -> Result<(), ToolError> {
    let destination = to;
    fs::create_dir(destination).map_err(|e| io_error(rel_to, &e))?;
    out.directories += 1;
    let prefix = if source.rel == "." {
        String::new()
    } else {
        format!("{}/", source.rel)
    };
    for (rel, kind, from) in entries {
        let inside = rel.strip_prefix(&prefix).unwrap_or(rel);
        let to = destination.join(inside);
        match kind {
            Kind::Directory => {
                fs::create_dir(&to).map_err(|e| io_error(rel, &e))?;
                out.directories += 1;
            }
            Kind::File => {
                out.bytes += copy_straight(from, &to).map_err(|e| io_error(rel, &e))?;
                out.files += 1;
            }
            other => {
                out.skipped.push(format!("{rel} ({})", other.name()));
                out.skipped_shown
                    .push(format!("{} ({})", shown(rel), other.name()));
            }
        }
    }
    Ok(())
}

/// Copies a file to a new path of a tree no one sees yet.
fn copy_straight(from: &Path, to: &Path) -> io::Result<u64> {
    let mut source = File::open(from)?;
    let mut target = File::create_new(to)?;
    let bytes = io::copy(&mut source, &mut target)?;
    target.sync_all()?;
    Ok(bytes)
}
