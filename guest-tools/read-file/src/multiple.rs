//! `read_file` with `paths`: several text files of one root in one call.
//!
//! Each file is opened, checked and read on its own, as `read_file` would
//! (special files refused by type, binary files refused, a file over the
//! root's `max_read_bytes` read only by range); a file that fails is an error
//! line of its own and the others still come back. A path the host refused
//! arrives as `{"path", "refused"}` (see the WIT's `path-field`) and is never
//! opened. The whole call reads at most the root's `max_read_bytes`: files are
//! taken in the order given, and one that no longer fits in what is left is
//! named as cut, not read in part. The call fails only when every file did.
//! Each file is decoded from its own encoding, as `read_file` does, and the
//! read limit counts the files' bytes.

use std::fs::File;
use std::io::{Seek, SeekFrom};

use loomfs_guest::content::is_binary;
use loomfs_guest::encoding::{Eol, Format, detect};
use loomfs_guest::lines::{TextLines, read_head, read_lines, utf16_lines};
use loomfs_guest::{
    Answer, Context, Kind, ToolError, human_bytes, io_error, locate, shown, special_file,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most files one call reads.
const MAX_FILES: usize = 100;

/// Its part of `read_file`'s arguments.
pub(crate) struct Args {
    pub(crate) root: String,
    pub(crate) paths: Vec<Item>,
    pub(crate) offset: Option<u64>,
    pub(crate) limit: Option<u64>,
}

/// An element of `paths`: a path, or the host's refusal of one.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Item {
    Path(String),
    Refused(Refused),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Refused {
    path: String,
    refused: String,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct Batch {
    /// One object per path asked, in order: path, then either content (with size, start_line, end_line, total_lines when the read reached the end, encoding and bom when not UTF-8 without BOM, eol when not LF, note), error, or cut (true: it did not fit in what was left of the call's read limit).
    #[schemars(schema_with = "loomfs_guest::tool::any_array")]
    files: Vec<FileRead>,
    /// Files read.
    read: u64,
    /// Files that failed.
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    failed: u64,
    /// Files left out because the call's read limit was reached.
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    cut: u64,
}

#[derive(Serialize, Default)]
struct FileRead {
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    start_line: u64,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    end_line: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    bom: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    eol: Option<Eol>,
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    cut: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

pub(crate) fn call(ctx: Context, args: Args) -> Result<Answer<Batch>, ToolError> {
    if args.paths.is_empty() || args.paths.len() > MAX_FILES {
        return Err(ToolError::InvalidArguments(format!(
            "'paths' must name 1 to {MAX_FILES} files, not {}",
            args.paths.len()
        )));
    }
    for (name, value) in [("offset", args.offset), ("limit", args.limit)] {
        if value == Some(0) {
            return Err(ToolError::InvalidArguments(format!(
                "'{name}' must be at least 1"
            )));
        }
    }
    let range = Range {
        offset: args.offset.unwrap_or(1),
        limit: args.limit,
        whole: args.offset.is_none() && args.limit.is_none(),
    };
    // Known once a path is located: every path is on the one root.
    let mut budget: Option<(u64, u64)> = None;
    let mut text = Vec::with_capacity(args.paths.len() + 1);
    let mut batch = Batch {
        files: Vec::with_capacity(args.paths.len()),
        read: 0,
        failed: 0,
        cut: 0,
    };
    for item in &args.paths {
        let (file, line) = match item {
            Item::Refused(r) => failed(&r.path, r.refused.clone()),
            Item::Path(path) => read_one(&ctx, &args.root, path, &range, &mut budget),
        };
        if file.error.is_some() {
            batch.failed += 1;
        } else if file.cut {
            batch.cut += 1;
        } else {
            batch.read += 1;
        }
        batch.files.push(file);
        text.push(line);
    }
    if batch.read == 0 && batch.cut == 0 {
        return Err(ToolError::Refused(format!(
            "no file could be read:\n{}",
            text.join("\n")
        )));
    }
    if batch.failed + batch.cut > 0 {
        let (max, _) = budget.unwrap_or_default();
        let mut summary = format!("{} of {} files read", batch.read, batch.files.len());
        if batch.failed > 0 {
            summary.push_str(&format!("; {} failed", batch.failed));
        }
        if batch.cut > 0 {
            summary.push_str(&format!(
                "; {} cut: this call reads at most {} in all (the root's read limit)",
                batch.cut,
                human_bytes(max)
            ));
        }
        text.push(summary);
    }
    Ok(Answer {
        text,
        result: batch,
        images: vec![],
    })
}

/// The line range asked of every file.
struct Range {
    offset: u64,
    limit: Option<u64>,
    whole: bool,
}

/// One file: its structured entry and its text block (a first line naming
/// it, then its lines; or one line saying why it is not there).
fn read_one(
    ctx: &Context,
    root: &str,
    path: &str,
    range: &Range,
    budget: &mut Option<(u64, u64)>,
) -> (FileRead, String) {
    let at = match locate(ctx, root, path) {
        Ok(at) => at,
        Err(e) => return failed(path, message(e)),
    };
    let rel = at.rel.as_str();
    let (max, left) = *budget.get_or_insert((at.mount.max_read_bytes, at.mount.max_read_bytes));
    let mut file = match open(&at.full, rel) {
        Ok(file) => file,
        Err(e) => return failed(rel, message(e)),
    };
    let size = match file.metadata() {
        Ok(meta) => meta.len(),
        Err(e) => return failed(rel, message(io_error(rel, &e))),
    };
    if range.whole && size > max {
        return failed(
            rel,
            format!(
                "{} is over this root's read limit of {}; read part of it with read_file \
                 offset/limit",
                human_bytes(size),
                human_bytes(max)
            ),
        );
    }
    let head = match read_head(&mut file) {
        Ok(head) => head,
        Err(e) => return failed(rel, message(io_error(rel, &e))),
    };
    if is_binary(&head) {
        return failed(
            rel,
            format!(
                "a binary file ({}), not shown; images come back with read_file",
                human_bytes(size)
            ),
        );
    }
    if range.whole && size > left {
        return cut(rel, size, left);
    }
    let format = detect(&head, head.len() as u64 >= size);
    let taken = file.seek(SeekFrom::Start(0)).and_then(|_| {
        if format.is_utf16() {
            utf16_lines(file, format, range.offset, range.limit, left)
        } else {
            read_lines(file, range.offset, range.limit, left).map(|t| t.decode(format))
        }
    });
    let taken = match taken {
        Ok(taken) => taken,
        Err(e) => return failed(rel, message(io_error(rel, &e))),
    };
    if taken.capped {
        return cut(rel, size, left);
    }
    *budget = Some((max, left - taken.file_bytes.min(left)));
    shown_file(rel, size, taken)
}

/// Opens a file for reading; a directory or a special file is refused.
fn open(full: &std::path::Path, rel: &str) -> Result<File, ToolError> {
    // The host never opens a special file (it cannot block); a stat names it.
    let file = File::open(full).map_err(|e| match Kind::at(full, true) {
        kind if kind.is_special() && kind != Kind::Unknown => special_file(rel, kind, "opened"),
        _ => io_error(rel, &e),
    })?;
    let meta = file.metadata().map_err(|e| io_error(rel, &e))?;
    match Kind::of(meta.file_type(), full, true) {
        Kind::File => Ok(file),
        Kind::Directory => Err(ToolError::Refused(format!(
            "'{}' is a directory; use list_directory",
            shown(rel)
        ))),
        kind => Err(special_file(rel, kind, "opened")),
    }
}

fn message(e: ToolError) -> String {
    match e {
        ToolError::InvalidArguments(m)
        | ToolError::NotFound(m)
        | ToolError::Refused(m)
        | ToolError::Io(m) => m,
    }
}

fn failed(path: &str, error: String) -> (FileRead, String) {
    let line = format!("{}: error: {error}", shown(path));
    let file = FileRead {
        path: path.to_string(),
        error: Some(error),
        ..FileRead::default()
    };
    (file, line)
}

fn cut(rel: &str, size: u64, left: u64) -> (FileRead, String) {
    let line = format!(
        "{}: cut: {} do not fit in the {} left of this call's read limit; read it on its own",
        shown(rel),
        human_bytes(size),
        human_bytes(left)
    );
    let file = FileRead {
        path: rel.to_string(),
        size: Some(size),
        cut: true,
        ..FileRead::default()
    };
    (file, line)
}

fn shown_file(rel: &str, size: u64, taken: TextLines) -> (FileRead, String) {
    let content = taken.text;
    let format = taken.format;
    let mut notes = Vec::new();
    if !format.is_utf8() {
        notes.push(format!("{}, shown decoded", format.describe()));
    }
    if taken.malformed {
        notes.push(format!(
            "not valid {}: invalid bytes shown as U+FFFD",
            format.name()
        ));
    }
    match (taken.start_line, taken.total_lines) {
        (0, Some(total)) if total > 0 => {
            notes.push(format!("no lines in the range; {total} in the file"))
        }
        (start, Some(total)) if start > 1 || taken.end_line < total => {
            notes.push(format!("lines {start}-{} of {total}", taken.end_line))
        }
        (start, None) if start > 0 => notes.push(format!(
            "lines {start}-{} of a file of {}",
            taken.end_line,
            human_bytes(size)
        )),
        _ => {}
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let header = match &note {
        Some(note) => format!("{} ({note}):", shown(rel)),
        None => format!("{}:", shown(rel)),
    };
    let text = format!("{header}\n{content}");
    let eol = Eol::of(&content).filter(|e| *e != Eol::Lf);
    let file = FileRead {
        path: rel.to_string(),
        size: Some(size),
        content: Some(content),
        start_line: taken.start_line,
        end_line: taken.end_line,
        total_lines: taken.total_lines,
        encoding: (format != Format::UTF8).then(|| format.name()),
        bom: format.bom,
        eol,
        note,
        ..FileRead::default()
    };
    (file, text)
}
