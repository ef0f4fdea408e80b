//! `get_file_info`: metadata of one path (type, size, times, links).
//!
//! A symlink inside the root is reported as such, with the type of what it
//! points to. A target that cannot be reached reads the same whether it is
//! missing or outside the root, so the answer never maps the disk beyond it.

use loomfs_guest::{
    About, Answer, Context, Kind, PathArgs, Permission, ToolError, human_bytes, io_error, locate,
    modified, sys, timestamp,
};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Info {
    path: String,
    /// Type of what the path names, symlinks followed.
    #[serde(rename = "type")]
    kind: &'static str,
    is_symlink: bool,
    /// Bytes, for files.
    size: Option<u64>,
    modified: Option<String>,
    accessed: Option<String>,
    created: Option<String>,
    /// Hard link count.
    links: Option<u64>,
    note: Option<String>,
}

const DESCRIPTION: &str = "Metadata of a file or directory ('.' for the root): type, size, modification/access \
    times, hard link count, and whether it is a symlink.";

loomfs_guest::tool!(GetFileInfo(PathArgs) -> Info, {
    About::new("get_file_info", DESCRIPTION, Permission::Read)
});

fn call(ctx: Context, args: PathArgs) -> Result<Answer<Info>, ToolError> {
    let at = locate(&ctx, &args.root, &args.path)?;
    let own = std::fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
    let is_symlink = own.file_type().is_symlink();
    let (meta, note) = if is_symlink {
        match std::fs::metadata(&at.full) {
            Ok(target) => (target, None),
            Err(_) => (
                own,
                Some("symlink whose target cannot be reached (missing or outside the root)"),
            ),
        }
    } else {
        (own, None)
    };
    let kind = Kind::of(meta.file_type(), &at.full, is_symlink);
    let info = Info {
        path: at.rel.clone(),
        kind: kind.name(),
        is_symlink,
        size: (kind == Kind::File).then_some(meta.len()),
        modified: modified(&meta),
        accessed: timestamp(meta.accessed()),
        created: timestamp(meta.created()),
        links: if is_symlink && note.is_some() {
            None
        } else {
            sys::link_count(&at.full)
        },
        note: note.map(str::to_string),
    };
    let mut text = format!("{}: {}", at.shown(), info.kind);
    if is_symlink {
        text.push_str(" (via symlink)");
    }
    if let Some(size) = info.size {
        text.push_str(&format!(", {} ({size} bytes)", human_bytes(size)));
    }
    if let Some(m) = &info.modified {
        text.push_str(&format!(", modified {m}"));
    }
    if let Some(n) = &info.note {
        text.push_str(&format!("; {n}"));
    }
    Ok(Answer::new(text, info))
}
