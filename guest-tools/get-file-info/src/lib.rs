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

/// What is known of the path; what is not (or false) is left out.
#[derive(Serialize, JsonSchema)]
struct Info {
    path: String,
    /// Type of what the path names, symlinks followed.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Set when the path is a symlink.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    is_symlink: bool,
    /// Bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    modified: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    accessed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    /// Hard link count.
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

const DESCRIPTION: &str =
    "Type, size, times, link count and symlink flag of a file or directory ('.' is the root).";

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
