//! `edit_file`: exact text replacements, all or nothing, with a unified diff.
//!
//! Each `old_text` must occur exactly once in the text as it stands after
//! the edits before it (overlapping occurrences count); with `replace_all`
//! every occurrence is replaced, at least one needed. An `old_text` with no
//! exact occurrence may still match whole lines ignoring the whitespace at
//! their ends (`loomfs_guest::matcher`): applied if that match is unique,
//! with the file's indentation, and said so. Several matches are an error
//! naming the edit and the lines; none, an error showing the closest region
//! of the file; then nothing is written. A file with CRLF line endings keeps
//! them: the edits' line breaks are written the file's way.
//!
//! The file is edited as text decoded from its encoding
//! (`loomfs_guest::encoding`) and written back in it, BOM included: the
//! bytes of what no edit touched stay as they were. A file whose decoding
//! would not write back byte for byte (bytes invalid in its encoding) is
//! refused, and so is an edit bringing a character the encoding cannot
//! hold, naming it and where; nothing is written then. `dry_run` returns
//! the diff and changes nothing; otherwise the file is replaced atomically
//! (the host keeps its previous content in the root's trash).
//!
//! An edit is a compare-and-swap against the file it read, kept by the
//! host for every call: a file changed by someone else between the call's
//! read and its publish is not overwritten; the host runs the call again on
//! the new content (the edits apply if each still matches), then refuses
//! naming the file. Never "edited" with a change lost.

use std::io::Write;

use loomfs_guest::encoding::{self, Format};
use loomfs_guest::matcher::{self, Closest, Found};
use loomfs_guest::text::read_text;
use loomfs_guest::write::{Publish, replace};
use loomfs_guest::{About, Answer, Context, Permission, ToolError, locate, shown};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use similar::TextDiff;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Edit {
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    /// Relative to the root.
    path: String,
    #[schemars(length(min = 1))]
    edits: Vec<Edit>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Serialize, JsonSchema)]
struct Edited {
    path: String,
    /// False for a dry run.
    applied: bool,
    edits: usize,
    /// Unified diff of the change.
    diff: String,
    /// Where the previous content was kept (root-relative, in the trash); filled in by the host.
    previous: Option<String>,
    /// Edits (1-based) whose old_text matched only ignoring whitespace at line ends; the
    /// file's indentation was kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tolerant: Vec<usize>,
    /// With some replace_all: how many places each edit replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    replaced: Option<Vec<usize>>,
    /// The file's encoding, kept (absent for UTF-8 without BOM; see read_file).
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
}

const DESCRIPTION: &str = "Replace text in a text file, all edits or none: each old_text must match exactly once \
    (replace_all: every match), or as whole lines up to whitespace at their ends. dry_run \
    writes nothing.";

loomfs_guest::tool!(EditFile(Args) -> Edited, {
    About::new("edit_file", DESCRIPTION, Permission::Write)
});

fn call(ctx: Context, args: Args) -> Result<Answer<Edited>, ToolError> {
    if args.edits.is_empty() {
        return Err(ToolError::InvalidArguments("'edits' is empty".into()));
    }
    if let Some(n) = args.edits.iter().position(|e| e.old_text.is_empty()) {
        return Err(ToolError::InvalidArguments(format!(
            "edit {}: old_text is empty",
            n + 1
        )));
    }
    let at = locate(&ctx, &args.root, &args.path)?;
    let rel = at.rel.as_str();
    let max = at.mount.max_read_bytes;
    let original = read_text(&at.full, rel, max)?;
    let (text, matched) = apply(&args.edits, &original.text).map_err(|e| e.refusal(rel))?;
    if text != original.text {
        // Encoded before anything is written, a dry run too: a character
        // the file's encoding cannot hold refuses the call.
        let bytes = encoding::encode(&text, original.format)
            .map_err(|e| unencodable(&e, &args.edits, original.format, rel))?;
        if !args.dry_run {
            replace(&at, Publish::Replace, |f| {
                f.write_all(&bytes)?;
                Ok(bytes.len() as u64)
            })?;
        }
    }
    // The header names the file by the rule too, prefix included, as git
    // quotes such a path ("a/evil\nfile"): a line break in the name
    // would forge a line of the diff. The body is the file's content,
    // shown as read_file shows it.
    let diff = TextDiff::from_lines(&original.text, &text)
        .unified_diff()
        .context_radius(3)
        .header(&shown(&format!("a/{rel}")), &shown(&format!("b/{rel}")))
        .to_string();
    let unchanged = text == original.text;
    let format = original.format;
    let result = Edited {
        path: rel.to_string(),
        applied: !args.dry_run && !unchanged,
        edits: args.edits.len(),
        diff,
        previous: None,
        tolerant: (matched.iter().enumerate())
            .filter(|(_, m)| m.tolerant.is_some())
            .map(|(i, _)| i + 1)
            .collect(),
        replaced: (args.edits.iter().any(|e| e.replace_all))
            .then(|| matched.iter().map(|m| m.places).collect()),
        encoding: (format != Format::UTF8).then(|| format.name()),
    };
    let shown = at.shown();
    let mut summary = if unchanged {
        format!("the edits leave '{shown}' unchanged; nothing was written")
    } else if args.dry_run {
        format!(
            "dry run: {} edit(s) to '{shown}' would apply; nothing was written",
            result.edits
        )
    } else {
        format!("applied {} edit(s) to '{shown}'", result.edits)
    };
    for (i, m) in matched.iter().enumerate() {
        if let Some((first, last)) = m.tolerant {
            summary.push_str(&format!(
                "; edit {} matched ignoring whitespace at line ends ({}), written with the \
                 file's indentation",
                i + 1,
                span(first, last)
            ));
        }
        if args.edits[i].replace_all {
            summary.push_str(&format!("; edit {} replaced {} place(s)", i + 1, m.places));
        }
    }
    if !unchanged && format != Format::UTF8 {
        summary.push_str(&format!("; in {}, as the file was", format.describe()));
    }
    let mut text_blocks = vec![summary];
    if !result.diff.is_empty() {
        text_blocks.push(result.diff.clone());
    }
    Ok(Answer {
        text: text_blocks,
        result,
        images: vec![],
    })
}

/// How an edit matched the text.
struct Matched {
    /// Lines (1-based, first and last in the text it was applied to) of a
    /// whitespace-tolerant match (the first, with replace_all).
    tolerant: Option<(usize, usize)>,
    /// How many places it replaced.
    places: usize,
}

/// Why the edits do not apply to a text.
enum Mismatch {
    /// Edit `n` (1-based) matched exactly `count` times, on these lines
    /// (each once).
    Exact {
        n: usize,
        count: usize,
        lines: Vec<usize>,
    },
    /// Edit `n` matched nowhere exactly, and several runs of lines ignoring
    /// whitespace.
    Tolerant {
        n: usize,
        lines: Vec<(usize, usize)>,
    },
    /// Edit `n` matched nowhere; the file's region most like it.
    Nowhere { n: usize, closest: Option<Closest> },
}

/// The most places a refusal lists.
const MAX_PLACES: usize = 10;

fn span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

fn places<T>(all: &[T], one: impl Fn(&T) -> String) -> String {
    let mut out: Vec<String> = all.iter().take(MAX_PLACES).map(one).collect();
    if all.len() > MAX_PLACES {
        out.push(format!("{} more", all.len() - MAX_PLACES));
    }
    out.join(", ")
}

impl Mismatch {
    /// The refusal: what the model sent does not fit the file.
    fn refusal(self, rel: &str) -> ToolError {
        let shown = shown(rel);
        ToolError::Refused(match self {
            Mismatch::Exact { n, count, lines } => format!(
                "edit {n}: old_text matches {count} times in '{shown}' (line {}); include more \
                 context so it matches once, or pass replace_all; nothing was changed",
                places(&lines, usize::to_string)
            ),
            Mismatch::Tolerant { n, lines } => format!(
                "edit {n}: old_text is not in '{shown}' exactly, and ignoring whitespace at \
                 line ends it matches {} places ({}); include more context so it matches \
                 once; nothing was changed",
                lines.len(),
                places(&lines, |&(f, l)| span(f, l))
            ),
            Mismatch::Nowhere { n, closest: None } => format!(
                "edit {n}: old_text was not found in '{shown}', even ignoring whitespace at \
                 line ends, and no region of it is alike; nothing was changed"
            ),
            Mismatch::Nowhere {
                n,
                closest: Some(c),
            } => format!(
                "edit {n}: old_text was not found in '{shown}', even ignoring whitespace at \
                 line ends; nothing was changed. The closest region is {} ('-' old_text, '+' \
                 the file):\n{}",
                span(c.first, c.last),
                c.diff
            ),
        })
    }
}

/// `original` with every edit applied in order, each matching exactly once
/// in the text as it stands then (or, with replace_all, at least once),
/// exactly or else ignoring whitespace at line ends. Line breaks are
/// written the file's way.
fn apply(edits: &[Edit], original: &str) -> Result<(String, Vec<Matched>), Mismatch> {
    let crlf = original.contains("\r\n");
    let mut text = original.to_string();
    let mut matched = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        let n = i + 1;
        let old = line_breaks(&edit.old_text, crlf);
        let new = line_breaks(&edit.new_text, crlf);
        match matcher::find(&text, &old) {
            Found::Exact(_) if edit.replace_all => {
                let places = text.matches(old.as_str()).count();
                text = text.replace(&old, &new);
                matched.push(Matched {
                    tolerant: None,
                    places,
                });
            }
            Found::Exact(at) if at.len() == 1 => {
                text.replace_range(at[0]..at[0] + old.len(), &new);
                matched.push(Matched {
                    tolerant: None,
                    places: 1,
                });
            }
            Found::Exact(at) => {
                return Err(Mismatch::Exact {
                    n,
                    count: at.len(),
                    lines: matcher::lines_of(&text, &at),
                });
            }
            Found::Tolerant(windows) if edit.replace_all || windows.len() == 1 => {
                // Those that do not overlap, from the top; replaced from the
                // bottom, so the ranges above stay where they are.
                let mut apart: Vec<&matcher::Window> = Vec::new();
                for w in &windows {
                    if apart.last().is_none_or(|p| p.range.end <= w.range.start) {
                        apart.push(w);
                    }
                }
                let first = apart[0].line_numbers();
                let places = apart.len();
                let replacements: Vec<String> = (apart.iter())
                    .map(|w| matcher::reindent(&text, w, &old, &new))
                    .collect();
                for (w, r) in apart.iter().zip(replacements).rev() {
                    text.replace_range(w.range.clone(), &r);
                }
                matched.push(Matched {
                    tolerant: Some(first),
                    places,
                });
            }
            Found::Tolerant(windows) => {
                let lines = windows.iter().map(matcher::Window::line_numbers).collect();
                return Err(Mismatch::Tolerant { n, lines });
            }
            Found::Nowhere => {
                let closest = matcher::closest(&text, &old);
                return Err(Mismatch::Nowhere { n, closest });
            }
        }
    }
    Ok((text, matched))
}

/// The refusal of an edit bringing a character the file's encoding cannot
/// hold: the character, where it is in the edited text, and the first edit
/// whose new_text has it.
fn unencodable(e: &encoding::Unencodable, edits: &[Edit], format: Format, rel: &str) -> ToolError {
    let culprit = edits
        .iter()
        .position(|edit| edit.new_text.contains(e.ch))
        .map_or(String::new(), |i| {
            format!(" (from edit {}'s new_text)", i + 1)
        });
    ToolError::Refused(format!(
        "{e}, the file's encoding{culprit}; nothing was changed in '{}'. Use characters {} has, or convert the \
         file first with write_file and an encoding that has it, such as \"UTF-8\"",
        shown(rel),
        format.name()
    ))
}

/// `s` with its line breaks written the file's way.
fn line_breaks(s: &str, crlf: bool) -> String {
    let lf = s.replace("\r\n", "\n");
    if crlf { lf.replace('\n', "\r\n") } else { lf }
}
