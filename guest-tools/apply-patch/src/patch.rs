//! A patch, parsed: what each file it names is to become.
//!
//! Two formats, told apart by their first line: the envelope Codex-trained
//! models write, `*** Begin Patch` ... `*** End Patch` (`codex.rs`), and
//! the unified diff of `diff -u` and git (`unified.rs`). Both give the same
//! [`FileChange`]s. Nothing here touches a file: the paths are checked as
//! text (relative, inside the root, each file named once) and the hunks
//! are kept as lines, to be matched against the file by `apply.rs`.

use std::fmt;

use loomfs_guest::shown;

/// What the patch does to one file.
#[derive(Debug, PartialEq)]
pub struct FileChange {
    /// Root-relative, `/`-separated, without `.` (see [`relative`]).
    pub path: String,
    /// The patch line (1-based) of its header.
    pub line: usize,
    pub action: Action,
}

#[derive(Debug, PartialEq)]
pub enum Action {
    /// A new file holding `content` (its lines' breaks as the patch wrote
    /// them: `\r\n` where its lines carried CRLF).
    Add { content: String },
    /// Removes the file. A unified diff's hunks must remove all of it.
    Delete { hunks: Vec<Hunk> },
    /// Changes the file by its hunks, in order; with `move_to`, writes the
    /// result there and removes the file here (no hunk: a plain move).
    Update {
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// Lines to find in a file, as one run, and what replaces them.
#[derive(Debug, PartialEq, Default)]
pub struct Hunk {
    /// The patch line (1-based) of its first line, its `@@` line if any.
    pub line: usize,
    /// Its `@@` lines as written (empty for a first Codex hunk without).
    pub header: String,
    /// Codex's `@@ TEXT`: the hunk is looked for below the first line
    /// matching each, in turn (a function or class it belongs to).
    pub context: Vec<String>,
    /// Context and removed lines, without line breaks.
    pub old: Vec<String>,
    /// Context and added lines, without line breaks.
    pub new: Vec<String>,
    /// Codex's `*** End of File`: the old lines end the file.
    pub end_of_file: bool,
    /// A unified diff's `-l`: the line the old lines start at in the file
    /// (for an insertion with no old line, the line they go after).
    pub old_start: Option<usize>,
    /// `\ No newline at end of file` after the last old line.
    pub old_no_newline: bool,
    /// `\ No newline at end of file` after the last new line.
    pub new_no_newline: bool,
}

/// Why a patch text is not a patch, and where.
#[derive(Debug, PartialEq)]
pub struct ParseError {
    /// The patch line (1-based).
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "patch line {}: {}", self.line, self.message)
    }
}

/// A [`ParseError`] at `line`.
pub fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// One line of the patch text.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// 1-based.
    pub n: usize,
    /// Without its line break.
    pub text: &'a str,
    /// Whether its break was CRLF.
    pub cr: bool,
}

/// The lines of `text`, numbered; a final line break ends the last line
/// rather than starting an empty one.
pub fn lines(text: &str) -> Vec<Line<'_>> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() && text.is_empty() {
        return Vec::new();
    }
    body.split('\n')
        .enumerate()
        .map(|(i, l)| {
            let text = l.strip_suffix('\r');
            Line {
                n: i + 1,
                text: text.unwrap_or(l),
                cr: text.is_some(),
            }
        })
        .collect()
}

/// The wrapper some models put around a Codex patch, a shell heredoc
/// (`<<'EOF'` ... `EOF`): Codex takes the patch inside it, so do we.
pub fn heredoc(line: &str) -> bool {
    matches!(line.trim(), "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
}

pub const BEGIN: &str = "*** Begin Patch";

/// The patch's file changes, in its order: a Codex patch if its first
/// non-blank line is `*** Begin Patch` (or a heredoc line before it), else
/// a unified diff. Refused: anything else, a patch changing no file, and
/// one naming a file twice.
pub fn parse(text: &str) -> Result<Vec<FileChange>, ParseError> {
    let lines = lines(text);
    let mut filled = lines.iter().filter(|l| !l.text.trim().is_empty());
    let Some(first) = filled.next() else {
        return Err(error(1, "the patch is empty"));
    };
    let codex = first.text.trim() == BEGIN
        || (heredoc(first.text) && filled.next().is_some_and(|l| l.text.trim() == BEGIN));
    let changes = if codex {
        crate::codex::parse(&lines)?
    } else if crate::unified::is_unified(&lines) {
        crate::unified::parse(&lines)?
    } else {
        return Err(error(
            first.n,
            format!(
                "'{}' starts no patch: give '{BEGIN}' ... '*** End Patch' (Codex's format) or a \
                 unified diff ('--- a/PATH', '+++ b/PATH', then '@@ -l,s +l,s @@' hunks)",
                shown(cut(first.text))
            ),
        ));
    };
    if changes.is_empty() {
        return Err(error(first.n, "the patch changes no file"));
    }
    distinct(&changes)?;
    Ok(changes)
}

/// Heads off `src/a.rs` changed twice, or added where another change moves
/// a file: each path a patch names (moves' destinations included) is named
/// once, so the order the changes are written in cannot matter.
fn distinct(changes: &[FileChange]) -> Result<(), ParseError> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for c in changes {
        let moved = match &c.action {
            Action::Update {
                move_to: Some(to), ..
            } => Some(to.as_str()),
            _ => None,
        };
        for path in std::iter::once(c.path.as_str()).chain(moved) {
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == path) {
                return Err(error(
                    c.line,
                    format!(
                        "'{}' is named again (first at line {first}); change each file once, \
                         all its hunks under one header",
                        shown(path)
                    ),
                ));
            }
            seen.push((path, c.line));
        }
    }
    Ok(())
}

/// A path of the patch as a root-relative path: `/`-separated, `.` and
/// empty components dropped. Absolute paths and `..` are refused: the
/// host resolved the root alone, and a path of the patch names a file in
/// it.
pub fn relative(path: &str, line: usize) -> Result<String, ParseError> {
    let path = path.trim();
    let absolute = path.starts_with('/')
        || path.starts_with('\\')
        || path.as_bytes().get(1..3).is_some_and(|d| d[0] == b':')
            && path.as_bytes()[0].is_ascii_alphabetic();
    if absolute {
        return Err(error(
            line,
            format!(
                "'{}' is absolute: a patch names files relative to the root",
                shown(path)
            ),
        ));
    }
    if path.contains('\0') {
        return Err(error(line, "a path holds a NUL character"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(error(
                    line,
                    format!(
                        "'{}' climbs with '..': a patch names files inside the root",
                        shown(path)
                    ),
                ));
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(error(line, format!("'{}' names no file", shown(path))));
    }
    Ok(parts.join("/"))
}

/// A line of the patch cut for a message.
pub fn cut(line: &str) -> &str {
    match line.char_indices().nth(80) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_keep_no_break() {
        let l = lines("a\r\nb\n\nc");
        let texts: Vec<(usize, &str, bool)> = l.iter().map(|l| (l.n, l.text, l.cr)).collect();
        assert_eq!(
            texts,
            [
                (1, "a", true),
                (2, "b", false),
                (3, "", false),
                (4, "c", false)
            ]
        );
        assert_eq!(lines("a\n").len(), 1);
        assert!(lines("").is_empty());
    }

    #[test]
    fn paths_stay_relative_and_inside() {
        assert_eq!(relative(" ./src//a.rs ", 1), Ok("src/a.rs".into()));
        for bad in ["/etc/passwd", "C:\\x", "a/../../b", ".", ""] {
            assert!(relative(bad, 3).is_err(), "{bad}");
        }
        assert_eq!(
            relative("../x", 7).map_err(|e| e.to_string()),
            Err(
                "patch line 7: '../x' climbs with '..': a patch names files inside the root".into()
            )
        );
    }

    #[test]
    fn text_that_is_no_patch_is_refused_naming_its_line() {
        let e = parse("\nhello\nworld\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("'hello' starts no patch"), "{e}");
        assert_eq!(parse(" \n").unwrap_err().message, "the patch is empty");
        let e = parse("*** Begin Patch\n*** End Patch\n").unwrap_err();
        assert_eq!(e.message, "the patch changes no file");
    }

    #[test]
    fn a_file_named_twice_is_refused() {
        let e = parse(
            "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.txt\n\
             *** Move to: a.txt\n@@\n-y\n+z\n*** End Patch",
        )
        .unwrap_err();
        assert_eq!(e.line, 4);
        assert!(
            e.message
                .starts_with("'a.txt' is named again (first at line 2)")
        );
    }
}
