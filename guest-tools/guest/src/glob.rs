//! The globs of a call: what a search matches paths against, what a tree
//! leaves out.
//!
//! `globset` compiles a glob to a regular expression of the `regex` crate,
//! whose matching is linear in the path whatever the pattern: no glob, not
//! even `*a*a*a…b` with dozens of stars, can make it backtrack. The pattern
//! is compiled once per call (each call runs in a fresh instance, so there is
//! nothing to keep between calls). A pattern on names that is a plain name
//! or `*` and a plain end (`*`, `*.py`), the most common ones, is matched
//! by comparing bytes instead, and builds no automaton at all.

use globset::{GlobBuilder, GlobMatcher};

/// Longest pattern accepted, in bytes.
const MAX_LEN: usize = 1024;

/// A compiled glob.
#[derive(Debug)]
pub struct Pattern {
    matcher: Matcher,
    /// A pattern without `/` matches the base name at any depth.
    base_name: bool,
}

/// How a pattern is matched.
#[derive(Debug)]
enum Matcher {
    /// `*` then bytes with no glob syntax, on a name (which holds no `/`
    /// for the `*` to stop at): the names ending in them (`*`: all).
    Suffix(String),
    /// A name with no glob syntax: that name.
    Exact(String),
    /// Anything else: globset's automaton.
    Glob(GlobMatcher),
}

/// Whether `text` holds nothing a glob gives a meaning to.
fn plain(text: &str) -> bool {
    !text.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

impl Pattern {
    /// Compiles `text`, given as the argument `arg`, or says in one
    /// sentence why it cannot be a pattern. Patterns are relative to the
    /// directory the call's `path` names.
    pub fn new(text: &str, arg: &str) -> Result<Pattern, String> {
        let shown = crate::shown(text);
        // `./x` is `x`.
        let text = text.trim_start_matches("./");
        if text.is_empty() {
            return Err(format!("'{arg}' is empty: use '*' for every file name"));
        }
        if text.len() > MAX_LEN {
            return Err(format!(
                "'{arg}' is longer than {MAX_LEN} bytes ({} bytes)",
                text.len()
            ));
        }
        if text.contains('\0') {
            return Err(format!("{arg} '{shown}' holds a NUL byte"));
        }
        if text.starts_with('/') {
            return Err(format!(
                "{arg} '{shown}' is absolute: patterns are relative to the directory 'path' \
                 names (use 'path' to start elsewhere in the root)"
            ));
        }
        // `..` could only point outside the directory.
        if text.split('/').any(|part| part == "..") {
            return Err(format!(
                "{arg} '{shown}' contains '..': patterns are relative to the directory 'path' \
                 names (use 'path' to start elsewhere in the root)"
            ));
        }
        let base_name = !text.contains('/');
        let matcher = match text.strip_prefix('*') {
            Some(end) if base_name && plain(end) => Matcher::Suffix(end.to_string()),
            _ if base_name && plain(text) => Matcher::Exact(text.to_string()),
            _ => Matcher::Glob(
                GlobBuilder::new(text)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| format!("invalid {arg} '{shown}': {}", e.kind()))?
                    .compile_matcher(),
            ),
        };
        Ok(Pattern { matcher, base_name })
    }

    /// Whether `rel`, a `/`-separated path relative to the directory
    /// `path` names, matches.
    pub fn matches(&self, rel: &str) -> bool {
        let subject = match self.base_name {
            true => rel.rsplit_once('/').map_or(rel, |(_, name)| name),
            false => rel,
        };
        match &self.matcher {
            Matcher::Suffix(end) => subject.ends_with(end.as_str()),
            Matcher::Exact(name) => subject == name,
            Matcher::Glob(glob) => glob.is_match(subject),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte compares of plain patterns answer as globset does.
    #[test]
    fn plain_patterns_match_as_globset_does() {
        let paths = [
            "a.py",
            ".py",
            "py",
            "a.pyc",
            "x/a.py",
            "x.py/b",
            "x/.py",
            "a",
            "README.md",
            "readme.md",
            "x/README.md",
            "README.md/x",
            "*",
            "x/*",
            "é.py",
            "a.PY",
            "",
        ];
        for pattern in ["*", "*.py", "*py", "README.md", "*.md", "a"] {
            let compiled = Pattern::new(pattern, "pattern").unwrap();
            assert!(!matches!(compiled.matcher, Matcher::Glob(_)), "{pattern}");
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher();
            for path in paths {
                let name = path.rsplit_once('/').map_or(path, |(_, name)| name);
                assert_eq!(
                    compiled.matches(path),
                    glob.is_match(name),
                    "{pattern} {path}"
                );
            }
        }
        for pattern in [
            "*.p?",
            "x/*.py",
            "**",
            "*.{py,md}",
            "[ab].py",
            "\\*.py",
            "a*b",
        ] {
            let compiled = Pattern::new(pattern, "pattern").unwrap();
            assert!(matches!(compiled.matcher, Matcher::Glob(_)), "{pattern}");
        }
        assert!(Pattern::new("[a", "pattern").is_err());
    }
}
