//! `delete_file`: a file or a directory moves to the root's trash,
//! `<root>/.mcp-trash/<UTC timestamp>/<path>`. Nothing is erased; the trash
//! is out of every tool's reach, and the root itself is never deleted.

use loomfs_guest::write::keep_by_move;
use loomfs_guest::{
    About, Answer, Context, Kind, PathArgs, Permission, ToolError, io_error, locate, shown,
};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Deleted {
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    /// Where it went (root-relative); a person can restore it from there.
    trash: String,
}

const DESCRIPTION: &str = "Delete a file or a directory (with its contents) by moving it to the \
    root's trash, from which a person can restore it.";

loomfs_guest::tool!(DeleteFile(PathArgs) -> Deleted, {
    About::new("delete_file", DESCRIPTION, Permission::Delete)
});

fn call(ctx: Context, args: PathArgs) -> Result<Answer<Deleted>, ToolError> {
    let at = locate(&ctx, &args.root, &args.path)?;
    let meta = std::fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
    let kind = Kind::of(meta.file_type(), &at.full, false);
    let trash = keep_by_move(&at)?;
    let result = Deleted {
        path: at.rel.clone(),
        kind: kind.name(),
        trash,
    };
    let text = format!(
        "deleted {} '{}': moved to {}",
        kind.name(),
        at.shown(),
        shown(&result.trash)
    );
    Ok(Answer::new(text, result))
}
