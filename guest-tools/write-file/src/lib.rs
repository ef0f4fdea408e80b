//! `write_file`: create, replace or append to a text file.
//!
//! Every mode writes atomically (a temporary file, fsync, rename; see
//! `loomfs_guest::write`): a crash leaves the old file or the new one,
//! never part of either. `overwrite` (default) replaces the file, whose
//! previous content the host keeps in the root's trash; `create` never
//! replaces anything; `append` writes the file's content and the new text
//! to the temporary file, so an append is whole or not at all, and the
//! host keeps the previous version like an overwrite's. It refuses a file
//! with other hard links, which would keep the old content. Missing parent
//! directories are created. The root itself and directories are never
//! written.
//!
//! Text is written in the existing file's encoding and BOM
//! (`loomfs_guest::encoding`, detected on its first 64 KiB), or in the
//! `encoding` the call names (for a new file, UTF-8 by default); an append
//! must keep the file's. Into a file whose line breaks are all CRLF, the
//! content's LFs are written as CRLF, "as it was"; `line_endings` asks for
//! LF or CRLF whatever the file has. A character the encoding cannot hold
//! is refused, naming it and where, and nothing is written.

use std::borrow::Cow;
use std::io::{Read, Write};

use loomfs_guest::content::is_binary;
use loomfs_guest::encoding::{self, Eol, Format};
use loomfs_guest::lines::DETECT_BYTES;
use loomfs_guest::write::{Publish, replace};
use loomfs_guest::{
    About, Answer, Context, Kind, Located, Permission, ToolError, human_bytes, io_error, locate,
    special_file, sys,
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
    root: String,
    /// Relative to the root.
    path: String,
    content: String,
    #[serde(default)]
    mode: Option<Mode>,
    /// WHATWG label; default: the file's.
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    line_endings: Option<LineEndings>,
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum LineEndings {
    Lf,
    Crlf,
}

#[derive(Serialize, JsonSchema)]
struct Written {
    path: String,
    mode: Mode,
    /// Bytes written.
    bytes: u64,
    /// Whether the file is new.
    created: bool,
    /// Where the previous content was kept (root-relative, in the trash); filled in by the host.
    previous: Option<String>,
    /// The encoding written (absent for UTF-8 without BOM).
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    /// Set when the content's line breaks were rewritten: lf or crlf.
    #[serde(skip_serializing_if = "Option::is_none")]
    eol: Option<Eol>,
}

const DESCRIPTION: &str = "Write a text file, with missing parents: mode overwrite (default), create (fail if it \
    exists) or append. An existing file keeps its encoding, BOM and CRLF unless told.";

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
    let appends = mode == Mode::Append && entry.as_ref().is_some_and(|m| m.file_type().is_file());
    let existing = match &entry {
        Some(_) if mode != Mode::Create => existing_text(&at),
        _ => None,
    };
    let named = (args.encoding.as_deref())
        .map(Format::for_label)
        .transpose()
        .map_err(ToolError::InvalidArguments)?;
    let format = match (named, existing) {
        (Some(n), Some((e, _))) if n.encoding == e.encoding => e,
        (Some(n), Some((e, _))) if appends => {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is {}: an append writes in the file's encoding, not {}; convert it \
                 with mode overwrite",
                at.shown(),
                e.describe(),
                n.name()
            )));
        }
        (Some(n), _) => n,
        (None, Some((e, _))) => e,
        (None, None) => Format::UTF8,
    };
    let eol = match args.line_endings {
        Some(LineEndings::Lf) => Some(Eol::Lf),
        Some(LineEndings::Crlf) => Some(Eol::Crlf),
        None => existing
            .and_then(|(_, eol)| eol)
            .filter(|e| *e == Eol::Crlf),
    };
    let text = eol.map_or(Cow::Borrowed(args.content.as_str()), |e| {
        e.apply(&args.content)
    });
    let rewrote = (text != args.content).then_some(eol).flatten();
    // An append adds no second BOM.
    let body = Format {
        bom: format.bom && !appends,
        ..format
    };
    let bytes = encoding::encode(&text, body).map_err(|e| {
        ToolError::Refused(format!(
            "{e}; nothing was written to '{}'. Use characters {} has, or name an encoding that \
             has it, such as \"encoding\": \"UTF-8\"",
            at.shown(),
            format.name()
        ))
    })?;
    let content = bytes.as_slice();
    let mut written = if appends {
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
            previous: None,
            encoding: None,
            eol: None,
        }
    };
    written.encoding = (format != Format::UTF8).then(|| format.name());
    written.eol = rewrote;
    let mut text = format!(
        "wrote {} to '{}'{}",
        human_bytes(written.bytes),
        at.shown(),
        if written.created { " (new file)" } else { "" }
    );
    if format != Format::UTF8 {
        let whose = match (named, existing) {
            (None, Some(_)) => ", the file's",
            _ => "",
        };
        text.push_str(&format!(" in {}{whose}", format.describe()));
    }
    if let Some(eol) = rewrote {
        text.push_str(&format!(
            "; line breaks written as {}{}",
            eol.name().to_uppercase(),
            if args.line_endings.is_none() {
                ", the file's"
            } else {
                ""
            }
        ));
    }
    Ok(Answer::new(text, written))
}

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
    let mut from = std::fs::File::open(&at.full).map_err(|e| io_error(rel, &e))?;
    let done = replace(at, Publish::Replace, |f| {
        std::io::copy(&mut from, f)?;
        f.write_all(content)?;
        Ok(content.len() as u64)
    })?;
    Ok(Written {
        path: rel.to_string(),
        mode: Mode::Append,
        bytes: done.bytes,
        created: false,
        previous: None,
        encoding: None,
        eol: None,
    })
}

/// The encoding of the text file at `at` and its line endings, from its
/// first [`DETECT_BYTES`]; none for what is not a readable text file
/// (a binary file, a dangling symlink), which is written over as UTF-8.
fn existing_text(at: &Located) -> Option<(Format, Option<Eol>)> {
    let file = std::fs::File::open(&at.full).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut head = Vec::with_capacity(DETECT_BYTES);
    file.take(DETECT_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .ok()?;
    let complete = head.len() <= DETECT_BYTES;
    head.truncate(DETECT_BYTES);
    if is_binary(&head) {
        return None;
    }
    let format = encoding::detect(&head, complete);
    let (text, _) = encoding::decode_as(&head, format);
    Some((format, Eol::of(&text)))
}
