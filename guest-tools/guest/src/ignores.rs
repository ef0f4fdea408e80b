//! A root's own ignore rules: its `.gitignore` and `.ignore` files.
//!
//! Matching is the `ignore` crate's `gitignore` module (BurntSushi's, what
//! ripgrep uses): negation, anchoring, directory-only patterns, the last
//! matching line of a file winning. This module only decides *which* files
//! apply and in which order, as ripgrep does:
//!
//! - each directory's files apply to the paths below it, a deeper directory's
//!   before a shallower one's (the first that matches decides);
//! - any `.ignore` match, at any level, comes before any `.gitignore` match;
//! - the rules apply in every root, git repository or not (the guest cannot
//!   see `.git`, and a root is often a folder inside a repository).
//!
//! Not read: anything above the root (it is outside the root), `.git/info/
//! exclude` and git's global excludes file. Ignore files are read through
//! the host's filesystem like any other file, so a denied one is missing and
//! an unreadable one is counted, never fatal. A symlinked ignore file is not
//! followed, as git does not follow one. A path is never matched against its
//! parents here: the walk does not descend an ignored directory, which is
//! also what makes git's "a file inside an excluded directory cannot be
//! re-included" hold.

use std::path::Path;
use std::rc::Rc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

use crate::sys::{self, MAX_FAILED_ENTRIES};

/// The ignore files, in the order they are read in each directory. The
/// first is the one that takes precedence.
pub const FILE_NAMES: [&str; 2] = [".ignore", ".gitignore"];

/// Largest ignore file read; a larger one is counted as unreadable (a real
/// one is a few KiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Most wildcards (`*`, `?`, `[`) the ignore files of one walk may hold
/// together. Building a matcher costs memory by wildcard (each becomes
/// automaton states) before globset's own size cap can say no: 800 KB of
/// `?` lines took more than the guest's 256 MiB. A real ignore file holds a
/// few dozen; a file that would pass this total is not applied, and said.
pub const MAX_WILDCARDS: u64 = 50_000;

/// What one directory's ignore files say, and what its ancestors' say.
/// Shared (`Rc`) by every directory below it that has no ignore file of its
/// own.
pub struct Rules {
    /// The directory, root-relative with a trailing `/`; empty for the root.
    dir: String,
    /// Its `.ignore` and `.gitignore`, each empty when absent.
    ignore: Gitignore,
    gitignore: Gitignore,
    parent: Option<Rc<Rules>>,
}

impl Rules {
    /// Whether `rel` (root-relative) is ignored by the levels of the chain
    /// whose directory holds it. `is_dir`: whether it is a directory (a symlink is not).
    pub fn is_ignored(chain: Option<&Rc<Rules>>, rel: &str, is_dir: bool) -> bool {
        let matched = |pick: fn(&Rules) -> &Gitignore| {
            let mut level = chain;
            while let Some(rules) = level {
                // A level whose directory does not hold `rel` says nothing
                // of it (the walk never asks, but the chain must not lie).
                let Some(below) = rel.strip_prefix(rules.dir.as_str()) else {
                    level = rules.parent.as_ref();
                    continue;
                };
                match pick(rules).matched(below, is_dir) {
                    Match::None => level = rules.parent.as_ref(),
                    Match::Ignore(_) => return Some(true),
                    Match::Whitelist(_) => return Some(false),
                }
            }
            None
        };
        matched(|r| &r.ignore)
            .or_else(|| matched(|r| &r.gitignore))
            .unwrap_or(false)
    }
}

// A call's `ignored` argument: what to do with entries the root's ignore
// files exclude. Plain comments, here and on its variants: a doc comment
// would become a description in every tool's input schema, where the
// tool's description says it.
#[derive(serde::Deserialize, schemars::JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Ignored {
    // Searches leave them out and listings show them marked; neither
    // enters an ignored directory (counted either way).
    #[default]
    Skip,
    // Searched and listed inside like any other entry (listings still
    // mark them).
    Include,
}

/// The start of a walk is ignored, or lies in an ignored directory: it was
/// named, so what is below it is not judged by ignore files at all (inside
/// an ignored directory everything is ignored).
#[derive(Debug)]
pub struct StartIgnored;

/// Reads ignore files and counts those that could not be read.
#[derive(Default)]
pub struct Loader {
    /// Ignore files that exist but could not be read (unreadable, or too
    /// large) or whose rules could not be built (past [`MAX_WILDCARDS`],
    /// or globset's caps), and directories above a walk's start that could
    /// not be listed for theirs: their rules are not applied. An ignore
    /// file that is not a regular file (a symlink, a FIFO) is not one, and
    /// not counted.
    pub unreadable: u64,
    /// Wildcards in the ignore files applied so far.
    wildcards: u64,
}

impl Loader {
    /// The chain for the directory `dir_rel` (root-relative, `.` for the
    /// root) whose entries named in `present` are ignore files, opened in
    /// `dir`; `parent` when there is none, or none could be read.
    pub fn for_dir(
        &mut self,
        dir: &Descriptor,
        dir_rel: &str,
        present: &[&str],
        parent: Option<Rc<Rules>>,
    ) -> Option<Rc<Rules>> {
        if present.is_empty() {
            return parent;
        }
        let [ignore, gitignore] = FILE_NAMES.map(|name| {
            if present.contains(&name) {
                self.parse(dir.open_at(
                    PathFlags::empty(),
                    name,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                ))
            } else {
                Gitignore::empty()
            }
        });
        chained(dir_rel, ignore, gitignore, parent)
    }

    /// The chain of every directory from the root down to the parent of
    /// `start_rel` (root-relative; the root is mounted at `root`): the
    /// rules a walk starting at `start_rel` inherits. The start's own
    /// files are among the entries the walk reads. `Err(StartIgnored)`
    /// when the start, or a directory on the way, is itself ignored.
    ///
    /// A path with a `..` inherits nothing: where it lies depends on the
    /// symlinks it crosses, which the guest cannot see (the host resolved
    /// it), so the rules above it cannot be placed.
    pub fn ancestors(
        &mut self,
        root: &Path,
        start_rel: &str,
    ) -> Result<Option<Rc<Rules>>, StartIgnored> {
        if start_rel == "." || start_rel.split('/').any(|p| p == "..") {
            return Ok(None);
        }
        let mut chain = None;
        let mut dir_rel = String::from(".");
        for part in start_rel.split('/') {
            let dir = if dir_rel == "." {
                root.to_path_buf()
            } else {
                root.join(&dir_rel)
            };
            let listed = self.listed_in(&dir);
            let [ignore, gitignore] = [0, 1].map(|i| {
                if listed[i] {
                    self.parse(sys::open_file(&dir.join(FILE_NAMES[i]), false))
                } else {
                    Gitignore::empty()
                }
            });
            chain = chained(&dir_rel, ignore, gitignore, chain);
            let child = if dir_rel == "." {
                part.to_string()
            } else {
                format!("{dir_rel}/{part}")
            };
            if Rules::is_ignored(chain.as_ref(), &child, true) {
                return Err(StartIgnored);
            }
            dir_rel = child;
        }
        Ok(chain)
    }

    /// Which of [`FILE_NAMES`] `dir` lists as regular files. Listed first,
    /// never opened on the chance: a denied name is not listed, so it is
    /// never asked for, and the audit log records no refusal of a file
    /// nobody named. A directory that cannot be listed is counted.
    fn listed_in(&mut self, dir: &Path) -> [bool; 2] {
        let mut listed = [false; 2];
        // Read with `wasi:filesystem` itself: each entry comes with its
        // type (std's `read_dir` asks the host for every entry's metadata).
        let stream = sys::open_dir(dir, true).and_then(|d| d.read_directory());
        let Ok(stream) = stream else {
            self.unreadable += 1;
            return listed;
        };
        let mut in_a_row = 0;
        while in_a_row < MAX_FAILED_ENTRIES {
            match stream.read_directory_entry() {
                Ok(Some(entry)) => {
                    in_a_row = 0;
                    if let Some(i) = FILE_NAMES.iter().position(|n| entry.name == *n)
                        && entry.type_ == DescriptorType::RegularFile
                    {
                        listed[i] = true;
                    }
                }
                Ok(None) => break,
                // An entry that cannot be read (a name that is not UTF-8)
                // is no ignore file.
                Err(_) => in_a_row += 1,
            }
        }
        listed
    }

    /// The rules of one opened ignore file; empty when it is missing, or
    /// when it cannot be read (then counted).
    fn parse(&mut self, opened: Result<Descriptor, ErrorCode>) -> Gitignore {
        match opened {
            // Missing, or denied (which answers as missing); a symlink
            // (not followed) or a directory: not an ignore file.
            Err(ErrorCode::NoEntry | ErrorCode::Loop | ErrorCode::IsDirectory) => {
                Gitignore::empty()
            }
            Ok(file) if !is_regular(&file) => Gitignore::empty(),
            Err(_) => {
                self.unreadable += 1;
                Gitignore::empty()
            }
            Ok(file) => {
                let rules = read_small(&file).and_then(|text| {
                    let wildcards = wildcards(&text);
                    (self.wildcards + wildcards <= MAX_WILDCARDS)
                        .then(|| compile(&text).ok())
                        .flatten()
                        .inspect(|_| self.wildcards += wildcards)
                });
                // Not read, or rules too costly or impossible to build:
                // not applied, and said.
                rules.unwrap_or_else(|| {
                    self.unreadable += 1;
                    Gitignore::empty()
                })
            }
        }
    }
}

/// A new level on `parent`, unless both files are empty.
fn chained(
    dir_rel: &str,
    ignore: Gitignore,
    gitignore: Gitignore,
    parent: Option<Rc<Rules>>,
) -> Option<Rc<Rules>> {
    if ignore.is_empty() && gitignore.is_empty() {
        return parent;
    }
    let dir = if dir_rel == "." {
        String::new()
    } else {
        format!("{dir_rel}/")
    };
    Some(Rc::new(Rules {
        dir,
        ignore,
        gitignore,
        parent,
    }))
}

fn is_regular(file: &Descriptor) -> bool {
    file.get_type() == Ok(DescriptorType::RegularFile)
}

/// The whole content of a file of at most [`MAX_FILE_BYTES`].
fn read_small(file: &Descriptor) -> Option<Vec<u8>> {
    if file.stat().ok()?.size > MAX_FILE_BYTES {
        return None;
    }
    let mut content = Vec::new();
    loop {
        let (chunk, end) = file.read(64 * 1024, content.len() as u64).ok()?;
        content.extend_from_slice(&chunk);
        if content.len() as u64 > MAX_FILE_BYTES {
            return None;
        }
        if end || chunk.is_empty() {
            return Some(content);
        }
    }
}

/// `line` with its braces escaped (an escaped one stays as it is): git
/// reads `{` and `}` as themselves, globset as alternatives, so `*.{o,a}`
/// names the one file `x.{o,a}` in git and must here too.
fn literal_braces(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains(['{', '}']) {
        return line.into();
    }
    let mut out = String::with_capacity(line.len() + 4);
    let mut escaped = false;
    for c in line.chars() {
        if !escaped && (c == '{' || c == '}') {
            out.push('\\');
        }
        escaped = !escaped && c == '\\';
        out.push(c);
    }
    out.into()
}

/// The wildcards of an ignore file's text (see [`MAX_WILDCARDS`]).
fn wildcards(text: &[u8]) -> u64 {
    text.iter()
        .filter(|&&b| matches!(b, b'*' | b'?' | b'['))
        .count() as u64
}

/// Parses the text of an ignore file as `GitignoreBuilder::add` does
/// (lines split at `\n`, a trailing `\r` and a leading BOM dropped, lines
/// that are not UTF-8 or not a valid glob skipped), from bytes read here.
/// Paths are then matched relative to the file's directory. Fails when
/// the lines together make a matcher over globset's size caps (a file of
/// thousands of wildcard patterns can, well under [`MAX_FILE_BYTES`]).
pub fn compile(text: &[u8]) -> Result<Gitignore, ignore::Error> {
    let mut builder = GitignoreBuilder::new(".");
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        // A line that is not a valid glob is skipped, as git skips it.
        let _ = builder.add_line(None, &literal_braces(line));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of (directory, .ignore, .gitignore) from the root down.
    fn chain(levels: &[(&str, &str, &str)]) -> Option<Rc<Rules>> {
        levels
            .iter()
            .fold(None, |parent, (dir, ignore, gitignore)| {
                chained(
                    dir,
                    compile(ignore.as_bytes()).unwrap(),
                    compile(gitignore.as_bytes()).unwrap(),
                    parent,
                )
            })
    }

    #[test]
    fn deeper_files_decide_first_and_ignore_beats_gitignore() {
        let rules = chain(&[
            (".", "", "*.log\n/build/\n"),
            ("src", "!keep.log\n", "!*.log\n*.tmp\n"),
        ]);
        let ignored = |rel, is_dir| Rules::is_ignored(rules.as_ref(), rel, is_dir);
        assert!(ignored("a.log", false));
        assert!(!ignored("src/a.log", false), "src's negation is deeper");
        assert!(ignored("build", true));
        assert!(!ignored("build", false), "directory-only");
        assert!(!ignored("src/build", true), "anchored to the root");
        assert!(ignored("src/x.tmp", false));
        let with_ignore = chain(&[(".", "!x.tmp\n", ""), ("src", "", "*.tmp\n")]);
        assert!(
            !Rules::is_ignored(with_ignore.as_ref(), "src/x.tmp", false),
            "a .ignore anywhere comes before any .gitignore"
        );
    }

    #[test]
    fn parsing_follows_git() {
        let rules = chain(&[(".", "", "\u{feff}a.txt\r\n# c\n\\#b\nc.txt   \n!\n")]);
        let ignored = |rel| Rules::is_ignored(rules.as_ref(), rel, false);
        assert!(ignored("a.txt"), "BOM and CR dropped");
        assert!(ignored("#b") && ignored("c.txt"));
        let bare = chain(&[(".", "", "*.txt\n!\n")]);
        assert!(
            Rules::is_ignored(bare.as_ref(), "d.txt", false),
            "a bare ! re-includes nothing"
        );
        assert!(chain(&[(".", "", "# only a comment\n")]).is_none());
        let braces = chain(&[(".", "", "*.{o,a}\n\\{b}\n")]);
        let ignored_here = |rel| Rules::is_ignored(braces.as_ref(), rel, false);
        assert!(ignored_here("x.{o,a}"), "braces are literal, as in git");
        assert!(!ignored_here("x.o") && !ignored_here("x.a"));
        assert!(ignored_here("{b}"), "an escaped brace stays one");
        // Thousands of wildcard lines, well under the file cap, make a
        // matcher over globset's size cap: an error, never rules half built.
        let wild = "?".repeat(200) + "\n";
        let text = wild.repeat(2000);
        assert!(wildcards(text.as_bytes()) > MAX_WILDCARDS);
        assert!((text.len() as u64) < MAX_FILE_BYTES);
        assert!(compile(text.as_bytes()).is_err(), "too complex to build");
        let not_utf8 = compile(b"\xff\xfe\nz.txt\n").unwrap();
        assert!(
            not_utf8.matched("z.txt", false).is_ignore(),
            "only the bad line skipped"
        );
    }
}
