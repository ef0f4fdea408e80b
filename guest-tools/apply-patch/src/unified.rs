//! The unified diff, as `diff -u` and git write it.
//!
//! A file starts with `--- OLD` and `+++ NEW` (a tab and a time after the
//! name are dropped; `/dev/null` on one side adds or deletes the file),
//! optionally after git's `diff --git a/OLD b/NEW` and its header lines:
//! `new file mode`, `deleted file mode`, `rename from`/`rename to` (a
//! rename with no hunk is a plain move), `index`, `similarity index`, mode
//! lines (read past: only content is changed). Names may be quoted as git
//! quotes them. `a/` and `b/` are dropped when the old name has the one and
//! the new name the other. Then hunks: `@@ -l,s +l,s @@`, and lines
//! starting with ' ', '-', '+', or `\ No newline at end of file`.
//!
//! Lenient where models are: the line numbers and counts are hints (the
//! counts only tell a removed line `--- x` from the next file's header);
//! an empty line in a hunk is an empty context line; `@@` with no numbers
//! starts a hunk all the same; text before the first file (a commit
//! message, `Index:` lines) is skipped, as `git apply` skips it. Refused:
//! binary patches and copies (`copy from`).

use crate::patch::{Action, FileChange, Hunk, Line, ParseError, cut, error, relative};
use loomfs_guest::shown;

/// Whether `lines` hold a unified diff: a file header somewhere.
pub fn is_unified(lines: &[Line]) -> bool {
    (0..lines.len()).any(|i| starts_file(lines, i))
}

/// Whether a file's header starts at `i`.
fn starts_file(lines: &[Line], i: usize) -> bool {
    lines
        .get(i)
        .is_some_and(|l| l.text.starts_with("diff --git "))
        || header_pair(lines, i)
}

/// `--- OLD` at `i` and `+++ NEW` after it.
fn header_pair(lines: &[Line], i: usize) -> bool {
    let starts = |i: usize, with: &str| lines.get(i).is_some_and(|l| l.text.starts_with(with));
    starts(i, "--- ") && starts(i + 1, "+++ ")
}

/// The file changes of a unified diff (see the module).
pub fn parse(lines: &[Line]) -> Result<Vec<FileChange>, ParseError> {
    let mut i = (0..lines.len())
        .find(|&i| starts_file(lines, i))
        .unwrap_or(lines.len());
    let mut changes = Vec::new();
    while i < lines.len() {
        let text = lines[i].text;
        if text.trim().is_empty() {
            i += 1;
        } else if starts_file(lines, i) {
            let (change, next) = file(lines, i)?;
            changes.push(change);
            i = next;
        } else {
            return Err(error(
                lines[i].n,
                format!(
                    "'{}' is not part of a unified diff: a file starts with '--- PATH' then \
                     '+++ PATH' (or 'diff --git'), a hunk with '@@ -l,s +l,s @@', and a hunk's \
                     lines with ' ', '-' or '+'",
                    shown(cut(text))
                ),
            ));
        }
    }
    Ok(changes)
}

/// A name in a header: a path as written (prefix and all), or /dev/null.
#[derive(Clone, PartialEq)]
enum Name {
    Path(String),
    DevNull,
}

/// What a file's header lines say.
#[derive(Default)]
struct Header {
    /// From `diff --git`.
    git: Option<(String, String)>,
    old: Option<Name>,
    new: Option<Name>,
    rename_from: Option<String>,
    rename_to: Option<String>,
    new_file: bool,
    deleted_file: bool,
}

/// The file whose header starts at `from`, and where the next one starts.
fn file(lines: &[Line], from: usize) -> Result<(FileChange, usize), ParseError> {
    let at = lines[from].n;
    let mut header = Header::default();
    let mut i = from;
    if let Some(names) = lines[i].text.strip_prefix("diff --git ") {
        header.git = git_names(names);
        i += 1;
        while let Some(l) = lines.get(i) {
            let text = l.text;
            if let Some(name) = text.strip_prefix("rename from ") {
                header.rename_from = Some(unquoted(name));
            } else if let Some(name) = text.strip_prefix("rename to ") {
                header.rename_to = Some(unquoted(name));
            } else if text.starts_with("new file mode ") {
                header.new_file = true;
            } else if text.starts_with("deleted file mode ") {
                header.deleted_file = true;
            } else if text.starts_with("copy from ") || text.starts_with("copy to ") {
                return Err(error(
                    l.n,
                    "git copies are not applied: add the new file with its content instead",
                ));
            } else if text.starts_with("Binary files ") || text == "GIT binary patch" {
                return Err(error(
                    l.n,
                    "a binary patch: apply_patch changes text files only",
                ));
            } else if ![
                "old mode ",
                "new mode ",
                "index ",
                "similarity index ",
                "dissimilarity index ",
            ]
            .iter()
            .any(|p| text.starts_with(p))
            {
                break;
            }
            i += 1;
        }
    }
    if header_pair(lines, i) {
        header.old = Some(name(&lines[i].text[4..]));
        header.new = Some(name(&lines[i + 1].text[4..]));
        i += 2;
    } else if lines
        .get(i)
        .is_some_and(|l| l.text.starts_with("Binary files "))
    {
        return Err(error(
            lines[i].n,
            "a binary patch: apply_patch changes text files only",
        ));
    }
    let mut hunks = Vec::new();
    let mut crlf = true;
    while lines.get(i).is_some_and(|l| l.text.starts_with("@@")) {
        let (hunk, next) = hunk(lines, i)?;
        crlf &= lines[i + 1..next]
            .iter()
            .all(|l| l.cr || !l.text.starts_with('+'));
        hunks.push(hunk);
        i = next;
    }
    let (old, new) = paths(&header, at)?;
    let action = match (old, new) {
        (None, Some(path)) => (path, added(&hunks, crlf)?),
        (Some(path), None) => (path, Action::Delete { hunks }),
        (Some(path), Some(to)) => {
            if hunks.is_empty() && path == to {
                return Err(error(
                    at,
                    format!(
                        "'{}' has no hunk and no rename: nothing to change (modes are not \
                         changed)",
                        shown(&path)
                    ),
                ));
            }
            let move_to = (to != path).then_some(to);
            (path, Action::Update { move_to, hunks })
        }
        (None, None) => {
            return Err(error(at, "both names are /dev/null: no file to change"));
        }
    };
    Ok((
        FileChange {
            path: action.0,
            line: at,
            action: action.1,
        },
        i,
    ))
}

/// The old and new root-relative paths of a file (None: /dev/null, or
/// git's new or deleted file).
fn paths(h: &Header, at: usize) -> Result<(Option<String>, Option<String>), ParseError> {
    let (git_old, git_new) = match &h.git {
        Some((a, b)) => (Some(Name::Path(a.clone())), Some(Name::Path(b.clone()))),
        None => (None, None),
    };
    let old = h.old.clone().or(git_old);
    let new = h.new.clone().or(git_new);
    // git's prefixes: dropped when the old name has `a/` and the new `b/`
    // (or one side is /dev/null), never from a name of `--no-prefix`.
    let prefixed = |name: &Option<Name>, p: &str| match name {
        Some(Name::Path(n)) => n.starts_with(p),
        Some(Name::DevNull) => true,
        None => false,
    };
    let strip = prefixed(&old, "a/")
        && prefixed(&new, "b/")
        && !(old == Some(Name::DevNull) && new == Some(Name::DevNull));
    let path =
        |name: Option<Name>, renamed: &Option<String>, gone: bool| -> Result<_, ParseError> {
            if gone {
                return Ok(None);
            }
            let raw = match (renamed, name) {
                (Some(r), _) => r.clone(),
                (None, Some(Name::Path(n))) if strip => n[2..].to_string(),
                (None, Some(Name::Path(n))) => n,
                (None, Some(Name::DevNull)) => return Ok(None),
                (None, None) => return Err(error(at, "a file header without names")),
            };
            relative(&raw, at).map(Some)
        };
    Ok((
        path(old, &h.rename_from, h.new_file)?,
        path(new, &h.rename_to, h.deleted_file)?,
    ))
}

/// An added file's content: its hunks' new lines, no hunk having old
/// ones. CRLF if every added line carried CRLF.
fn added(hunks: &[Hunk], crlf: bool) -> Result<Action, ParseError> {
    if let Some(h) = hunks.iter().find(|h| !h.old.is_empty()) {
        return Err(error(
            h.line,
            "a hunk of a new file (from /dev/null) has old lines: every line of a new file \
             starts with '+'",
        ));
    }
    let lines: Vec<&String> = hunks.iter().flat_map(|h| &h.new).collect();
    let eol = if crlf && !lines.is_empty() {
        "\r\n"
    } else {
        "\n"
    };
    let mut content = String::new();
    for line in lines {
        content.push_str(line);
        content.push_str(eol);
    }
    if hunks.last().is_some_and(|h| h.new_no_newline) {
        content.truncate(content.len().saturating_sub(eol.len()));
    }
    Ok(Action::Add { content })
}

/// What a line of a hunk is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Context,
    Removed,
    Added,
    /// An empty line (no ' '): context, unless it ends the hunk.
    Blank,
}

/// The hunk whose `@@` line is at `from`, and where what follows starts.
fn hunk(lines: &[Line], from: usize) -> Result<(Hunk, usize), ParseError> {
    let header = lines[from].text.trim_end();
    let numbers = hunk_numbers(header);
    let mut hunk = Hunk {
        line: lines[from].n,
        header: header.to_string(),
        old_start: numbers.map(|(start, _)| start),
        ..Hunk::default()
    };
    // What the counts still expect, to tell a removed `--- x` followed by
    // an added `+++ y` from the next file's header.
    let (mut old_left, mut new_left) = numbers.map_or((0, 0), |(_, counts)| counts);
    let mut body: Vec<(Kind, &str)> = Vec::new();
    let mut i = from + 1;
    while let Some(l) = lines.get(i) {
        let text = l.text;
        let pending = old_left > 0 && new_left > 0;
        if text.starts_with("@@")
            || text.starts_with("diff --git ")
            || (header_pair(lines, i) && !pending)
        {
            break;
        }
        let kind = match text.chars().next() {
            None => Kind::Blank,
            Some(' ') => Kind::Context,
            Some('-') => Kind::Removed,
            Some('+') => Kind::Added,
            Some('\\') => {
                // `\ No newline at end of file`: of the line before it.
                match body.last() {
                    Some((Kind::Removed, _)) => hunk.old_no_newline = true,
                    Some((Kind::Added, _)) => hunk.new_no_newline = true,
                    Some(_) => {
                        hunk.old_no_newline = true;
                        hunk.new_no_newline = true;
                    }
                    None => {}
                }
                i += 1;
                continue;
            }
            _ => break,
        };
        if kind != Kind::Added {
            old_left = old_left.saturating_sub(1);
        }
        if kind != Kind::Removed {
            new_left = new_left.saturating_sub(1);
        }
        body.push((kind, text.get(1..).unwrap_or("")));
        i += 1;
    }
    // Empty lines after the last hunk line are space, not context.
    while body.last().is_some_and(|(k, _)| *k == Kind::Blank) {
        body.pop();
    }
    if body.is_empty() {
        return Err(error(
            hunk.line,
            format!(
                "the hunk '{}' has no line: each starts with ' ' (context), '-' (removed) or \
                 '+' (added)",
                shown(cut(header))
            ),
        ));
    }
    for (kind, text) in body {
        if kind != Kind::Added {
            hunk.old.push(text.to_string());
        }
        if kind != Kind::Removed {
            hunk.new.push(text.to_string());
        }
    }
    Ok((hunk, i))
}

/// A unified hunk header's old start and counts: `@@ -l[,s] +l[,s] @@`
/// gives `(l, (s, s))`, a missing count being 1.
pub fn hunk_numbers(header: &str) -> Option<(usize, (usize, usize))> {
    let inner = header.strip_prefix("@@")?.trim_start();
    let inner = &inner[..inner.find("@@")?];
    let mut parts = inner.split_whitespace();
    let range = |part: Option<&str>, sign: char| -> Option<(usize, usize)> {
        let part = part?.strip_prefix(sign)?;
        match part.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((part.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = range(parts.next(), '-')?;
    let (_, new_count) = range(parts.next(), '+')?;
    Some((old_start, (old_count, new_count)))
}

/// A name after `--- ` or `+++ `: quoted as git quotes it, or up to a tab
/// (`diff -u` puts the time there).
fn name(text: &str) -> Name {
    let text = text.trim_end();
    let raw = if text.starts_with('"') {
        unquoted(text)
    } else {
        text.split('\t')
            .next()
            .unwrap_or(text)
            .trim_end()
            .to_string()
    };
    if raw == "/dev/null" {
        Name::DevNull
    } else {
        Name::Path(raw)
    }
}

/// The two names of `diff --git a/OLD b/NEW`: both quoted, or split where
/// the halves name the same file (git writes `a/N b/N` for all but
/// renames), or at the first ` b/`.
fn git_names(text: &str) -> Option<(String, String)> {
    let text = text.trim_end();
    if text.starts_with('"') {
        let (first, rest) = quoted(text)?;
        let rest = rest.trim_start();
        let second = if rest.starts_with('"') {
            quoted(rest)?.0
        } else {
            rest.to_string()
        };
        return Some((first, second));
    }
    let splits: Vec<usize> = text.match_indices(" b/").map(|(i, _)| i).collect();
    let at = splits
        .iter()
        .copied()
        .find(|&i| text.get(2..i) == text.get(i + 3..))
        .or_else(|| splits.first().copied())?;
    Some((text[..at].to_string(), text[at + 1..].to_string()))
}

/// A name, unquoted if git quoted it.
fn unquoted(text: &str) -> String {
    let text = text.trim_end();
    match quoted(text) {
        Some((name, _)) => name,
        None => text.to_string(),
    }
}

/// The C-style quoted string `text` starts with, and what follows it:
/// `\"`, `\\`, `\t`, `\n`, `\r`, `\a`, `\b`, `\f`, `\v` and octal bytes
/// (`\303\251`, UTF-8 as git writes it).
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), &body[i + 1..])),
            b'\\' => {
                let c = *bytes.get(i + 1)?;
                i += 2;
                match c {
                    b'0'..=b'7' => {
                        let digits = &bytes[i - 1..(i + 2).min(bytes.len())];
                        let value = digits.iter().try_fold(0u32, |v, d| {
                            (b'0'..=b'7')
                                .contains(d)
                                .then(|| v * 8 + u32::from(d - b'0'))
                        })?;
                        out.push(u8::try_from(value).ok()?);
                        i += 2;
                    }
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'v' => out.push(11),
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
