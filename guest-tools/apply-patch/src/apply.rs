//! A file's hunks applied to its text, in memory.
//!
//! Hunks apply in order, each looked for below the previous one (and below
//! its `@@ TEXT` lines, each the first line after the place before it that
//! is that text, trimmed, or failing that holds it). A hunk's old lines
//! must occur there exactly once, by `edit_file`'s rules
//! (`loomfs_guest::matcher`): exactly, else as whole lines differing only
//! in the whitespace at their ends, then re-indented the file's way. With
//! `*** End of File` they must end the file. An empty last old line that
//! matches nowhere is dropped and the hunk tried again (a blank context
//! line Codex's models add at a hunk's end). A hunk with no old line
//! inserts its lines: at a unified diff's line, else below its `@@ TEXT`,
//! else at the end of the file.
//!
//! A unified diff's line numbers are hints only, never a reason to refuse:
//! when the old lines match in several places, the one starting at the
//! hunk's line (moved by what the hunks before it added and removed) is
//! taken if there is one; without one the hunk is ambiguous, as any is.
//!
//! Line breaks are the file's: the patch's lines are written with CRLF
//! into a file that has CRLF. A file whose last line has no line break
//! keeps it that way, unless a unified diff's `\ No newline at end of
//! file` says otherwise.

use loomfs_guest::matcher::{self, Closest, Found, Window};
use loomfs_guest::shown;

use crate::patch::Hunk;

/// A file's text after its hunks.
#[derive(Debug)]
pub struct Applied {
    pub text: String,
    /// Hunks (1-based) matched only ignoring whitespace at line ends, and
    /// the lines (1-based, first and last) they matched in the text as it
    /// stood then.
    pub tolerant: Vec<(usize, (usize, usize))>,
}

/// Why hunk `hunk` (1-based) does not apply.
#[derive(Debug)]
pub struct Mismatch {
    pub hunk: usize,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    /// No line below line `after` (1-based; 0: the top) is or holds this
    /// `@@` text.
    Context { text: String, after: usize },
    /// The old lines match in several places (their first lines),
    /// exactly or, when `tolerant`, ignoring whitespace at line ends.
    Ambiguous { lines: Vec<usize>, tolerant: bool },
    /// The old lines match nowhere below line `after`: `above`, the line
    /// where they match above it if they do; `closest`, the region of the
    /// file most like them.
    Nowhere {
        after: usize,
        above: Option<usize>,
        closest: Option<Closest>,
        end_of_file: bool,
    },
}

/// The most places a refusal lists.
const MAX_PLACES: usize = 10;

impl Mismatch {
    /// The refusal's text, naming the file (`rel`), the hunk and its `@@`
    /// line (`hunks`: the file's).
    pub fn message(&self, rel: &str, hunks: &[Hunk]) -> String {
        let hunk = &hunks[self.hunk - 1];
        let header = if hunk.header.is_empty() {
            String::new()
        } else {
            format!(" ({})", shown(&hunk.header))
        };
        let what = format!(
            "'{}': hunk {}{header}, at patch line {}",
            shown(rel),
            self.hunk,
            hunk.line
        );
        match &self.kind {
            Kind::Context { text, after } => format!(
                "{what}: no line {} is or holds '{}', which its '@@' names; nothing was changed",
                below(*after),
                shown(text)
            ),
            Kind::Ambiguous { lines, tolerant } => {
                let mut places: Vec<String> = lines
                    .iter()
                    .take(MAX_PLACES)
                    .map(usize::to_string)
                    .collect();
                if lines.len() > MAX_PLACES {
                    places.push(format!("{} more", lines.len() - MAX_PLACES));
                }
                format!(
                    "{what}: its old lines match {} places{} (starting at lines {}); add context \
                     lines, or an '@@ TEXT' line naming a line above it (its function, its \
                     class), so it matches once; nothing was changed",
                    lines.len(),
                    if *tolerant {
                        " ignoring whitespace at line ends"
                    } else {
                        ""
                    },
                    places.join(", ")
                )
            }
            Kind::Nowhere {
                after,
                above,
                closest,
                end_of_file,
            } => {
                let mut m = format!(
                    "{what}: its old lines were not found {}{}, even ignoring whitespace at line \
                     ends; nothing was changed",
                    below(*after),
                    if *end_of_file {
                        " at the end of the file"
                    } else {
                        ""
                    }
                );
                if let Some(line) = above {
                    m.push_str(&format!(
                        ". They are at line {line}, above where it is looked for (below the hunk \
                         before it and its '@@' lines): give a file's hunks in the file's order"
                    ));
                } else if let Some(c) = closest {
                    let span = if c.first == c.last {
                        format!("line {}", c.first)
                    } else {
                        format!("lines {}-{}", c.first, c.last)
                    };
                    m.push_str(&format!(
                        ". The closest region is {span} ('-' the hunk, '+' the file):\n{}",
                        c.diff
                    ));
                } else {
                    m.push_str(", and no region of the file is alike");
                }
                m
            }
        }
    }
}

fn below(after: usize) -> String {
    if after == 0 {
        "in the file".into()
    } else {
        format!("below line {after}")
    }
}

/// `text` with `hunks` applied (see the module).
pub fn apply(text: &str, hunks: &[Hunk]) -> Result<Applied, Mismatch> {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut final_break = text.is_empty() || text.ends_with('\n');
    // Every line ends with a break while the hunks apply, the last too.
    let mut work = text.to_string();
    if !final_break {
        work.push_str(eol);
    }
    let mut cursor = 0;
    let mut shift: isize = 0;
    let mut tolerant = Vec::new();
    for (i, hunk) in hunks.iter().enumerate() {
        let n = i + 1;
        let fail = |kind| Mismatch { hunk: n, kind };
        for context in &hunk.context {
            cursor = below_context(&work, cursor, context, hunk.old.first()).ok_or_else(|| {
                fail(Kind::Context {
                    text: context.clone(),
                    after: line_of(&work, cursor),
                })
            })?;
        }
        // The hint, moved by what the hunks before it did.
        let hint = hunk
            .old_start
            .map(|l| usize::try_from(l as isize + shift).unwrap_or(0));
        let (old, new) = if hunk.old.is_empty() {
            let at = if hunk.end_of_file {
                work.len()
            } else if let Some(after) = hint {
                offset_of_line(&work, after).max(cursor)
            } else if !hunk.context.is_empty() {
                cursor
            } else {
                work.len()
            };
            let new = joined(&hunk.new, eol);
            work.insert_str(at, &new);
            cursor = at + new.len();
            (0, hunk.new.len())
        } else {
            let found = locate(&work, cursor, hunk, &hunk.old, &hunk.new, hint, eol);
            // A blank last old line that matches nowhere: dropped (and a
            // blank last new line with it), and the hunk tried again.
            let (found, old, new) = match found {
                Err(Kind::Nowhere { .. })
                    if hunk.old.last().is_some_and(|l| l.trim().is_empty()) =>
                {
                    let old = &hunk.old[..hunk.old.len() - 1];
                    let new = match hunk.new.split_last() {
                        Some((last, rest)) if last.trim().is_empty() => rest,
                        _ => &hunk.new[..],
                    };
                    let again = locate(&work, cursor, hunk, old, new, hint, eol);
                    let again = match (again, old.is_empty()) {
                        (Err(_), _) | (_, true) => found,
                        (again, false) => again,
                    };
                    (again, old, new)
                }
                found => (found, &hunk.old[..], &hunk.new[..]),
            };
            let place = found.map_err(fail)?;
            if let Some(lines) = place.tolerant {
                tolerant.push((n, lines));
            }
            work.replace_range(place.range.clone(), &place.replacement);
            cursor = place.range.start + place.replacement.len();
            (old.len(), new.len())
        };
        shift += new as isize - old as isize;
        if hunk.old_no_newline || hunk.new_no_newline {
            final_break = !hunk.new_no_newline;
        }
    }
    if !final_break && !work.is_empty() {
        let cut = if work.ends_with("\r\n") { 2 } else { 1 };
        work.truncate(work.len() - cut);
    }
    Ok(Applied {
        text: work,
        tolerant,
    })
}

/// Where a hunk's old lines are, and what replaces them.
struct Place {
    range: std::ops::Range<usize>,
    replacement: String,
    /// The lines of a tolerant match.
    tolerant: Option<(usize, usize)>,
}

/// Finds `old` (the hunk's old lines, or fewer) below `cursor`; see the
/// module.
fn locate(
    work: &str,
    cursor: usize,
    hunk: &Hunk,
    old: &[String],
    new: &[String],
    hint: Option<usize>,
    eol: &str,
) -> Result<Place, Kind> {
    let old_text = joined(old, eol);
    let new_text = joined(new, eol);
    match matcher::find_lines(work, &old_text, cursor, hunk.end_of_file) {
        Found::Exact(at) => {
            let lines = matcher::lines_of(work, &at);
            let start = pick(&at, &lines, hint).ok_or(Kind::Ambiguous {
                lines,
                tolerant: false,
            })?;
            Ok(Place {
                range: *start..start + old_text.len(),
                replacement: new_text,
                tolerant: None,
            })
        }
        Found::Tolerant(windows) => {
            let lines: Vec<usize> = windows.iter().map(|w| w.line_numbers().0).collect();
            let window: &Window = pick(&windows, &lines, hint).ok_or(Kind::Ambiguous {
                lines,
                tolerant: true,
            })?;
            Ok(Place {
                range: window.range.clone(),
                replacement: matcher::reindent(work, window, &old_text, &new_text),
                tolerant: Some(window.line_numbers()),
            })
        }
        Found::Nowhere => {
            let above = match matcher::find_lines(work, &old_text, 0, hunk.end_of_file) {
                Found::Exact(at) => matcher::lines_of(work, &at).first().copied(),
                Found::Tolerant(w) => w.first().map(|w| w.line_numbers().0),
                Found::Nowhere => None,
            };
            Err(Kind::Nowhere {
                after: line_of(work, cursor),
                above,
                closest: matcher::closest(work, &old_text),
                end_of_file: hunk.end_of_file,
            })
        }
    }
}

/// The one match, or of several the one starting at line `hint`.
fn pick<'a, T>(matches: &'a [T], lines: &[usize], hint: Option<usize>) -> Option<&'a T> {
    match matches {
        [one] => Some(one),
        _ => {
            let hint = hint?;
            lines
                .iter()
                .position(|&l| l == hint)
                .and_then(|i| matches.get(i))
        }
    }
}

/// Where the text below `@@ TEXT` starts: after the first line at or
/// below `cursor` that is `context` (both trimmed), or failing that holds
/// it. Codex's models also repeat that line as the hunk's first: then the
/// hunk starts at it.
fn below_context(
    work: &str,
    cursor: usize,
    context: &str,
    first: Option<&String>,
) -> Option<usize> {
    let context = context.trim();
    if context.is_empty() {
        return Some(cursor);
    }
    let lines = || {
        work[cursor..]
            .split_inclusive('\n')
            .scan(cursor, |at, line| {
                let start = *at;
                *at += line.len();
                Some((start, line))
            })
    };
    let (start, line) = lines()
        .find(|(_, l)| l.trim() == context)
        .or_else(|| lines().find(|(_, l)| l.contains(context)))?;
    if first.is_some_and(|f| f.trim() == line.trim()) {
        return Some(start);
    }
    Some(start + line.len())
}

/// The 1-based line holding byte `offset` (0 for offset 0: the top).
fn line_of(work: &str, offset: usize) -> usize {
    work[..offset].bytes().filter(|&b| b == b'\n').count()
}

/// The byte where 0-based line `index` starts (the end, past the last).
fn offset_of_line(work: &str, index: usize) -> usize {
    if index == 0 {
        return 0;
    }
    work.match_indices('\n')
        .nth(index - 1)
        .map_or(work.len(), |(i, _)| i + 1)
}

/// Lines, each followed by `eol`.
fn joined(lines: &[String], eol: &str) -> String {
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 2).sum());
    for line in lines {
        out.push_str(line);
        out.push_str(eol);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{Action, parse};

    /// The hunks of the patch's one update.
    fn hunks(patch: &str) -> Vec<Hunk> {
        match parse(patch).map(|mut c| c.remove(0).action) {
            Ok(Action::Update { hunks, .. }) | Ok(Action::Delete { hunks }) => hunks,
            other => panic!("an update expected, not {other:?}"),
        }
    }

    fn codex(body: &str) -> Vec<Hunk> {
        hunks(&format!(
            "*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch"
        ))
    }

    fn applied(text: &str, hunks: &[Hunk]) -> String {
        apply(text, hunks).unwrap().text
    }

    fn refused(text: &str, hunks: &[Hunk]) -> String {
        apply(text, hunks).unwrap_err().message("src/f.py", hunks)
    }

    #[test]
    fn exact_hunks_apply_in_order() {
        let text = "a\nb\nc\nd\ne\nf\n";
        let h = codex("@@\n a\n-b\n+B\n@@\n c\n d\n-e\n+E\n@@\n f\n+g\n*** End of File");
        assert_eq!(applied(text, &h), "a\nB\nc\nd\nE\nf\ng\n");
        // Removals only, and an addition alone at the end.
        assert_eq!(applied(text, &codex("@@\n-c\n-d")), "a\nb\ne\nf\n");
        assert_eq!(applied(text, &codex("@@\n+z")), "a\nb\nc\nd\ne\nf\nz\n");
        // A match is of whole lines, never inside one.
        assert!(refused("xa\nb\n", &codex("@@\n-a\n+A")).contains("not found"));
    }

    #[test]
    fn context_lines_narrow_where_a_hunk_is_looked_for() {
        let text =
            "class A:\n    def f(self):\n        pass\nclass B:\n    def f(self):\n        pass\n";
        let h = codex("@@ class B:\n@@ def f(self):\n-        pass\n+        return 1");
        assert_eq!(
            applied(text, &h),
            "class A:\n    def f(self):\n        pass\nclass B:\n    def f(self):\n        return 1\n"
        );
        // Without it the hunk is ambiguous, naming both places.
        let m = refused(text, &codex("@@\n-        pass\n+        return 1"));
        assert!(m.contains("hunk 1 (@@), at patch line 3: its old lines match 2 places (starting at lines 3, 6)"), "{m}");
        // A line that only holds the text, and one the hunk repeats.
        assert_eq!(
            applied(
                text,
                &codex("@@ class B\n-    def f(self):\n+    def g(self):")
            ),
            text.replace("B:\n    def f", "B:\n    def g")
        );
        assert_eq!(
            applied(
                text,
                &codex("@@ class B:\n class B:\n-    def f(self):\n+    def g(self):")
            ),
            text.replace("B:\n    def f", "B:\n    def g")
        );
        // An addition alone goes below its context line.
        assert_eq!(applied("a\nb\nc\n", &codex("@@ a\n+x")), "a\nx\nb\nc\n");
        let m = refused(text, &codex("@@ class C:\n-pass\n+x"));
        assert!(
            m.contains("no line in the file is or holds 'class C:'"),
            "{m}"
        );
    }

    #[test]
    fn whitespace_tolerant_matches_must_be_unique_and_take_the_files_indentation() {
        let text = "fn f() {\n\tif x {\n\t\ty();  \n\t}\n}\n";
        let h = codex("@@\n     if x {\n-        y();\n+        z();\n     }");
        let done = apply(text, &h).unwrap();
        assert_eq!(done.text, "fn f() {\n\tif x {\n\t\tz();\n\t}\n}\n");
        assert_eq!(done.tolerant, [(1, (2, 4))]);
        let m = refused("  a\nb\n\ta\nb\n", &codex("@@\n-a\n b\n+c"));
        assert!(
            m.contains("match 2 places ignoring whitespace at line ends (starting at lines 1, 3)"),
            "{m}"
        );
    }

    #[test]
    fn a_missing_hunk_names_the_closest_region_or_where_it_is() {
        let text = "one\ntwo\nfn f() {\n    let a = 1;\n    a + 1\n}\n";
        let h = codex("@@ fn f() {\n-    let a = 2;\n+    let a = 3;\n     a + 1");
        let m = refused(text, &h);
        assert!(
            m.starts_with(
                "'src/f.py': hunk 1 (@@ fn f() {), at patch line 3: its old lines were not found \
                 below line 3, even ignoring whitespace at line ends; nothing was changed. The \
                 closest region is lines 4-5 ('-' the hunk, '+' the file):\n"
            ),
            "{m}"
        );
        assert!(
            m.contains("-    let a = 2;\n+    let a = 1;\n     a + 1\n"),
            "{m}"
        );
        // Hunks out of order: the second is above the first.
        let m = refused(text, &codex("@@\n-    a + 1\n+    a + 2\n@@\n-two\n+2"));
        assert!(m.contains("hunk 2 (@@), at patch line 6"), "{m}");
        assert!(
            m.contains("They are at line 2, above where it is looked for"),
            "{m}"
        );
        // Anchored at the end of the file.
        let m = refused("a\nb\n", &codex("@@\n-a\n+x\n*** End of File"));
        assert!(
            m.contains("not found in the file at the end of the file"),
            "{m}"
        );
    }

    #[test]
    fn a_unified_line_number_picks_one_of_several_matches() {
        let text = "x\ny\nx\ny\nx\ny\n";
        let diff = |at: usize| {
            hunks(&format!(
                "--- a/f\n+++ b/f\n@@ -{at},2 +{at},2 @@\n x\n-y\n+z\n"
            ))
        };
        assert_eq!(applied(text, &diff(3)), "x\ny\nx\nz\nx\ny\n");
        let m = refused(text, &diff(2));
        assert!(
            m.contains("match 3 places (starting at lines 1, 3, 5)"),
            "{m}"
        );
        // Moved by the hunks before it.
        let h = hunks("--- a/f\n+++ b/f\n@@ -1,1 +1,2 @@\n x\n+new\n@@ -5,2 +6,2 @@\n x\n-y\n+z\n");
        assert_eq!(applied(text, &h), "x\nnew\ny\nx\ny\nx\nz\n");
        // An insertion with no context goes after its line.
        let h = hunks("--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+mid\n");
        assert_eq!(applied("a\nb\nc\n", &h), "a\nb\nmid\nc\n");
    }

    #[test]
    fn line_breaks_and_the_last_line_are_the_files() {
        // CRLF file, LF patch: written CRLF.
        let h = codex("@@\n a\n-b\n+B\n+C");
        assert_eq!(applied("a\r\nb\r\nc\r\n", &h), "a\r\nB\r\nC\r\nc\r\n");
        // No break after the last line: kept so.
        assert_eq!(applied("a\nb", &h), "a\nB\nC");
        assert_eq!(applied("a\nb", &codex("@@\n b\n+c")), "a\nb\nc");
        // Unless a unified diff says otherwise, either way.
        let add_break =
            hunks("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
        assert_eq!(applied("a\nb", &add_break), "a\nb\n");
        let drop_break =
            hunks("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n");
        assert_eq!(applied("a\nb\n", &drop_break), "a\nb");
    }

    #[test]
    fn a_blank_last_old_line_may_be_dropped() {
        let h = codex("@@\n a\n-b\n+c\n \n*** End of File");
        assert_eq!(h[0].old, ["a", "b", ""]);
        assert_eq!(applied("a\nb\n", &h), "a\nc\n");
    }

    #[test]
    fn a_deletion_by_hunks_leaves_nothing() {
        let h = hunks("--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n");
        assert_eq!(applied("a\nb\n", &h), "");
        assert_eq!(applied("a\nb\nc\n", &h), "c\n");
    }
}
