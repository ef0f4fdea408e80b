//! The deny list: names no tool may see or touch.
//!
//! Three layers add up and never subtract: [`BUILTIN_DENY`] (in code, so no
//! config can switch it off), the config's `deny`, and each root's `deny`.
//! They are compiled once per root into a [`DenyList`] with `globset`.
//!
//! A pattern without `/` is matched against every component of a path, so
//! `.env` refuses `.env`, `sub/.env` and `.env/x`. A pattern with `/` is
//! matched against the root-relative path and each of its prefixes, so
//! `config/prod` also refuses everything below `config/prod`. Matching is
//! case-insensitive (`.ENV`, `ID_RSA`): case-insensitive filesystems exist, and
//! a differently cased secret is still a secret.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Patterns denied on every root, whatever the config says.
pub const BUILTIN_DENY: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git",
    ".svn",
    ".hg",
    ".venv",
    "node_modules",
    "__pycache__",
    ".mcp-trash",
    "shadow",
];

/// A deny pattern that does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DenyError {
    #[error("empty deny pattern")]
    Empty,
    #[error("invalid deny pattern '{pattern}': {reason}")]
    Invalid { pattern: String, reason: String },
}

/// A compiled deny list, matched per path component (and per path prefix for
/// patterns holding `/`).
#[derive(Debug, Clone)]
pub struct DenyList {
    names: GlobSet,
    name_patterns: Vec<String>,
    paths: GlobSet,
    path_patterns: Vec<String>,
}

impl DenyList {
    /// Compiles the built-in patterns plus `extra`, in order.
    pub fn new<'a>(extra: impl IntoIterator<Item = &'a str>) -> Result<DenyList, DenyError> {
        let mut names = GlobSetBuilder::new();
        let mut name_patterns = Vec::new();
        let mut paths = GlobSetBuilder::new();
        let mut path_patterns = Vec::new();
        for pattern in BUILTIN_DENY.iter().copied().chain(extra) {
            let glob = compile(pattern)?;
            if pattern.contains('/') {
                paths.add(glob);
                path_patterns.push(pattern.to_string());
            } else {
                names.add(glob);
                name_patterns.push(pattern.to_string());
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|e| DenyError::Invalid {
                pattern: String::new(),
                reason: e.to_string(),
            })
        };
        Ok(DenyList {
            names: build(names)?,
            name_patterns,
            paths: build(paths)?,
            path_patterns,
        })
    }

    /// The pattern denying a single entry name, if any.
    pub fn match_name(&self, name: &OsStr) -> Option<&str> {
        let i = self.names.matches(Path::new(name)).into_iter().next()?;
        Some(&self.name_patterns[i])
    }

    /// The first pattern denying a root-relative path: any of its components
    /// by name, or the path or one of its prefixes by a `/` pattern.
    /// `.` components are ignored; the path is expected to be normal (no `..`).
    pub fn match_path(&self, rel: &Path) -> Option<&str> {
        let mut prefix = PathBuf::new();
        for component in rel.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            if let Some(p) = self.match_name(name) {
                return Some(p);
            }
            prefix.push(name);
            if !self.path_patterns.is_empty()
                && let Some(i) = self.paths.matches(&prefix).into_iter().next()
            {
                return Some(&self.path_patterns[i]);
            }
        }
        None
    }

    /// Whether the entry `name` of the directory at root-relative `dir` must be
    /// hidden from listings and walks.
    pub fn hides(&self, dir: &Path, name: &OsStr) -> bool {
        if self.match_name(name).is_some() {
            return true;
        }
        !self.path_patterns.is_empty() && self.paths.is_match(dir.join(name))
    }
}

fn compile(pattern: &str) -> Result<Glob, DenyError> {
    // A leading `/` anchors a path pattern at the root, which path patterns
    // are anyway: matching is always against root-relative paths.
    let body = pattern.strip_prefix('/').unwrap_or(pattern);
    if body.is_empty() {
        return Err(DenyError::Empty);
    }
    GlobBuilder::new(body)
        .case_insensitive(true)
        .literal_separator(true)
        .build()
        .map_err(|e| DenyError::Invalid {
            pattern: pattern.to_string(),
            reason: e.kind().to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(extra: &[&str]) -> DenyList {
        DenyList::new(extra.iter().copied()).unwrap()
    }

    fn denied(d: &DenyList, path: &str) -> Option<String> {
        d.match_path(Path::new(path)).map(str::to_string)
    }

    #[test]
    fn builtin_names_at_any_depth() {
        let d = list(&[]);
        for (path, pattern) in [
            (".env", ".env"),
            ("a/b/.env", ".env"),
            (".env/inside", ".env"),
            (".env.local", ".env.*"),
            ("certs/server.pem", "*.pem"),
            ("tls.key", "*.key"),
            ("id_rsa", "id_rsa*"),
            ("home/.ssh/config", ".ssh"),
            ("id_ed25519.pub", "id_ed25519*"),
            (".git/config", ".git"),
            ("proj/node_modules/x/index.js", "node_modules"),
            ("src/__pycache__/m.pyc", "__pycache__"),
            (".mcp-trash/2026/x", ".mcp-trash"),
            ("etc/shadow", "shadow"),
            (".kube/config", ".kube"),
            ("a.keystore", "*.keystore"),
        ] {
            assert_eq!(denied(&d, path).as_deref(), Some(pattern), "{path}");
        }
    }

    #[test]
    fn case_insensitive() {
        let d = list(&[]);
        assert_eq!(denied(&d, ".ENV").as_deref(), Some(".env"));
        assert_eq!(denied(&d, "keys/ID_RSA").as_deref(), Some("id_rsa*"));
        assert_eq!(denied(&d, "Server.PEM").as_deref(), Some("*.pem"));
        assert_eq!(denied(&d, ".Git/HEAD").as_deref(), Some(".git"));
    }

    #[test]
    fn ordinary_names_pass() {
        let d = list(&[]);
        for path in [
            "src/main.rs",
            "environment.md",
            "env",
            ".envrc-notes/x",
            "keys.txt",
            "my.env.example/a",
            "gitignore",
            ".gitignore",
            "pem",
            "shadows",
            "README",
        ] {
            assert_eq!(denied(&d, path), None, "{path}");
        }
    }

    #[test]
    fn extra_patterns_add_to_builtins() {
        let d = list(&["*.sqlite3", "secrets"]);
        assert_eq!(denied(&d, "db/app.sqlite3").as_deref(), Some("*.sqlite3"));
        assert_eq!(denied(&d, "secrets/a.txt").as_deref(), Some("secrets"));
        assert_eq!(denied(&d, ".env").as_deref(), Some(".env"));
    }

    #[test]
    fn path_patterns_match_prefixes() {
        let d = list(&["config/prod", "/build/*.log", "**/private/*.txt"]);
        assert_eq!(denied(&d, "config/prod").as_deref(), Some("config/prod"));
        assert_eq!(
            denied(&d, "config/prod/db.yml").as_deref(),
            Some("config/prod")
        );
        assert_eq!(denied(&d, "config/dev/db.yml"), None);
        assert_eq!(denied(&d, "build/x.log").as_deref(), Some("/build/*.log"));
        assert_eq!(
            denied(&d, "build/sub/x.log"),
            None,
            "* stays in one segment"
        );
        assert_eq!(
            denied(&d, "a/b/private/n.txt").as_deref(),
            Some("**/private/*.txt")
        );
        assert_eq!(
            denied(&d, "other/config/prod"),
            None,
            "path patterns are anchored"
        );
    }

    #[test]
    fn hides_entries() {
        let d = list(&["config/prod"]);
        assert!(d.hides(Path::new("sub"), OsStr::new(".env")));
        assert!(d.hides(Path::new("config"), OsStr::new("prod")));
        assert!(d.hides(Path::new(""), OsStr::new("ID_RSA.pub")));
        assert!(!d.hides(Path::new("config"), OsStr::new("dev")));
        assert!(!d.hides(Path::new(""), OsStr::new("main.rs")));
    }

    #[test]
    fn dot_components_are_ignored() {
        let d = list(&[]);
        assert_eq!(denied(&d, "./a/./.env").as_deref(), Some(".env"));
        assert_eq!(denied(&d, "./a/b"), None);
    }

    #[test]
    fn bad_patterns_are_rejected() {
        assert_eq!(DenyList::new([""]).unwrap_err(), DenyError::Empty);
        assert_eq!(DenyList::new(["/"]).unwrap_err(), DenyError::Empty);
        let err = DenyList::new(["[abc"]).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid deny pattern '[abc': "),
            "{err}"
        );
        assert!(DenyList::new(["{a,b"]).is_err());
    }
}
