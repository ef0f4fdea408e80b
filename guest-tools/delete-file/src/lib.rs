//! `delete_file`: a file or a directory (with everything in it) is
//! removed; the host keeps it whole in the root's trash,
//! `<root>/.mcp-trash/<UTC timestamp>/<path>`, from which a person can
//! restore it. The root itself is never deleted.
//!
//! Under loom-fs a directory the call was asked to delete is removed whole
//! by one `remove-directory-at`, with the entries the deny list hides from
//! the tool. Under a standalone wasmtime, where that fails for a directory
//! that is not empty, its entries are removed first (and nothing is kept).

use std::io;

use loomfs_guest::{
    About, Answer, Context, Kind, PathArgs, Permission, ToolError, io_error, locate,
};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Deleted {
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    /// Where it went (root-relative); a person can restore it from there. Filled in by the host.
    trash: Option<String>,
}

const DESCRIPTION: &str = "Delete a file or directory with its contents into the root's trash, where a person can \
    restore it.";

loomfs_guest::tool!(DeleteFile(PathArgs) -> Deleted, {
    About::new("delete_file", DESCRIPTION, Permission::Delete)
});

fn call(ctx: Context, args: PathArgs) -> Result<Answer<Deleted>, ToolError> {
    let at = locate(&ctx, &args.root, &args.path)?;
    let meta = std::fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
    let kind = Kind::of(meta.file_type(), &at.full, false);
    let removed = if meta.is_dir() {
        match std::fs::remove_dir(&at.full) {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
                std::fs::remove_dir_all(&at.full)
            }
            done => done,
        }
    } else {
        std::fs::remove_file(&at.full)
    };
    match removed {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            return Err(ToolError::Refused(format!(
                "'{}' is on another filesystem than the trash of root '{}' (one mounted \
                 inside the root), and a directory is only ever moved to the trash whole, \
                 which cannot cross filesystems; nothing was changed",
                at.shown(),
                at.mount.name,
            )));
        }
        Err(e) => return Err(io_error(&at.rel, &e)),
    }
    let text = format!("deleted {} '{}'", kind.name(), at.shown());
    Ok(Answer::new(
        text,
        Deleted {
            path: at.rel.clone(),
            kind: kind.name(),
            trash: None,
        },
    ))
}
