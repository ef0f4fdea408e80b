//! What `contains` looks for in a file: bytes, or a regular expression.
//!
//! Both search bytes (a file's own, or its text decoded to UTF-8: see the
//! tool's module) and report each matching line once.

use std::ops::Range;

use memchr::memmem::Finder;
use regex::bytes::{Regex, RegexBuilder};

/// Most memory a compiled expression may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Most memory the lazy DFA of an expression may take while matching.
const DFA_SIZE_LIMIT: usize = 4 << 20;

// One needle per call: its size does not matter, and the memchr finder
// stays inline on the hot path rather than behind a box.
#[allow(clippy::large_enum_variant)]
pub enum Needle {
    Bytes(Finder<'static>),
    Regex(Regex),
}

impl Needle {
    /// The needle for `contains` (a regular expression when `regex`).
    pub fn new(text: &str, regex: bool) -> Result<Needle, String> {
        if text.is_empty() {
            return Err("'contains' is empty".into());
        }
        if !regex {
            return Ok(Needle::Bytes(Finder::new(text.as_bytes()).into_owned()));
        }
        RegexBuilder::new(text)
            .multi_line(true)
            // `$` before `\r\n` too: CRLF files match like LF ones.
            .crlf(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map(Needle::Regex)
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(limit) => format!(
                    "regular expression '{}' is too large (compiled size over {limit} bytes)",
                    loomfs_guest::shown(text)
                ),
                e => format!("invalid regular expression: {e}"),
            })
    }

    /// Whether the needle is ASCII bytes, which mean the same in every
    /// ASCII-compatible encoding: a file's own bytes can be searched for
    /// it, whatever its encoding.
    pub fn is_ascii_literal(&self) -> bool {
        match self {
            Needle::Bytes(f) => f.needle().is_ascii(),
            Needle::Regex(_) => false,
        }
    }

    /// The start and end of the first match at or after `from`.
    fn find(&self, haystack: &[u8], from: usize) -> Option<(usize, usize)> {
        match self {
            Needle::Bytes(f) => f
                .find(&haystack[from..])
                .map(|at| (from + at, from + at + f.needle().len())),
            Needle::Regex(r) => r.find_at(haystack, from).map(|m| (m.start(), m.end())),
        }
    }

    /// Calls `each(line number, line)` for every line holding a match, in
    /// order, while it returns true. Line numbers start at 1; the line is
    /// where it lies in `haystack`, without its `\n`.
    pub fn for_each_line(&self, haystack: &[u8], mut each: impl FnMut(u64, Range<usize>) -> bool) {
        let mut from = 0;
        // Lines counted up to `counted`.
        let mut line = 1u64;
        let mut counted = 0;
        while from < haystack.len() {
            let Some((start, end)) = self.find(haystack, from) else {
                return;
            };
            // An empty match after the last newline is on no line at all.
            if start == haystack.len() && haystack.last() == Some(&b'\n') {
                return;
            }
            line += memchr::memchr_iter(b'\n', &haystack[counted..start]).count() as u64;
            counted = start;
            let line_start = memchr::memrchr(b'\n', &haystack[..start]).map_or(0, |i| i + 1);
            // A match may span lines: report the line it starts on, go on
            // after the line its last byte is on (a match ending in `\n` ends
            // on that line, not the next).
            let line_end =
                memchr::memchr(b'\n', &haystack[start..]).map_or(haystack.len(), |i| start + i);
            let last = if end > start { end - 1 } else { start };
            let resume = memchr::memchr(b'\n', &haystack[last..])
                .map_or(haystack.len() + 1, |i| last + i + 1);
            if !each(line, line_start..line_end) {
                return;
            }
            from = resume;
        }
    }
}
