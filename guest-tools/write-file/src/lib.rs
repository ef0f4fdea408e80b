//! `write_file`: create, replace or append to a text file.
//!
//! Every mode writes atomically (a temporary file out of sight, fsync,
//! rename; see `loomfs_guest::write`): a crash leaves the old file or the
//! new one, never part of either. `overwrite` (default) first keeps the
//! previous content in the root's trash; `create` never replaces anything;
//! `append` writes the file's content and the new text to the temporary
//! file, so an append is whole or not at all, and keeps the previous
//! version like an overwrite. It refuses a file with other hard links,
//! which would keep the old content. Missing parent directories are
//! created. The root itself and directories are never written.

use std::io::Write;

use loomfs_guest::write::{Publish, Published, replace, replace_checked};
use loomfs_guest::{
    About, Answer, Context, Kind, Located, Permission, ToolError, human_bytes, io_error, locate,
    shown, special_file, sys,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Overwrite,
    Create,
    Append,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Name of the root (see list_roots).
    root: String,
    /// File path relative to the root; missing parent directories are created.
    path: String,
    /// The text to write.
    content: String,
    /// overwrite (default): replace the file, keeping the old content in the trash; create: fail
    /// if the file exists; append: add to the end.
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Serialize, JsonSchema)]
struct Written {
    path: String,
    mode: Mode,
    /// Bytes written.
    bytes: u64,
    /// Whether the file is new.
    created: bool,
    /// Where the previous content was kept (root-relative, in the trash).
    previous: Option<String>,
}

const DESCRIPTION: &str = "Write a text file: replace it (mode overwrite, the default; the old \
    content is kept in the root's trash), create it only if new (mode \
    create), or append to it. Writes are atomic; missing parent \
    directories are created.";

loomfs_guest::tool!(WriteFile(Args) -> Written, {
    About::new("write_file", DESCRIPTION, Permission::Write)
});

fn call(ctx: Context, args: Args) -> Result<Answer<Written>, ToolError> {
    let mode = args.mode.unwrap_or(Mode::Overwrite);
    let at = locate(&ctx, &args.root, &args.path)?;
    let rel = at.rel.as_str();
    // What stands at the path, the entry itself (a symlink, dangling or
    // not, counts: it is never silently lost).
    let entry = match std::fs::symlink_metadata(&at.full) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(rel, &e)),
    };
    if let Some(meta) = &entry {
        let shown = at.shown();
        let kind = Kind::of(meta.file_type(), &at.full, false);
        let target = std::fs::metadata(&at.full)
            .map(|m| Kind::of(m.file_type(), &at.full, true))
            .unwrap_or(kind);
        if target == Kind::Directory {
            return Err(ToolError::Refused(format!(
                "'{shown}' is a directory; a directory is never written"
            )));
        }
        if target.is_special() && target != Kind::Symlink {
            return Err(special_file(rel, target, "written"));
        }
        if mode == Mode::Create {
            return Err(ToolError::Refused(format!(
                "'{shown}' already exists (mode create); use mode overwrite to replace it"
            )));
        }
    }
    let content = args.content.as_bytes();
    let appends = mode == Mode::Append && entry.as_ref().is_some_and(|m| m.file_type().is_file());
    let written = if appends {
        append(&at, content)?
    } else {
        // Appending to nothing (or to a symlink, which is kept) writes a
        // new file, like create.
        let publish = match (mode, &entry) {
            (Mode::Overwrite, _) | (Mode::Append, Some(_)) => Publish::Replace,
            _ => Publish::New,
        };
        let r = replace(&at, publish, |f| {
            f.write_all(content)?;
            Ok(content.len() as u64)
        })?;
        Written {
            path: rel.to_string(),
            mode,
            bytes: r.bytes,
            created: r.created,
            previous: r.previous,
        }
    };
    let mut text = format!(
        "wrote {} to '{}'{}",
        human_bytes(written.bytes),
        at.shown(),
        if written.created { " (new file)" } else { "" }
    );
    if let Some(p) = &written.previous {
        text.push_str(&format!("; the previous content is kept at {}", shown(p)));
    }
    Ok(Answer::new(text, written))
}

/// How many times an append is tried against a file that keeps changing.
const MAX_ATTEMPTS: u32 = 4;

/// Appends `content` to the file at `at`: its content and then `content`
/// to a temporary file, published over it (see the module).
fn append(at: &Located, content: &[u8]) -> Result<Written, ToolError> {
    let rel = at.rel.as_str();
    if sys::link_count(&at.full).is_some_and(|n| n > 1) {
        return Err(ToolError::Refused(format!(
            "'{}' has other hard links, which would keep the content without the \
             appended text; write it with mode overwrite instead",
            at.shown()
        )));
    }
    for attempt in 1..=MAX_ATTEMPTS {
        let mut from = std::fs::File::open(&at.full).map_err(|e| io_error(rel, &e))?;
        let published = replace_checked(at, Publish::Replace, attempt, |f| {
            std::io::copy(&mut from, f)?;
            f.write_all(content)?;
            Ok(content.len() as u64)
        })?;
        if let Published::Done(done) = published {
            return Ok(Written {
                path: rel.to_string(),
                mode: Mode::Append,
                bytes: done.bytes,
                created: false,
                previous: done.previous,
            });
        }
    }
    Err(ToolError::Refused(format!(
        "'{}' kept changing while the text was appended ({MAX_ATTEMPTS} tries); nothing was \
         written; try again",
        at.shown()
    )))
}
