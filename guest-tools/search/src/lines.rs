//! How a file's lines are shown: as UTF-8 when they are, else decoded;
//! previews trimmed and capped; the lines around a match for `context`.

use std::borrow::Cow;

use loomfs_guest::encoding::{self, Format};

/// Longest preview of a matching line, in characters.
const PREVIEW_CHARS: usize = 200;

/// How a file's lines are shown: as UTF-8 when they are, else decoded.
pub(super) struct Lines<'f> {
    /// The encoding's name when the file was searched decoded (`None`
    /// inside: it was UTF-8 after all).
    pub(super) decoded: Option<Option<&'static str>>,
    /// The bytes as they are, in a file that may not be UTF-8: its
    /// encoding, asked once, at its first match on a line that is not
    /// UTF-8 (one that is is shown as UTF-8), so a UTF-8 file costs what it
    /// did.
    pub(super) legacy: Option<Option<Format>>,
    pub(super) file: &'f [u8],
}

impl Lines<'_> {
    /// `text`, a line of the haystack, as shown, and the name of the
    /// encoding it was decoded from, if not UTF-8.
    pub(super) fn show<'t>(&mut self, text: &'t [u8]) -> (Cow<'t, str>, Option<&'static str>) {
        match (self.decoded, std::str::from_utf8(text)) {
            (Some(name), _) => (String::from_utf8_lossy(text), name),
            (None, Ok(line)) => (Cow::Borrowed(line), None),
            (None, Err(_)) => {
                let file = self.file;
                match *self.legacy.get_or_insert_with(|| {
                    Some(encoding::detect(file, true)).filter(|f| !f.is_utf8())
                }) {
                    Some(f) => (
                        f.encoding.decode_without_bom_handling(text).0,
                        Some(f.name()),
                    ),
                    None => (String::from_utf8_lossy(text), None),
                }
            }
        }
    }
}

/// The `n` lines (at most) before the line that starts at `start`, first
/// to last, without their `\n`.
pub(super) fn lines_before(haystack: &[u8], start: usize, n: usize) -> Vec<&[u8]> {
    let mut lines = Vec::with_capacity(n);
    let mut end = start;
    while lines.len() < n && end > 0 {
        // `end - 1` is the `\n` that ends the line before.
        let from = memchr::memrchr(b'\n', &haystack[..end - 1]).map_or(0, |i| i + 1);
        lines.push(&haystack[from..end - 1]);
        end = from;
    }
    lines.reverse();
    lines
}

/// The `n` lines (at most) after the line that ends at `end` (its `\n`, or
/// the end of `haystack`), without their `\n`. A last line that ends the
/// file without one counts; the nothing after a final `\n` does not.
pub(super) fn lines_after(haystack: &[u8], end: usize, n: usize) -> Vec<&[u8]> {
    let mut lines = Vec::with_capacity(n);
    let mut from = end + 1;
    while lines.len() < n && from < haystack.len() {
        let to = memchr::memchr(b'\n', &haystack[from..]).map_or(haystack.len(), |i| from + i);
        lines.push(&haystack[from..to]);
        from = to + 1;
    }
    lines
}

/// A matching line as shown: trimmed (at its end only, to line up with
/// its context, when `keep_indent`), at most [`PREVIEW_CHARS`] characters.
pub(super) fn preview(line: &str, keep_indent: bool) -> String {
    let text = if keep_indent {
        line.trim_end()
    } else {
        line.trim()
    };
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A line of context as shown: as a matching line with its indentation.
pub(super) fn context_line(line: &str) -> String {
    preview(line, true)
}

#[cfg(test)]
mod tests {
    use super::{lines_after, lines_before};

    const TEXT: &[u8] = b"one\ntwo\nthree\nfour\nfive";

    /// Where line `n` (1-based) of TEXT starts and ends.
    fn span(n: usize) -> (usize, usize) {
        let start: usize = TEXT
            .split(|&b| b == b'\n')
            .take(n - 1)
            .map(|l| l.len() + 1)
            .sum();
        let len = TEXT.split(|&b| b == b'\n').nth(n - 1).unwrap().len();
        (start, start + len)
    }

    #[test]
    fn lines_before_a_line_come_first_to_last_and_stop_at_the_start() {
        let (three, _) = span(3);
        assert_eq!(lines_before(TEXT, three, 2), [&b"one"[..], b"two"]);
        assert_eq!(lines_before(TEXT, three, 10), [&b"one"[..], b"two"]);
        assert_eq!(lines_before(TEXT, three, 1), [&b"two"[..]]);
        assert!(lines_before(TEXT, 0, 3).is_empty());
        assert!(lines_before(TEXT, three, 0).is_empty());
    }

    #[test]
    fn lines_after_a_line_stop_at_the_end_with_or_without_a_final_newline() {
        let (_, three) = span(3);
        assert_eq!(lines_after(TEXT, three, 5), [&b"four"[..], b"five"]);
        let (_, five) = span(5);
        assert!(lines_after(TEXT, five, 2).is_empty());
        let ended = b"a\nb\n";
        assert_eq!(lines_after(ended, 1, 5), [&b"b"[..]]);
        assert!(lines_after(ended, 3, 5).is_empty());
        // Empty lines are lines.
        assert_eq!(lines_after(b"a\n\n\nb", 1, 2), [&b""[..], b""]);
    }
}
