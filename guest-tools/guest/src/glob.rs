//! The globs of a call: what a search matches paths against, what a tree
//! leaves out.
//!
//! `globset` compiles a glob to a regular expression of the `regex` crate,
//! whose matching is linear in the path whatever the pattern: no glob, not
//! even `*a*a*a…b` with dozens of stars, can make it backtrack. The pattern
//! is compiled once per call (each call runs in a fresh instance, so there is
//! nothing to keep between calls).

use globset::{GlobBuilder, GlobMatcher};

/// Longest pattern accepted, in bytes.
const MAX_LEN: usize = 1024;

/// A compiled glob.
#[derive(Debug)]
pub struct Pattern {
    matcher: GlobMatcher,
    /// A pattern without `/` matches the base name at any depth.
    base_name: bool,
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
        let glob = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid {arg} '{shown}': {}", e.kind()))?;
        Ok(Pattern {
            matcher: glob.compile_matcher(),
            base_name: !text.contains('/'),
        })
    }

    /// Whether `rel`, a `/`-separated path relative to the directory
    /// `path` names, matches.
    pub fn matches(&self, rel: &str) -> bool {
        if self.base_name {
            let name = rel.rsplit_once('/').map_or(rel, |(_, name)| name);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel)
        }
    }
}
