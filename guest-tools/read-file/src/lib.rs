//! `read_file`: a text file whole or by line range; an image or audio file
//! as its content (`media`); with `paths`, several text files (`multiple`).
//!
//! Size is checked with a stat before any read: a whole read of a file over the
//! root's `max_read_bytes` is refused, while a range (`offset`/`limit`, `tail`)
//! of a larger file is streamed and capped at that many bytes. Special files
//! (FIFOs, sockets, devices) are refused by type and never opened. A file with
//! a NUL byte in its first 4 KiB is binary (unless it is UTF-16 text, whose
//! NULs come in a pattern): images are returned as image content, anything
//! else is refused. Text is decoded from its encoding
//! (`loomfs_guest::encoding`: BOM, UTF-8, or a detected legacy encoding), on
//! the whole file for a whole read, on the first 64 KiB for a range; the
//! result names the encoding and line endings when they are not UTF-8 and
//! LF, with a note when it is not UTF-8. Bytes invalid in the encoding are
//! shown as U+FFFD, with a note saying so. A range is cut on the file's line
//! breaks and the byte cap counts the file's bytes (`loomfs_guest::lines`).

mod media;
mod multiple;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use loomfs_guest::content::{image_mime, is_binary};
use loomfs_guest::encoding::{Decoded, Eol, Format, decode_owned, decode_vec, detect};
use loomfs_guest::lines::{
    Taken, TextLines, count_lines, read_head, read_lines, tail_start, utf16_lines, utf16_tail,
};
use loomfs_guest::{
    About, Answer, Context, Kind, PathArgument, Permission, ToolError, human_bytes, io_error,
    locate, shown, special_file,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    /// Relative to the root.
    path: Option<String>,
    /// Several files relative to the root.
    #[schemars(with = "Option<Vec<String>>", length(min = 1, max = 100))]
    paths: Option<Vec<multiple::Item>>,
    /// First line, 1-based.
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    #[schemars(range(min = 1))]
    limit: Option<u64>,
    // The last N lines (its name says it).
    #[schemars(range(min = 1))]
    tail: Option<u64>,
}

/// What a read gives: one text file or image, several files, or a medium.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum ReadResult {
    File(FileRead),
    Files(multiple::Batch),
    Media(media::Media),
}

#[derive(Serialize, JsonSchema)]
struct FileRead {
    path: String,
    /// File size in bytes.
    size: u64,
    /// The text of the lines returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// First line returned, 1-based (absent when none).
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    start_line: u64,
    /// Last line returned (absent when none).
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    end_line: u64,
    /// Lines in the file, when the read reached its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    total_lines: Option<u64>,
    /// True when the byte cap cut the range short.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    truncated: bool,
    /// The text's encoding (WHATWG name: windows-1252, Shift_JIS, GBK, UTF-16LE...), absent
    /// for UTF-8 without BOM; edits and writes keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    /// True when the file starts with a byte order mark (kept by edits and writes).
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    bom: bool,
    /// Line endings of the lines returned: crlf, cr or mixed; absent for LF (or none).
    #[serde(skip_serializing_if = "Option::is_none")]
    eol: Option<Eol>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

const DESCRIPTION: &str = "Text files, whole or by lines; paths reads several. Images and audio come as such; \
    documents: read_document. Over the root's read limit, only by lines.";

loomfs_guest::tool!(ReadFile(Args) -> ReadResult, {
    About::new("read_file", DESCRIPTION, Permission::Read).paths(vec![
        PathArgument {
            root_field: "root".into(),
            root_fallback: None,
            path_field: "path".into(),
            permission: Permission::Read,
            across_roots: None,
            optional: true,
        },
        PathArgument {
            root_field: "root".into(),
            root_fallback: None,
            path_field: "paths[]".into(),
            permission: Permission::Read,
            across_roots: None,
            optional: true,
        },
    ])
});

fn call(ctx: Context, args: Args) -> Result<Answer<ReadResult>, ToolError> {
    let Args {
        root,
        path,
        paths,
        offset,
        limit,
        tail,
    } = args;
    match (path, paths) {
        (None, Some(paths)) => {
            if tail.is_some() {
                return Err(ToolError::InvalidArguments(
                    "'tail' reads one file: give 'path', not 'paths'".into(),
                ));
            }
            let args = multiple::Args {
                root,
                paths,
                offset,
                limit,
            };
            multiple::call(ctx, args).map(|a| a.map(ReadResult::Files))
        }
        (Some(path), None) => read_one(&ctx, &root, &path, Range::new(offset, limit, tail)?),
        (Some(_), Some(_)) => Err(ToolError::InvalidArguments(
            "give 'path' (one file) or 'paths' (several), not both".into(),
        )),
        (None, None) => Err(ToolError::InvalidArguments(
            "missing 'path' (or 'paths' for several files)".into(),
        )),
    }
}

/// One file, whole or by `range`.
fn read_one(
    ctx: &Context,
    root: &str,
    path: &str,
    range: Range,
) -> Result<Answer<ReadResult>, ToolError> {
    let at = locate(ctx, root, path)?;
    let rel = at.rel.as_str();
    let max = at.mount.max_read_bytes;

    // Open first, then look at the open file: one path lookup. The
    // host refuses to open special files (FIFO, socket, device), so an
    // open can never block; a refusal is named by a stat.
    let mut file = File::open(&at.full).map_err(|e| match Kind::at(&at.full, true) {
        kind if kind.is_special() && kind != Kind::Unknown => special_file(rel, kind, "opened"),
        _ => io_error(rel, &e),
    })?;
    let meta = file.metadata().map_err(|e| io_error(rel, &e))?;
    let kind = Kind::of(meta.file_type(), &at.full, true);
    if kind == Kind::Directory {
        return Err(ToolError::Refused(format!(
            "'{}' is a directory; use list_directory",
            at.shown()
        )));
    }
    if kind != Kind::File {
        return Err(special_file(rel, kind, "opened"));
    }
    let size = meta.len();
    if range.is_whole() && size > max {
        return Err(ToolError::Refused(format!(
            "'{}' is {}, over this root's read limit of {}; read part of it with \
             offset/limit or tail",
            at.shown(),
            human_bytes(size),
            human_bytes(max)
        )));
    }
    let lines = match range {
        Range::Whole => return read_whole(file, rel, size, max),
        Range::Lines { offset, limit } => match check_head(&mut file, rel, size)? {
            f if f.is_utf16() => utf16_lines(file, f, offset, limit, max),
            f => read_lines(file, offset, limit, max).map(|t| t.decode(f)),
        },
        Range::Tail(n) => match check_head(&mut file, rel, size)? {
            f if f.is_utf16() => utf16_tail(file, size, f, n, max),
            f => read_tail(file, size, n, max).map(|t| t.decode(f)),
        },
    }
    .map_err(|e| io_error(rel, &e))?;
    Ok(text_output(rel, size, lines).map(ReadResult::File))
}

/// One read of a whole file: an image or other binary file goes to
/// `media`, text is decoded.
fn read_whole(
    mut file: File,
    rel: &str,
    size: u64,
    max: u64,
) -> Result<Answer<ReadResult>, ToolError> {
    let mut bytes = Vec::with_capacity(size as usize);
    file.by_ref()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(rel, &e))?;
    if image_mime(&bytes).is_some() || is_binary(&bytes) {
        if bytes.len() as u64 > max {
            return Err(ToolError::Refused(format!(
                "'{}' grew past this root's read limit while being read",
                shown(rel)
            )));
        }
        return media::answer(rel, bytes).map(|a| a.map(ReadResult::Media));
    }
    Ok(text_output(rel, size, whole(bytes, max)).map(ReadResult::File))
}

/// Refuses a range read of an image or a binary file, then rewinds; the
/// encoding, detected on the head.
fn check_head(file: &mut File, rel: &str, size: u64) -> Result<Format, ToolError> {
    let head = read_head(file).map_err(|e| io_error(rel, &e))?;
    if image_mime(&head).is_some() {
        return Err(ToolError::Refused(format!(
            "'{}' is an image: read it whole, without offset/limit/tail",
            shown(rel)
        )));
    }
    if is_binary(&head) {
        return Err(binary(rel, size));
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| io_error(rel, &e))?;
    Ok(detect(&head, head.len() as u64 >= size))
}

/// Which part of the file the call asks for.
enum Range {
    Whole,
    Lines { offset: u64, limit: Option<u64> },
    Tail(u64),
}

impl Range {
    fn new(offset: Option<u64>, limit: Option<u64>, tail: Option<u64>) -> Result<Range, ToolError> {
        let positive = |name: &str, v: Option<u64>| match v {
            Some(0) => Err(ToolError::InvalidArguments(format!(
                "'{name}' must be at least 1"
            ))),
            other => Ok(other),
        };
        let offset = positive("offset", offset)?;
        let limit = positive("limit", limit)?;
        let tail = positive("tail", tail)?;
        match (offset, limit, tail) {
            (None, None, None) => Ok(Range::Whole),
            (None, None, Some(n)) => Ok(Range::Tail(n)),
            (_, _, Some(_)) => Err(ToolError::InvalidArguments(
                "'tail' cannot be combined with 'offset' or 'limit'".into(),
            )),
            (offset, limit, None) => Ok(Range::Lines {
                offset: offset.unwrap_or(1),
                limit,
            }),
        }
    }

    fn is_whole(&self) -> bool {
        matches!(self, Range::Whole)
    }
}

fn binary(rel: &str, size: u64) -> ToolError {
    ToolError::Refused(format!(
        "'{}' is a binary file ({}) and is not shown",
        shown(rel),
        human_bytes(size)
    ))
}

/// A whole file read with `take(max + 1)`, decoded: more than `max` bytes
/// means it grew after the size check; then only whole lines up to `max`
/// are kept.
fn whole(mut bytes: Vec<u8>, max: u64) -> TextLines {
    let grew = bytes.len() as u64 > max;
    bytes.truncate(max as usize);
    let file_bytes = bytes.len() as u64;
    let Decoded {
        mut text,
        format,
        malformed,
    } = if grew {
        // Only whole lines: cut on the bytes where a line break is one
        // byte, on the text for UTF-16.
        let format = detect(&bytes, false);
        if !format.is_utf16() {
            bytes.truncate(bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
        }
        let (text, malformed) = decode_vec(bytes, format);
        Decoded {
            text,
            format,
            malformed,
        }
    } else {
        decode_owned(bytes, true)
    };
    if grew && format.is_utf16() {
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    let lines = count_lines(text.as_bytes());
    TextLines {
        text,
        format,
        malformed,
        file_bytes,
        start_line: if lines == 0 { 0 } else { 1 },
        end_line: lines,
        total_lines: (!grew).then_some(lines),
        capped: false,
        grew,
    }
}

fn read_tail(mut file: File, size: u64, n: u64, max: u64) -> std::io::Result<Taken> {
    if size <= max {
        let mut all = Vec::new();
        file.take(max + 1).read_to_end(&mut all)?;
        let total = count_lines(&all);
        let start = tail_start(&all, n);
        let bytes = all[start..].to_vec();
        let taken = count_lines(&bytes);
        return Ok(Taken {
            start_line: if taken == 0 { 0 } else { total - taken + 1 },
            end_line: total,
            total_lines: Some(total),
            bytes,
            capped: false,
            grew: false,
        });
    }
    // A large file: read backwards in chunks until n lines or the byte cap.
    const CHUNK: u64 = 64 * 1024;
    let mut pos = size;
    let mut buf: Vec<u8> = Vec::new();
    while pos > 0 && (buf.len() as u64) <= max && count_lines_from_end(&buf) <= n {
        let step = CHUNK.min(pos);
        pos -= step;
        file.seek(SeekFrom::Start(pos))?;
        let mut chunk = vec![0; step as usize];
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
    }
    let mut start = tail_start(&buf, n);
    let mut capped = false;
    if (buf.len() - start) as u64 > max {
        // Keep the last whole lines that fit.
        let cut = buf.len() - max as usize;
        start = buf[cut..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(buf.len(), |i| cut + i + 1);
        capped = true;
    } else if start == 0 && pos > 0 {
        // The first chunk line is probably partial: drop it.
        start = buf.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    }
    let bytes = buf[start..].to_vec();
    let taken = count_lines(&bytes);
    Ok(Taken {
        // Line numbers of a partial tail are unknown without reading the whole file.
        start_line: 0,
        end_line: 0,
        total_lines: None,
        bytes,
        capped: capped || taken < n && pos > 0,
        grew: false,
    })
}

/// Lines fully contained in `buf` when it is the end of a file.
fn count_lines_from_end(buf: &[u8]) -> u64 {
    buf.iter().filter(|&&b| b == b'\n').count() as u64
}

fn text_output(rel: &str, size: u64, taken: TextLines) -> Answer<FileRead> {
    let content = taken.text;
    let format = taken.format;
    let eol = Eol::of(&content).filter(|e| *e != Eol::Lf);
    let mut notes = Vec::new();
    if !format.is_utf8() {
        notes.push(format!(
            "{} text, shown decoded; edits and writes keep its encoding",
            format.describe()
        ));
    }
    if taken.malformed {
        notes.push(format!(
            "the file is not valid {}: invalid bytes are shown as U+FFFD",
            format.name()
        ));
    }
    if taken.capped {
        notes.push(
            "the range was cut short at this root's read limit; ask for fewer lines".to_string(),
        );
    }
    if taken.grew {
        notes.push("the file grew past this root's read limit while being read; only whole lines up to the limit are shown".to_string());
    }
    match (taken.start_line, taken.total_lines) {
        (0, _) if !content.is_empty() => notes.push(format!(
            "last lines of '{}' ({}); line numbers unknown without reading the whole file",
            shown(rel),
            human_bytes(size)
        )),
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
    let result = FileRead {
        path: rel.to_string(),
        size,
        content: Some(content),
        start_line: taken.start_line,
        end_line: taken.end_line,
        total_lines: taken.total_lines,
        truncated: taken.capped || taken.grew,
        encoding: (format != Format::UTF8).then(|| format.name()),
        bom: format.bom,
        eol,
        note: note.clone(),
    };
    let mut text = vec![result.content.clone().unwrap_or_default()];
    text.extend(note);
    Answer {
        text,
        result,
        images: vec![],
    }
}
