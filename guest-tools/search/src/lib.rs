//! `search_files`' search: files whose path matches a glob, optionally
//! holding some bytes or a regular expression, under a directory of a root.
//! A library: the `search_files` component runs it on files; the document
//! reader's component runs it with [`Documents`] for `documents: true`, and
//! then also searches the text of documents and archive members.
//!
//! The walk is breadth-first with entries sorted by name (see
//! `loomfs_guest::walk`): the same tree always gives the same answer, and a
//! result cut short holds the matches closest to the start. Denied names
//! never reach the walk (the host's filesystem hides them), so a `.venv` or
//! a `node_modules` costs one match on its name, not a descent. Symlinks and
//! special files are skipped; unreadable directories are counted and skipped.
//!
//! A search that stops early (result limit, byte budget, time limit) says so
//! in `truncated` and `note`: a truncated result never looks complete. It
//! gives a `next_cursor` too, where the next call goes on
//! (`loomfs_guest::page`).
//!
//! By default the root's ignore files (`.gitignore`, `.ignore`) apply: an
//! ignored directory costs one match on its name, like a denied one, and the
//! result counts what it left out (`ignored`, and the `note` saying how to
//! include it). `ignored: "include"` searches everything; then no ignore file
//! is read.
//!
//! `contains` looks at a file's bytes as they are when it is UTF-8, or any
//! ASCII-compatible encoding and the needle is ASCII: a word found in a
//! windows-1252 or Shift_JIS file costs what it does in a UTF-8 one. The
//! file's encoding is asked only for a match on a line that is not UTF-8:
//! such a match names it, its preview decoded. A
//! UTF-16 file (told from a binary one by its NULs' pattern), and, for a
//! non-ASCII needle or a regular expression, a file that is not valid
//! UTF-8, is decoded first (`loomfs_guest::encoding`) and searched as text,
//! line numbers counted in it.
//!
//! With `documents: true`, a file whose bytes start a document or an
//! archive (as the document reader tells them) is read whole, within the
//! root's `max_document_bytes`, and its text searched as `read_document`
//! gives it: a match's line is that text's, for `read_document`'s
//! `offset`. An archive's members are searched one by one, those the deny
//! list hides never seen, a match naming its `member`. The byte budget
//! counts what is searched after inflating, so a small zip of a large text
//! costs its text.

mod documents;
mod lines;
mod needle;
mod note;
mod render;

use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use loomfs_guest::content::{self, SNIFF_BYTES};
use loomfs_guest::encoding;
use loomfs_guest::ignores::Ignored;
use loomfs_guest::page::Cursor;
use loomfs_guest::walk::{self, Flow, IgnoreFiles};
use loomfs_guest::{About, Answer, Context, Kind, Permission, ToolError, count_arg, locate_dir};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasip2::filesystem::types::{Descriptor as File, ErrorCode};

use lines::{Lines, context_line, lines_after, lines_before, preview};
use loomfs_guest::glob::Pattern;
use needle::Needle;
use note::note;
use render::render;

pub use documents::{Documents, Text};

const ONE_READ: u64 = 64 * 1024;
/// Most lines of `context` on each side of a match (as `rg -C` takes).
const MAX_CONTEXT: u32 = 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    root: String,
    /// Glob under path; ** crosses directories; without '/' a name at any depth.
    pattern: String,
    /// Directory relative to the root.
    #[serde(default)]
    path: Option<String>,
    /// Text to find in file contents.
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    regex: bool,
    /// Lines around each match (rg -C).
    #[serde(default)]
    #[schemars(range(max = 10))]
    context: Option<u32>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_results: Option<u32>,
    #[serde(default)]
    ignored: Ignored,
    #[serde(default)]
    cursor: Option<String>,
    /// Also in documents and archives.
    #[serde(default)]
    documents: bool,
}

/// One match (described in `Found::matches`, which has no item schema).
#[derive(Serialize)]
struct Match {
    /// Relative to the root; directories end in `/`.
    path: String,
    /// The archive member the match is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<String>,
    /// 1-based line of a `contains` match.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    /// The matching line, trimmed (with `context`, at its end only).
    #[serde(skip_serializing_if = "Option::is_none")]
    preview: Option<String>,
    /// With `context`: the lines just before the match (the last is line - 1)
    /// and just after it (the first is line + 1). A line is shown once: one
    /// that another match's context or line holds is not repeated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    before: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    after: Vec<String>,
    /// The file's encoding, when it is not UTF-8 and the match was found or shown decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    /// Which text of the search it is in: two members of an archive may
    /// share a name, and their lines are not one run.
    #[serde(skip)]
    text: u64,
}

/// The result; a count that is 0 and a flag that is false are left out.
#[derive(Serialize, JsonSchema, Default)]
pub struct Found {
    /// Objects, nearest first: `path` (relative to the root; a directory's ends in `/`) and,
    /// with `contains`, `line` (1-based), `preview` (the matching line, trimmed) and, when the file
    /// is not UTF-8 and was searched decoded or the line is not UTF-8, `encoding` (its WHATWG
    /// name: UTF-16LE, windows-1252, Shift_JIS...); with `context`, `before` and `after` (the
    /// lines around it; none shown twice).
    #[schemars(schema_with = "loomfs_guest::tool::any_array")]
    matches: Vec<Match>,
    /// True when the search stopped before seeing everything.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    truncated: bool,
    /// Pass as `cursor` to go on from where the search stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
    /// Files whose path matched the pattern.
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    examined_files: u64,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    scanned_bytes: u64,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    skipped_too_large: u64,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    skipped_binary: u64,
    /// Entries left out because the root's ignore files exclude them: directories (not
    /// entered; their contents are not counted) and files whose path matched the pattern.
    /// Always 0 with `ignored: include`.
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    ignored: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Why a search ended before it had seen everything.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    Results,
    Bytes,
    Time,
}

pub const DESCRIPTION: &str = "Find files by glob, nearest first; with contains, those holding that text, \
    with each matching line. .gitignored entries are skipped unless ignored is \
    include. Pass next_cursor as cursor to go on.";

/// What `search_files` says of itself.
pub fn about() -> About {
    About::new("search_files", DESCRIPTION, Permission::Read).path_optional()
}

/// What to do instead, when `path` is not a directory.
const NOT_A_DIRECTORY: &str = "search its parent directory";

/// Runs a search; `documents` reads documents for `documents: true`, which
/// a component without it refuses.
pub fn call(
    ctx: Context,
    args: Args,
    documents: Option<&dyn Documents>,
) -> Result<Answer<Found>, ToolError> {
    let started = Instant::now();
    let pattern = Pattern::new(&args.pattern, "pattern").map_err(ToolError::InvalidArguments)?;
    let needle = match args.contains.as_deref() {
        None => None,
        Some(text) => Some(Needle::new(text, args.regex).map_err(ToolError::InvalidArguments)?),
    };
    if args.regex && needle.is_none() {
        return Err(ToolError::InvalidArguments(
            "'regex' applies to 'contains', which is missing".into(),
        ));
    }
    let context = args.context.unwrap_or(0);
    if context > 0 && needle.is_none() {
        return Err(ToolError::InvalidArguments(
            "'context' applies to 'contains', which is missing".into(),
        ));
    }
    if context > MAX_CONTEXT {
        return Err(ToolError::InvalidArguments(format!(
            "'context' is {context}; at most {MAX_CONTEXT} lines are shown on each side"
        )));
    }
    if args.documents && needle.is_none() {
        return Err(ToolError::InvalidArguments(
            "'documents' applies to 'contains', which is missing".into(),
        ));
    }
    let documents = match (args.documents, documents) {
        (false, _) => None,
        (true, Some(reader)) => Some(reader),
        (true, None) => {
            return Err(ToolError::Refused(
                "'documents' needs the document reader, which the loom-fs server runs for it; \
                 this component alone searches files"
                    .into(),
            ));
        }
    };
    let cursor = Cursor::parse(args.cursor.as_deref())?;
    let ceiling = ctx.limits.max_results.max(1);
    let max_results = count_arg(
        "max_results",
        args.max_results,
        ceiling,
        ceiling,
        " (max_search_results)",
    )?;
    let at = locate_dir(&ctx, &args.root, args.path.as_deref(), NOT_A_DIRECTORY)?;
    let rel = at.rel.as_str();

    // Stop with what was found while there is still time to answer.
    let soft_deadline = loomfs_guest::soft_deadline(&ctx, started);
    let mut search = Search {
        pattern: &pattern,
        needle: needle.as_ref(),
        context: context as usize,
        max_results: max_results as usize,
        max_read_bytes: at.mount.max_read_bytes,
        documents: documents.map(|reader| (reader, args.root.as_str())),
        max_search_bytes: ctx.limits.max_search_bytes,
        start_prefix: if rel == "." {
            String::new()
        } else {
            format!("{rel}/")
        },
        found: Found::default(),
        taken: 0,
        cut: None,
        unreadable_files: 0,
        unsearched_documents: 0,
        deadline: soft_deadline,
        texts: 0,
    };
    let ignore_files = match args.ignored {
        Ignored::Skip => IgnoreFiles::Apply {
            root: Path::new(&at.mount.dir),
        },
        Ignored::Include => IgnoreFiles::Off,
    };
    let stats = walk::breadth_first(&at.full, rel, u32::MAX, ignore_files, |entry| {
        // What earlier pages passed: as `visit` would go on (ignored
        // entries pruned).
        if let Some(flow) = cursor.passed(entry, entry.ignored) {
            return flow;
        }
        search.taken = cursor.taken(entry);
        if Instant::now() >= soft_deadline {
            return search.stop(Cut::Time, entry);
        }
        search.visit(entry)
    })?;

    search.found.truncated = search.cut.is_some();
    search.found.next_cursor = search.cut.and_then(|(_, at)| at.next_after(cursor));
    search.found.note = note(
        &search,
        &stats,
        max_results,
        at.mount.max_read_bytes,
        ctx.limits.time_limit_ms,
    );
    let found = search.found;

    let mut text = vec![render(&found, rel, &args)];
    text.extend(found.note.clone());
    Ok(Answer {
        text,
        result: found,
        images: vec![],
    })
}

/// The state of one search.
struct Search<'a> {
    pattern: &'a Pattern,
    needle: Option<&'a Needle>,
    /// Lines of context on each side of a match.
    context: usize,
    max_results: usize,
    max_read_bytes: u64,
    /// The document reader and the root, for `documents: true`.
    documents: Option<(&'a dyn Documents, &'a str)>,
    max_search_bytes: u64,
    /// The start directory's root-relative path with a trailing `/`, or
    /// nothing for the root: stripped to match the pattern.
    start_prefix: String,
    found: Found,
    /// Results of the entry being visited given so far, this page's and
    /// earlier ones'.
    taken: u64,
    /// Why the search stopped early, and where.
    cut: Option<(Cut, Cursor)>,
    unreadable_files: u64,
    /// Of `found.skipped_too_large`, the documents (`documents: true`).
    unsearched_documents: u64,
    /// When to stop with what was found, while there is time to answer.
    deadline: Instant,
    /// Texts searched so far: a file's, or each of a document's.
    texts: u64,
}

impl Search<'_> {
    /// Stops the walk at `entry`, for `cut`; the next page starts there.
    fn stop(&mut self, cut: Cut, entry: &walk::Entry) -> Flow {
        self.cut = Some((cut, Cursor::at(entry, self.taken)));
        Flow::Stop
    }

    fn visit(&mut self, entry: &walk::Entry) -> Flow {
        let rel = entry
            .rel
            .strip_prefix(&self.start_prefix)
            .unwrap_or(&entry.rel);
        if entry.ignored {
            // Counted when it could have been a match or held one: a
            // directory always, a file if its path matches.
            let counts = match entry.kind {
                Kind::Directory => true,
                Kind::File => self.pattern.matches(rel),
                _ => false,
            };
            self.found.ignored += u64::from(counts);
            return Flow::Prune;
        }
        let is_dir = match entry.kind {
            Kind::File => false,
            // Searched below whether or not it matches.
            Kind::Directory if self.needle.is_none() => true,
            // Symlinks are never followed; special files never opened.
            _ => return Flow::Continue,
        };
        if !self.pattern.matches(rel) {
            return Flow::Continue;
        }
        if is_dir {
            return self.push(entry, format!("{}/", entry.rel), None, None, None);
        }
        self.found.examined_files += 1;
        let Some(needle) = self.needle else {
            return self.push(entry, entry.rel.clone(), None, None, None);
        };
        self.scan(entry, needle)
    }

    /// Adds a match of `entry` (in its archive member `member`), or stops
    /// the walk if the result is full (so `truncated` is only set when
    /// there really is more).
    fn push(
        &mut self,
        entry: &walk::Entry,
        path: String,
        member: Option<&str>,
        line: Option<(u64, &str)>,
        encoding: Option<&'static str>,
    ) -> Flow {
        if self.found.matches.len() == self.max_results {
            return self.stop(Cut::Results, entry);
        }
        self.taken += 1;
        let keep_indent = self.context > 0;
        self.found.matches.push(Match {
            path,
            member: member.map(str::to_string),
            line: line.map(|(n, _)| n),
            preview: line.map(|(_, text)| preview(text, keep_indent)),
            before: Vec::new(),
            after: Vec::new(),
            encoding,
            text: self.texts,
        });
        Flow::Continue
    }

    /// Reads a file whose name matched and records its matching lines.
    fn scan(&mut self, entry: &walk::Entry, needle: &Needle) -> Flow {
        let Ok(file) = entry.open() else {
            self.unreadable_files += 1;
            return Flow::Continue;
        };
        self.read_and_search(&file, entry, needle)
    }

    fn read_and_search(&mut self, file: &File, entry: &walk::Entry, needle: &Needle) -> Flow {
        // The head first, in one read of the most one host read brings
        // (never more than one byte past the size limit). A read shorter
        // than asked ended the file: most source files come whole this way,
        // with no stat. A longer file is stat'ed for its size, which the
        // limits are checked against before the rest is read.
        let ask = ONE_READ.min(self.max_read_bytes.saturating_add(1));
        let (mut buffer, whole) = match read_once(file, ask) {
            Ok(read) => read,
            Err(_) => {
                self.unreadable_files += 1;
                return Flow::Continue;
            }
        };
        let len = if whole {
            buffer.len() as u64
        } else {
            match file.stat() {
                Ok(stat) => stat.size,
                Err(_) => {
                    self.unreadable_files += 1;
                    return Flow::Continue;
                }
            }
        };
        if let Some((reader, root)) = self.documents
            && reader.is_document(&buffer)
            && let Some(flow) =
                self.search_document(file, entry, needle, (reader, root), &mut buffer, len)
        {
            return flow;
        }
        if len > self.max_read_bytes {
            self.found.skipped_too_large += 1;
            return Flow::Continue;
        }
        if self.found.scanned_bytes + len > self.max_search_bytes {
            return self.stop(Cut::Bytes, entry);
        }
        // A large binary file is skipped after its head. A NUL in text
        // means UTF-16 (content::is_binary's rule, its NUL looked for once).
        let nul = memchr::memchr(0, &buffer[..buffer.len().min(SNIFF_BYTES)]).is_some();
        if nul && !content::is_utf16(&buffer) {
            self.found.scanned_bytes += buffer.len() as u64;
            self.found.skipped_binary += 1;
            return Flow::Continue;
        }
        // Then the rest, the file as its size said (which was checked
        // against the limits): bytes it gained since are not read, and no
        // read asks for more than is there (the host fills what it is asked
        // for before reading into it).
        if !whole && read_up_to(file, &mut buffer, len).is_err() {
            self.unreadable_files += 1;
            return Flow::Continue;
        }
        buffer.truncate(len as usize);
        self.found.scanned_bytes += buffer.len() as u64;
        // Searched decoded: UTF-16, and a file that is not UTF-8 when the
        // needle could match a non-ASCII character (see the module).
        let utf16 = nul || buffer.starts_with(b"\xFF\xFE") || buffer.starts_with(b"\xFE\xFF");
        let decoded = (utf16 || (!needle.is_ascii_literal() && !encoding::is_utf8(&buffer, true)))
            .then(|| {
                let format = encoding::detect(&buffer, true);
                let (text, _) = encoding::decode_as(&buffer, format);
                (text, (!format.is_utf8()).then(|| format.name()))
            });
        let haystack = decoded.as_ref().map_or(&buffer[..], |(t, _)| t.as_bytes());
        // The bytes as they are, in a file that may not be UTF-8: its
        // encoding, asked once, at its first match on a line that is not
        // UTF-8 (one that is is shown as UTF-8), so a UTF-8 file costs
        // what it did.
        let mut lines = Lines {
            decoded: decoded.as_ref().map(|(_, name)| *name),
            legacy: None,
            file: &buffer,
        };
        // Lines earlier pages gave are passed.
        let mut passed = self.taken;
        self.search_text(entry, None, needle, haystack, &mut lines, &mut passed)
    }

    /// Records the matching lines of `haystack`, the text of `entry` (of
    /// its archive member `member`), passing the first `passed` of them
    /// (earlier pages gave them).
    fn search_text(
        &mut self,
        entry: &walk::Entry,
        member: Option<&str>,
        needle: &Needle,
        haystack: &[u8],
        lines: &mut Lines,
        passed: &mut u64,
    ) -> Flow {
        self.texts += 1;
        let mut flow = Flow::Continue;
        needle.for_each_line(haystack, |line, span| {
            if *passed > 0 {
                *passed -= 1;
                return true;
            }
            let (shown, name) = lines.show(&haystack[span.clone()]);
            flow = self.push(entry, entry.rel.clone(), member, Some((line, &shown)), name);
            if flow == Flow::Continue && self.context > 0 {
                self.add_context(haystack, span, line, &mut |t| lines.show(t).0.into_owned());
            }
            flow == Flow::Continue
        });
        flow
    }

    /// Gives the match just pushed (at `line`, `span` in `haystack`) the
    /// lines around it. The match before it, when it is of the same text,
    /// keeps in its `after` only the lines before this one's first, so no
    /// line is shown twice and overlapping ranges read as one.
    fn add_context(
        &mut self,
        haystack: &[u8],
        span: Range<usize>,
        line: u64,
        show: &mut impl FnMut(&[u8]) -> String,
    ) {
        let n = self.context;
        let count = self.found.matches.len();
        // The last line the previous match of this text shows.
        let shown_up_to = match count.checked_sub(2).map(|i| &mut self.found.matches[i]) {
            Some(prev) if prev.text == self.texts => match prev.line {
                Some(at) => {
                    prev.after.truncate((line - at - 1) as usize);
                    at + prev.after.len() as u64
                }
                None => 0,
            },
            _ => 0,
        };
        let first = line.saturating_sub(n as u64).max(shown_up_to + 1);
        let before = lines_before(haystack, span.start, (line - first) as usize);
        let after = lines_after(haystack, span.end, n);
        let this = self
            .found
            .matches
            .last_mut()
            .expect("the match just pushed");
        this.before = before.into_iter().map(|t| context_line(&show(t))).collect();
        this.after = after.into_iter().map(|t| context_line(&show(t))).collect();
    }
}

/// The first `ask` bytes of `file` at most, in one read, and whether they
/// are the whole file (a regular file's read comes back short only at its
/// end).
fn read_once(file: &File, ask: u64) -> Result<(Vec<u8>, bool), ErrorCode> {
    let (head, end) = file.read(ask, 0)?;
    let whole = end || (head.len() as u64) < ask;
    Ok((head, whole))
}

/// Reads `file` into `buffer` until it holds `limit` bytes or the file ends.
fn read_up_to(file: &File, buffer: &mut Vec<u8>, limit: u64) -> Result<(), ErrorCode> {
    /// Largest single read: a file is read in a few calls, never in one
    /// allocation the size of the limit.
    const CHUNK: u64 = 1 << 20;
    while (buffer.len() as u64) < limit {
        let offset = buffer.len() as u64;
        let (chunk, end) = file.read((limit - offset).min(CHUNK), offset)?;
        buffer.extend_from_slice(&chunk);
        if end || chunk.is_empty() {
            break;
        }
    }
    Ok(())
}
