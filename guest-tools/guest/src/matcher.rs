//! Where a text a model quotes (`edit_file`'s `old_text`, a hunk's old
//! lines in `apply_patch`) is in a file, when it is not there exactly.
//!
//! Models copy text with its indentation changed (spaces for tabs, the
//! block's base indentation dropped), trailing blanks lost, or LF for CRLF.
//! So an `old_text` with no exact occurrence is looked for line by line,
//! each line compared with its leading and trailing whitespace (and a CR)
//! left out: a **tolerant** match is a run of whole lines of the file. The
//! replacement then takes the file's indentation, not the model's
//! ([`reindent`]). When even that finds nothing, [`closest`] names the
//! region of the file most like `old_text`, with a short diff, so the
//! model can try again without reading the file.

use std::collections::HashMap;
use std::ops::Range;

use similar::{ChangeTag, TextDiff};

/// One line of a text: where it starts, where its content ends (before
/// `\r\n` or `\n`), and where the next line starts.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    content_end: usize,
    end: usize,
}

fn spans(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices('\n') {
        let content_end = if text[..i].ends_with('\r') { i - 1 } else { i };
        spans.push(Span {
            start,
            content_end,
            end: i + 1,
        });
        start = i + 1;
    }
    if start < text.len() {
        spans.push(Span {
            start,
            content_end: text.len(),
            end: text.len(),
        });
    }
    spans
}

/// A line as the tolerant match compares it.
fn norm(line: &str) -> &str {
    line.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r')
}

/// A line's indentation: its leading spaces and tabs.
fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// `old_text` cut into lines for the tolerant match. A final line break
/// is not a line of its own: it says the match takes the break after its
/// last line too.
struct Pattern<'a> {
    lines: Vec<&'a str>,
    with_break: bool,
}

impl<'a> Pattern<'a> {
    fn new(old: &'a str) -> Pattern<'a> {
        let body = old.strip_suffix('\n');
        let with_break = body.is_some();
        let body = body.unwrap_or(old);
        let lines = body
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        Pattern { lines, with_break }
    }

    /// Whether every line is blank: such a pattern matches any run of
    /// blank lines, which is no match at all.
    fn is_blank(&self) -> bool {
        self.lines.iter().all(|l| norm(l).is_empty())
    }
}

/// A tolerant match: lines `first..first + lines.len()` of the file
/// (0-based), and the bytes it replaces.
pub struct Window {
    pub first: usize,
    pub range: Range<usize>,
    /// The file's lines it covers, without their line breaks.
    lines: Vec<Range<usize>>,
}

impl Window {
    /// The 1-based line numbers it covers.
    pub fn line_numbers(&self) -> (usize, usize) {
        (self.first + 1, self.first + self.lines.len())
    }
}

/// Where `old` occurs in `text`.
pub enum Found {
    /// Byte offsets of its exact occurrences, overlapping ones included
    /// (`aa` occurs twice in `aaa`).
    Exact(Vec<usize>),
    /// No exact occurrence; these runs of lines match it ignoring
    /// whitespace at both ends of each line (overlapping ones included).
    Tolerant(Vec<Window>),
    /// Neither.
    Nowhere,
}

pub fn find(text: &str, old: &str) -> Found {
    let exact = exact(text, old);
    if !exact.is_empty() {
        return Found::Exact(exact);
    }
    let windows = tolerant(text, old);
    if windows.is_empty() {
        Found::Nowhere
    } else {
        Found::Tolerant(windows)
    }
}

/// Where `old`, whole lines each ending with a line break, occurs in
/// `text` as whole lines: starting at a line start at or after byte `from`
/// (itself a line start), and with `at_end` ending where `text` ends.
/// Exact occurrences first, then tolerant ones, as [`find`]. A hunk of a
/// patch is looked for this way: below the hunks before it, never inside
/// a line.
pub fn find_lines(text: &str, old: &str, from: usize, at_end: bool) -> Found {
    let ends_well = |end: usize| !at_end || end == text.len();
    let exact: Vec<usize> = exact(&text[from..], old)
        .into_iter()
        .map(|at| from + at)
        .filter(|&at| (at == 0 || text.as_bytes()[at - 1] == b'\n') && ends_well(at + old.len()))
        .collect();
    if !exact.is_empty() {
        return Found::Exact(exact);
    }
    let windows: Vec<Window> = tolerant(text, old)
        .into_iter()
        .filter(|w| w.range.start >= from && ends_well(w.range.end))
        .collect();
    if windows.is_empty() {
        Found::Nowhere
    } else {
        Found::Tolerant(windows)
    }
}

fn exact(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let at = from + i;
        found.push(at);
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

fn tolerant(text: &str, old: &str) -> Vec<Window> {
    let pattern = Pattern::new(old);
    if pattern.is_blank() {
        return Vec::new();
    }
    let spans = spans(text);
    let wanted: Vec<&str> = pattern.lines.iter().map(|l| norm(l)).collect();
    let m = wanted.len();
    if m > spans.len() {
        return Vec::new();
    }
    let line = |s: &Span| norm(&text[s.start..s.content_end]);
    (0..=spans.len() - m)
        .filter(|&i| (0..m).all(|j| line(&spans[i + j]) == wanted[j]))
        .map(|i| {
            let last = spans[i + m - 1];
            let end = if pattern.with_break {
                last.end
            } else {
                last.content_end
            };
            Window {
                first: i,
                range: spans[i].start..end,
                lines: spans[i..i + m]
                    .iter()
                    .map(|s| s.start..s.content_end)
                    .collect(),
            }
        })
        .collect()
}

/// The 1-based lines of byte offsets `at` (ascending), each line once.
pub fn lines_of(text: &str, at: &[usize]) -> Vec<usize> {
    let (mut line, mut from) = (1, 0);
    let mut lines: Vec<usize> = Vec::with_capacity(at.len());
    for &offset in at {
        line += text[from..offset].bytes().filter(|&b| b == b'\n').count();
        from = offset;
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }
    lines
}

/// `new` as it replaces `window`: each line's indentation written as the
/// file indents the matched lines. A line of `new` indented as the line
/// of `old` at its place takes the file's indentation there. Otherwise the
/// model's indentation of `old` is paired, line by line, with the file's
/// (the first pairing of each): a line indented like some line of `old`
/// takes that pairing, a deeper one the
/// deepest such pairing plus the rest converted by the step the pairings
/// show (four spaces → a tab), a shallower one the shallowest pairing less
/// those steps. Blank lines stay blank. `new` uses the file's line breaks.
pub fn reindent(text: &str, window: &Window, old: &str, new: &str) -> String {
    let pattern = Pattern::new(old);
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for (o, r) in pattern.lines.iter().zip(&window.lines) {
        if norm(o).is_empty() {
            continue;
        }
        let (from, to) = (indentation(o), indentation(&text[r.clone()]));
        if !pairs.iter().any(|(f, _)| *f == from) {
            pairs.push((from, to));
        }
    }
    pairs.sort_by_key(|(f, _)| f.len());
    let step = pairs.windows(2).find_map(|w| {
        let ((f1, t1), (f2, t2)) = (w[0], w[1]);
        let deeper = f2.len() > f1.len() && t2.len() > t1.len();
        (deeper && f2.starts_with(f1) && t2.starts_with(t1))
            .then(|| (&f2[f1.len()..], &t2[t1.len()..]))
    });
    let mut body = new;
    let mut tail = "";
    // With a break after the last line in old but none in the file there,
    // the new text's final break has nothing to stand for.
    if pattern.with_break && window.range.end == text.len() && !text.ends_with('\n') {
        body = new.strip_suffix('\n').unwrap_or(new);
        body = body.strip_suffix('\r').unwrap_or(body);
    } else if let Some(b) = new.strip_suffix('\n') {
        body = b;
        tail = "\n";
    }
    let mut out = String::with_capacity(new.len() + 16);
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if norm(line).is_empty() || pairs.is_empty() {
            out.push_str(line);
            continue;
        }
        let ind = indentation(line);
        // Indented as the line of old at its place: as the file's line there.
        match (pattern.lines.get(i), window.lines.get(i)) {
            (Some(o), Some(r)) if !norm(o).is_empty() && indentation(o) == ind => {
                out.push_str(indentation(&text[r.clone()]))
            }
            _ => out.push_str(&mapped(ind, &pairs, step)),
        }
        out.push_str(&line[ind.len()..]);
    }
    out.push_str(tail);
    out
}

/// Indentation `ind` of the model's, written the file's way.
fn mapped(ind: &str, pairs: &[(&str, &str)], step: Option<(&str, &str)>) -> String {
    if let Some((from, to)) = pairs.iter().rev().find(|(f, _)| ind.starts_with(f)) {
        let mut out = to.to_string();
        let mut rest = &ind[from.len()..];
        if let Some((s_from, s_to)) = step {
            while let Some(r) = rest.strip_prefix(s_from) {
                out.push_str(s_to);
                rest = r;
            }
        }
        out.push_str(rest);
        return out;
    }
    // Shallower than every pairing: the shallowest one, less whole steps.
    let (from, to) = pairs[0];
    if let Some((s_from, s_to)) = step
        && let Some(mut gap) = from.strip_prefix(ind)
    {
        let mut to = to;
        while let Some(g) = gap.strip_prefix(s_from) {
            match to.strip_suffix(s_to) {
                Some(t) => to = t,
                None => return ind.to_string(),
            }
            gap = g;
        }
        if gap.is_empty() {
            return to.to_string();
        }
    }
    ind.to_string()
}

/// The region of a file most like an `old_text` that is not in it.
#[derive(Debug)]
pub struct Closest {
    /// 1-based, inclusive.
    pub first: usize,
    pub last: usize,
    /// `old_text` against the region, line by line: `-` old_text, `+` the
    /// file, ` ` both; at most [`MAX_DIFF_LINES`] lines of at most
    /// [`MAX_LINE_CHARS`] characters.
    pub diff: String,
}

pub const MAX_DIFF_LINES: usize = 20;
pub const MAX_LINE_CHARS: usize = 120;

/// The run of lines, as long as `old`, where the most lines of `old` occur
/// (ignoring whitespace at their ends), the earliest of equals; when no
/// line of `old` occurs anywhere, the one aligned on the file line most
/// like `old`'s longest line (by shared character pairs). None when
/// nothing in the file looks like it.
pub fn closest(text: &str, old: &str) -> Option<Closest> {
    let pattern = Pattern::new(old);
    let spans = spans(text);
    if spans.is_empty() || pattern.is_blank() {
        return None;
    }
    let file: Vec<&str> = spans
        .iter()
        .map(|s| norm(&text[s.start..s.content_end]))
        .collect();
    let mut at: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, l) in pattern.lines.iter().enumerate() {
        let l = norm(l);
        if !l.is_empty() {
            at.entry(l).or_default().push(j);
        }
    }
    let mut votes: HashMap<usize, usize> = HashMap::new();
    for (i, l) in file.iter().enumerate() {
        for &j in at.get(l).map(Vec::as_slice).unwrap_or_default() {
            if i >= j {
                *votes.entry(i - j).or_default() += 1;
            }
        }
    }
    let start = match votes
        .into_iter()
        .max_by_key(|&(s, v)| (v, std::cmp::Reverse(s)))
    {
        Some((s, _)) => s,
        None => {
            let (j, longest) = pattern
                .lines
                .iter()
                .map(|l| norm(l))
                .enumerate()
                .max_by_key(|(_, l)| l.chars().count())?;
            let (i, score) = file
                .iter()
                .enumerate()
                .map(|(i, l)| (i, likeness(longest, l)))
                .fold((0, 0.0), |best, c| if c.1 > best.1 { c } else { best });
            if score < 0.5 {
                return None;
            }
            i.saturating_sub(j)
        }
    };
    let end = (start + pattern.lines.len()).min(spans.len());
    let region: Vec<&str> = spans[start..end]
        .iter()
        .map(|s| &text[s.start..s.content_end])
        .collect();
    Some(Closest {
        first: start + 1,
        last: end,
        diff: short_diff(&pattern.lines, &region),
    })
}

/// Dice's coefficient of the two lines' character pairs: 1 for the same
/// pairs, 0 for none shared.
fn likeness(a: &str, b: &str) -> f64 {
    fn pairs(s: &str) -> Vec<(char, char)> {
        let chars: Vec<char> = s.chars().collect();
        let mut p: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
        p.sort_unstable();
        p
    }
    let (a, b) = (pairs(a), pairs(b));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * shared as f64 / (a.len() + b.len()) as f64
}

fn short_diff(old: &[&str], region: &[&str]) -> String {
    let diff = TextDiff::from_slices(old, region);
    let changes: Vec<_> = diff.iter_all_changes().collect();
    let mut out = String::new();
    for change in changes.iter().take(MAX_DIFF_LINES) {
        let sign = match change.tag() {
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
            ChangeTag::Equal => ' ',
        };
        out.push(sign);
        out.push_str(&cut(change.value()));
        out.push('\n');
    }
    if changes.len() > MAX_DIFF_LINES {
        out.push_str(&format!(
            "… ({} more lines)\n",
            changes.len() - MAX_DIFF_LINES
        ));
    }
    out
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str, old: &str) -> Window {
        match find(text, old) {
            Found::Tolerant(mut w) if w.len() == 1 => w.remove(0),
            Found::Tolerant(w) => panic!("{} tolerant matches", w.len()),
            Found::Exact(e) => panic!("exact at {e:?}"),
            Found::Nowhere => panic!("no match"),
        }
    }

    fn replaced(text: &str, old: &str, new: &str) -> String {
        let w = one(text, old);
        let mut out = text.to_string();
        out.replace_range(w.range.clone(), &reindent(text, &w, old, new));
        out
    }

    #[test]
    fn exact_matches_come_first_and_overlap() {
        assert!(matches!(find("aaa", "aa"), Found::Exact(v) if v == [0, 1]));
        assert!(matches!(find("  x\n", "  x"), Found::Exact(v) if v == [0]));
        assert_eq!(lines_of("a a\nb\na", &[0, 2, 6]), [1, 3]);
    }

    #[test]
    fn whole_lines_are_found_below_a_place_and_at_the_end() {
        let text = "a\nxa\nb\na\nb\n";
        // "a\n" inside "xa\n" is no occurrence of the line.
        assert!(matches!(find_lines(text, "a\n", 0, false), Found::Exact(v) if v == [0, 7]));
        assert!(matches!(find_lines(text, "a\nb\n", 5, false), Found::Exact(v) if v == [7]));
        assert!(matches!(find_lines(text, "b\n", 0, true), Found::Exact(v) if v == [9]));
        // Below `from` only, tolerant ones too.
        assert!(matches!(
            find_lines(text, "a\nb\n", 11, false),
            Found::Nowhere
        ));
        match find_lines("  a\nb\n\ta\nb\n", "a\nb\n", 1, false) {
            Found::Tolerant(w) => assert_eq!(
                w.iter().map(Window::line_numbers).collect::<Vec<_>>(),
                [(3, 4)]
            ),
            _ => panic!("one tolerant match expected"),
        }
        assert!(matches!(
            find_lines("  a\nb\nc\n", "a\nb\n", 0, true),
            Found::Nowhere
        ));
    }

    #[test]
    fn spaces_for_tabs_keep_the_files_tabs_and_map_deeper_levels() {
        let file = "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n";
        let old = "    if x {\n        y();\n    }";
        let new = "    if x {\n        z();\n        if w {\n            v();\n        }\n    }";
        assert_eq!(
            replaced(file, old, new),
            "fn f() {\n\tif x {\n\t\tz();\n\t\tif w {\n\t\t\tv();\n\t\t}\n\t}\n}\n"
        );
    }

    #[test]
    fn a_dropped_base_indentation_is_put_back() {
        let file = "class A:\n    def f(self):\n        return 1\n";
        let old = "def f(self):\n    return 1\n";
        let new = "def f(self):\n    x = 2\n    return x\n";
        assert_eq!(
            replaced(file, old, new),
            "class A:\n    def f(self):\n        x = 2\n        return x\n"
        );
    }

    #[test]
    fn a_shallower_line_loses_whole_steps() {
        let file = "\t\tif a {\n\t\t\tb();\n\t\t}\n";
        let old = "  if a {\n    b();\n  }\n";
        let new = "  if a {\n    b();\n  }\nc();\n";
        assert_eq!(
            replaced(file, old, new),
            "\t\tif a {\n\t\t\tb();\n\t\t}\n\tc();\n"
        );
    }

    #[test]
    fn trailing_blanks_and_crs_are_ignored_and_blank_lines_stay_blank() {
        let file = "a  \r\n\r\n  b\r\nc\n";
        let w = one(file, "a\n\nb");
        assert_eq!(w.line_numbers(), (1, 3));
        assert_eq!(&file[w.range.clone()], "a  \r\n\r\n  b");
        assert_eq!(reindent(file, &w, "a\n\nb", "x\n\ny"), "x\n\n  y");
    }

    #[test]
    fn a_final_break_in_old_takes_the_files_break() {
        let file = "  a\n  b\nc";
        assert_eq!(replaced(file, "a\nb\n", ""), "c");
        assert_eq!(replaced(file, "b\nc\n", "d\n"), "  a\n  d");
    }

    #[test]
    fn ambiguity_and_blank_patterns() {
        match find("\tx\n  y\n    x\n  y\n", "x\ny") {
            Found::Tolerant(w) => assert_eq!(
                w.iter().map(Window::line_numbers).collect::<Vec<_>>(),
                [(1, 2), (3, 4)]
            ),
            _ => panic!("two tolerant matches expected"),
        }
        assert!(matches!(find("a\n\n  \nb", " \n\t"), Found::Nowhere));
        // Only whole lines: a fragment of a line is not a tolerant match.
        assert!(matches!(find("let x = 1;\n", "x =  1"), Found::Nowhere));
    }

    #[test]
    fn closest_names_the_most_alike_lines_with_a_bounded_diff() {
        let file = "one\ntwo\nfn f() {\n    let a = 1;\n    a + 1\n}\nthree\n";
        let c = closest(file, "fn f() {\n    let a = 2;\n    a + 1\n}").unwrap();
        assert_eq!((c.first, c.last), (3, 6));
        assert_eq!(
            c.diff,
            " fn f() {\n-    let a = 2;\n+    let a = 1;\n     a + 1\n }\n"
        );
        // No line in common: the line most like old_text's longest.
        let c = closest(file, "    let b = 1;").unwrap();
        assert_eq!((c.first, c.last), (4, 4));
        assert!(closest(file, "zzzzzzzz").is_none());
        // Bounded: lines cut, and no more than MAX_DIFF_LINES of them.
        let long = "x".repeat(1000);
        let file = format!("{long}\n").repeat(100);
        let old = format!("{}y\n", "x".repeat(999)).repeat(100);
        let c = closest(&file, &old).unwrap();
        assert!(c.diff.lines().count() <= MAX_DIFF_LINES + 1, "{}", c.diff);
        assert!(c.diff.len() < MAX_DIFF_LINES * (MAX_LINE_CHARS * 4 + 8) + 40);
    }
}
