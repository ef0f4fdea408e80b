//! The deny list: names no tool may see or touch.
//!
//! Three layers add up and never subtract: [`BUILTIN_DENY`] (in code, so no
//! config can switch it off), the config's `deny`, and each root's `deny`.
//! They are compiled once per root into a [`DenyList`] with `globset`.
//!
//! A pattern is a name: it is matched against every component of a path, so
//! `.env` refuses `.env`, `sub/.env` and `.env/x`. Patterns holding `/` are
//! refused: a rule on names holds wherever a directory is moved, a rule on
//! paths would not (moving `config` away would uncover `config/prod`).
//! Matching is case-insensitive (`.ENV`, `ID_RSA`): case-insensitive
//! filesystems exist, and a differently cased secret is still a secret. It
//! is also blind to Unicode normalisation: patterns and names are compared
//! in NFC, so `café` spelled with a combining accent (NFD, as macOS writes
//! names) meets the pattern `café` however it was typed, as on a
//! normalisation-insensitive volume, where both spellings are one file.
//!
//! Every directory entry a guest reads and every component of every path it
//! opens is matched, so the common case is kept cheap: globset compiles a
//! case-insensitive glob to a regular expression, so the patterns that are a
//! plain name or a name with one `*` at either end (the whole built-in list)
//! are also kept as lower-case bytes ([`Plain`]), which decide an ASCII
//! name by a few byte compares (none for most names); globset matches
//! only the other patterns then, and every name that is not ASCII.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::{Component, Path};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

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
    // macOS's Finder metadata and AppleDouble files (resource forks, on
    // volumes without extended attributes): noise to a model, and a
    // `._name` holds another file's metadata.
    ".DS_Store",
    "._*",
];

/// A deny pattern that does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DenyError {
    #[error("empty deny pattern")]
    Empty,
    #[error(
        "deny pattern '{0}' holds '/': patterns are names, matched against every component of a path (write '{1}')"
    )]
    Path(String, String),
    #[error("invalid deny pattern '{pattern}': {reason}")]
    Invalid { pattern: String, reason: String },
}

/// A compiled deny list, matched per path component.
#[derive(Debug, Clone)]
pub struct DenyList {
    /// Every pattern: which one denies a name, and whether a name that is
    /// not ASCII is denied.
    names: GlobSet,
    /// The plain patterns, for ASCII names.
    plain: Plain,
    /// The patterns that are not plain, for ASCII names.
    others: GlobSet,
    patterns: Vec<String>,
}

/// The patterns that are a name, `*NAME` or `NAME*` with no other glob
/// syntax, in ASCII lower case: what globset's case-insensitive regex
/// decides for an ASCII name (its `(?i)` folds ASCII case only, and a name
/// holds no `/` for `*` to stop at), decided by comparing bytes.
#[derive(Debug, Clone, Default)]
struct Plain {
    exact: Vec<Box<[u8]>>,
    prefixes: Vec<Box<[u8]>>,
    suffixes: Vec<Box<[u8]>>,
    /// The bytes a name matching some pattern can start with (in lower
    /// case), and those it can end with: most names are passed on these
    /// two alone.
    firsts: Bytes,
    lasts: Bytes,
}

/// A set of bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Bytes([u128; 2]);

impl Bytes {
    fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 7)] |= 1 << (b & 127);
    }

    fn all(&mut self) {
        self.0 = [u128::MAX; 2];
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 7)] & (1 << (b & 127)) != 0
    }
}

impl Plain {
    /// Takes `glob` (a pattern as compiled) if it is plain; false if not.
    fn add(&mut self, glob: &str) -> bool {
        if !glob.is_ascii() || glob.contains(['?', '[', ']', '{', '}', '\\']) {
            return false;
        }
        let lower = glob.to_ascii_lowercase().into_bytes();
        let (first, last) = (lower.first().copied(), lower.last().copied());
        match (lower.iter().filter(|&&b| b == b'*').count(), first, last) {
            (0, Some(first), _) => {
                self.firsts.insert(first);
                self.exact.push(lower.into());
            }
            (1, Some(b'*'), _) => {
                match lower.get(1..).and_then(|end| end.last()) {
                    Some(&last) => self.lasts.insert(last),
                    None => self.lasts.all(),
                }
                self.suffixes.push(lower[1..].into());
            }
            (1, Some(first), Some(b'*')) => {
                self.firsts.insert(first);
                self.prefixes.push(lower[..lower.len() - 1].into());
            }
            _ => return false,
        }
        true
    }

    /// Whether `name`, an ASCII name, matches a plain pattern, in any case.
    /// Most names are passed on their first and last bytes alone.
    fn matches(&self, name: &[u8]) -> bool {
        let (Some(first), Some(last)) = (name.first(), name.last()) else {
            return self.suffixes.iter().any(|s| s.is_empty());
        };
        let like = |a: &[u8], b: &[u8]| a.eq_ignore_ascii_case(b);
        (self.firsts.contains(first.to_ascii_lowercase())
            && (self.exact.iter().any(|e| like(e, name))
                || self
                    .prefixes
                    .iter()
                    .any(|p| name.get(..p.len()).is_some_and(|n| like(n, p)))))
            || (self.lasts.contains(last.to_ascii_lowercase())
                && self
                    .suffixes
                    .iter()
                    .any(|s| name.len() >= s.len() && like(&name[name.len() - s.len()..], s)))
    }
}

impl DenyList {
    /// Compiles the built-in patterns plus `extra`, in order.
    pub fn new<'a>(extra: impl IntoIterator<Item = &'a str>) -> Result<DenyList, DenyError> {
        let mut names = GlobSetBuilder::new();
        let mut plain = Plain::default();
        let mut others = GlobSetBuilder::new();
        let mut patterns = Vec::new();
        for pattern in BUILTIN_DENY.iter().copied().chain(extra) {
            let glob = compile(pattern)?;
            if !plain.add(glob.glob()) {
                others.add(glob.clone());
            }
            names.add(glob);
            patterns.push(pattern.to_string());
        }
        let built = |set: GlobSetBuilder| {
            set.build().map_err(|e| DenyError::Invalid {
                pattern: String::new(),
                reason: e.to_string(),
            })
        };
        Ok(DenyList {
            names: built(names)?,
            plain,
            others: built(others)?,
            patterns,
        })
    }

    /// The pattern denying a single entry name, if any.
    pub fn match_name(&self, name: &OsStr) -> Option<&str> {
        // Nearly every name is allowed: answer those without collecting
        // every matching pattern.
        if !self.hides(name) {
            return None;
        }
        let i = self
            .names
            .matches(Path::new(&*folded(name)))
            .into_iter()
            .next()?;
        Some(&self.patterns[i])
    }

    /// The first pattern denying a component of a root-relative path.
    pub fn match_path(&self, rel: &Path) -> Option<&str> {
        rel.components().find_map(|c| match c {
            Component::Normal(name) => self.match_name(name),
            _ => None,
        })
    }

    /// Whether a directory entry called `name` must be hidden from listings
    /// and walks.
    pub fn hides(&self, name: &OsStr) -> bool {
        let bytes = name.as_encoded_bytes();
        if !bytes.is_ascii() || bytes.contains(&b'/') {
            return self.names.is_match(Path::new(&*folded(name)));
        }
        let plain = self.plain.matches(bytes);
        plain || (!self.others.is_empty() && self.others.is_match(name))
    }
}

/// `name` as patterns are compared: a name that is not ASCII in Unicode's
/// NFC and lower case (globset folds only ASCII case), borrowed when it is
/// ASCII (left to globset's folding) or not UTF-8 (no normalisation applies
/// to bytes that are not text).
fn folded(name: &OsStr) -> Cow<'_, OsStr> {
    match name.to_str() {
        Some(s) if !s.is_ascii() => Cow::Owned(fold(s).into()),
        _ => Cow::Borrowed(name),
    }
}

fn fold(s: &str) -> String {
    if is_nfc_quick(s.chars()) == IsNormalized::Yes {
        s.to_lowercase()
    } else {
        s.nfc().collect::<String>().to_lowercase()
    }
}

fn compile(pattern: &str) -> Result<Glob, DenyError> {
    if pattern.is_empty() {
        return Err(DenyError::Empty);
    }
    if pattern.contains('/') {
        let last = pattern
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        return Err(DenyError::Path(pattern.to_string(), last.to_string()));
    }
    let glob = if pattern.is_ascii() {
        Cow::Borrowed(pattern)
    } else {
        Cow::Owned(fold(pattern))
    };
    GlobBuilder::new(&glob)
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
    fn normalisation_insensitive() {
        // The pattern typed in NFC, names in NFC and NFD (as macOS writes
        // them), in any case; and the other way round.
        let d = list(&["café-secrets", "Geheimnis-Ä*"]);
        for path in [
            "café-secrets",
            "cafe\u{301}-secrets",
            "a/CAFE\u{301}-SECRETS/x",
            "geheimnis-ä.txt",
            "Geheimnis-A\u{308}.txt",
            "GEHEIMNIS-A\u{308}",
        ] {
            assert!(denied(&d, path).is_some(), "{path:?}");
            let name = Path::new(path).components().next_back().unwrap();
            if !path.contains('/') {
                assert!(d.hides(name.as_os_str()), "{path:?}");
            }
        }
        let nfd = list(&["cafe\u{301}-secrets"]);
        assert_eq!(
            denied(&nfd, "café-secrets").as_deref(),
            Some("cafe\u{301}-secrets")
        );
        assert_eq!(denied(&d, "cafe-secrets"), None);
        assert_eq!(denied(&d, "geheimnis-a.txt"), None);
    }

    #[test]
    fn macos_metadata_files() {
        let d = list(&[]);
        assert_eq!(denied(&d, ".DS_Store").as_deref(), Some(".DS_Store"));
        assert_eq!(denied(&d, "a/b/.ds_store").as_deref(), Some(".DS_Store"));
        assert_eq!(denied(&d, "._report.pdf").as_deref(), Some("._*"));
        assert_eq!(denied(&d, "docs/._.DS_Store").as_deref(), Some("._*"));
        assert_eq!(denied(&d, "_report.pdf"), None);
        assert_eq!(denied(&d, "a._b"), None);
        assert_eq!(denied(&d, "DS_Store"), None);
    }

    #[cfg(unix)]
    #[test]
    fn names_that_are_not_utf8_are_matched_as_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let d = list(&[]);
        assert!(d.hides(OsStr::from_bytes(b".env")));
        assert!(!d.hides(OsStr::from_bytes(b"caf\xe9")));
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
    fn hides_entries() {
        let d = list(&["secrets"]);
        assert!(d.hides(OsStr::new(".env")));
        assert!(d.hides(OsStr::new("SECRETS")));
        assert!(d.hides(OsStr::new("ID_RSA.pub")));
        assert!(!d.hides(OsStr::new("main.rs")));
    }

    /// The plain patterns' byte compares decide exactly what globset's
    /// regex does, for plain and other patterns side by side, whatever the
    /// case of the name.
    #[test]
    fn plain_patterns_decide_as_globset_does() {
        let extra = [
            "*.sqlite3",
            "Secrets",
            "GEHEIM*",
            "a?c",
            "[xy]z",
            "*mid*",
            "x*y",
            "café*",
            "*.Ünï",
            "{one,two}",
            "lit\\*",
        ];
        let d = list(&extra);
        let mut names: Vec<String> = [
            ".env",
            ".ENV.local",
            ".env.",
            "env",
            "a.PEM",
            ".pem",
            "pem",
            "id_rsa",
            "ID_RSA.pub",
            "xid_rsa",
            "._",
            "._x",
            "_.x",
            "db.SQLITE3",
            "secrets",
            "SECRETS",
            "secret",
            "geheimnis",
            "Geheim",
            "abc",
            "aXc",
            "ac",
            "xz",
            "yz",
            "zz",
            "amidst",
            "mid",
            "xay",
            "xy",
            "yx",
            "café-x",
            "CAFÉ",
            "a.ünï",
            "one",
            "two",
            "onetwo",
            "lit*",
            "lit",
            "node_modules",
            "Node_Modules",
            "node_modules2",
            ".DS_STORE",
            "shadow",
            "",
        ]
        .map(String::from)
        .to_vec();
        names.push("x".repeat(100) + ".key");
        names.push("y".repeat(100));
        // Pseudo-random ASCII names from the patterns' own letters.
        let letters = b"._-*?envpmkyidrsaSECRTGHxyzcmIDKPENV";
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 1 + (x % 9) as usize;
            names.push(
                (0..len)
                    .map(|i| letters[((x >> (i * 5)) % letters.len() as u64) as usize] as char)
                    .collect(),
            );
        }
        for name in &names {
            let name = OsStr::new(name);
            assert_eq!(
                d.hides(name),
                d.names.is_match(Path::new(&*folded(name))),
                "{name:?}"
            );
        }
        let every = list(&["*"]);
        assert!(every.hides(OsStr::new("f0000.txt")) && every.hides(OsStr::new("A")));
        // The built-in list is plain throughout: no regex for an ASCII name.
        assert!(list(&[]).others.is_empty());
        assert_eq!(d.others.len(), 8);
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
        let err = DenyList::new(["config/prod"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "deny pattern 'config/prod' holds '/': patterns are names, matched against every \
             component of a path (write 'prod')"
        );
        assert!(DenyList::new(["/abs"]).is_err());
        let err = DenyList::new(["[abc"]).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid deny pattern '[abc': "),
            "{err}"
        );
        assert!(DenyList::new(["{a,b"]).is_err());
    }
}
