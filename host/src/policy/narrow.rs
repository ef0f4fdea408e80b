//! `client_roots = "narrow"`: what a 2025-era client's own roots leave of
//! the configured ones for its session. A client root never widens: each
//! one that lies inside a configured root leaves that part of it, one that
//! holds a configured root leaves the whole root, and one outside every
//! configured root leaves nothing. A session whose client declared no
//! roots (or none yet) is served nothing.
//!
//! Applied after [`resolve`](super::resolve) on the same path: the path as
//! requested (`..` taken lexically) and its real location, symlinks
//! followed, must both lie in the narrowed area. A refusal names the rule,
//! `client_roots`, never a host path.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{Denial, Resolved, Root, Rule, normalise_lexically};

/// The parts of the configured roots a session may reach: per root, the
/// root-relative directories under which it may go (empty: the whole root).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Narrowing {
    areas: Vec<(String, PathBuf)>,
}

impl Narrowing {
    /// What the client's roots (`file://` URIs) leave of `roots`. A URI that
    /// is not a `file://` URI of an absolute path grants nothing.
    pub fn of_client_roots(roots: &[Arc<Root>], uris: &[String]) -> Narrowing {
        let mut areas = Vec::new();
        for uri in uris {
            let Some(path) = file_uri_path(uri) else {
                continue;
            };
            // The client names its path; the configured roots are real
            // paths. A path that does not resolve is taken as written.
            let path = std::fs::canonicalize(&path).unwrap_or(path);
            for root in roots {
                let area = if let Ok(rel) = path.strip_prefix(&root.path) {
                    rel.to_path_buf()
                } else if root.path.starts_with(&path) {
                    PathBuf::new()
                } else {
                    continue;
                };
                let entry = (root.name.clone(), area);
                if !areas.contains(&entry) {
                    areas.push(entry);
                }
            }
        }
        Narrowing { areas }
    }

    /// Whether `rel` (root-relative, no `..`) lies in the area of `root`.
    pub fn admits(&self, root: &str, rel: &Path) -> bool {
        self.areas
            .iter()
            .any(|(name, area)| name == root && rel.starts_with(area))
    }

    /// Whether some part of `root` is left.
    pub fn reaches(&self, root: &str) -> bool {
        self.areas.iter().any(|(name, _)| name == root)
    }

    /// The root-relative directories left of `root` (empty path: all of it).
    pub fn areas_of<'a>(&'a self, root: &'a str) -> impl Iterator<Item = &'a Path> + 'a {
        self.areas
            .iter()
            .filter(move |(name, _)| name == root)
            .map(|(_, area)| area.as_path())
    }

    /// Refuses a resolved path outside the area, as requested or as real.
    pub fn check(&self, resolved: &Resolved) -> Result<(), Denial> {
        let root = &resolved.root().name;
        let requested = normalise_lexically(resolved.requested());
        let inside = requested.is_some_and(|r| self.admits(root, &r))
            && self.admits(root, resolved.real_rel());
        if inside {
            return Ok(());
        }
        Err(Denial {
            rule: Rule::ClientRoots,
            message: "outside the client's roots: with client_roots = \"narrow\" this session \
                      is served only the parts of the server's roots that lie under a root its \
                      client declared"
                .into(),
        })
    }
}

/// The absolute path of a `file://` URI (`file:///p`, `file://localhost/p`;
/// on Windows `file:///C:/p`), percent-decoded; `None` for anything else.
fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let decoded = file_uri_bytes(uri, cfg!(windows))?;
    #[cfg(unix)]
    let path = {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(decoded))
    };
    // Only for the type-check of the pure layers: the server does not run
    // off Unix.
    #[cfg(not(unix))]
    let path = PathBuf::from(String::from_utf8(decoded).ok()?);
    // `..` in a client root is refused rather than interpreted.
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return None;
    }
    Some(path)
}

/// The path bytes of a `file://` URI, percent-decoded. Under Windows rules
/// (`windows`) the path must start with a drive (`file:///C:/p`, the colon
/// possibly encoded as `%3A`), and is given without the URI's leading slash
/// (`C:/p`); a URI naming a host other than `localhost` (a UNC share) or a
/// path without a drive names nothing there. Elsewhere the path is the
/// URI's as written (`file:///C:/p` is the Unix path `/C:/p`).
fn file_uri_bytes(uri: &str, windows: bool) -> Option<Vec<u8>> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') || rest.contains(['?', '#']) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(rest).collect::<Vec<u8>>();
    if !windows {
        return Some(decoded);
    }
    // `/C:/…` or `/C:` alone: a letter, a colon, then a separator or the end.
    match decoded.as_slice() {
        [b'/', drive, b':', tail @ ..]
            if drive.is_ascii_alphabetic() && matches!(tail.first(), None | Some(b'/' | b'\\')) =>
        {
            let mut path = decoded[1..].to_vec();
            if tail.is_empty() {
                path.push(b'/');
            }
            Some(path)
        }
        _ => None,
    }
}

// Its fixture holds a symlink: Unix only.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::policy::{Permission, resolve};

    fn roots(base: &Path) -> Vec<Arc<Root>> {
        for d in ["a/sub/deep", "a/other", "b"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/sub/f.txt"), "x").unwrap();
        std::fs::write(base.join("a/other/g.txt"), "x").unwrap();
        std::os::unix::fs::symlink("../other/g.txt", base.join("a/sub/link")).unwrap();
        vec![
            Arc::new(Root::workspace_for_tests("a", &base.join("a"))),
            Arc::new(Root::workspace_for_tests("b", &base.join("b"))),
        ]
    }

    fn uri(p: &Path) -> String {
        format!("file://{}", p.display())
    }

    #[test]
    fn a_client_root_inside_one_root_leaves_that_part_only() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let roots = roots(&base);
        let n = Narrowing::of_client_roots(&roots, &[uri(&base.join("a/sub"))]);
        assert!(n.reaches("a") && !n.reaches("b"));
        let check = |root: &str, path: &str| {
            let r = resolve(&roots, root, path, Permission::Read).unwrap();
            n.check(&r).map_err(|d| d.rule)
        };
        assert_eq!(check("a", "sub/f.txt"), Ok(()));
        assert_eq!(check("a", "sub/deep"), Ok(()));
        assert_eq!(check("a", "other/g.txt"), Err(Rule::ClientRoots));
        assert_eq!(check("a", "."), Err(Rule::ClientRoots));
        assert_eq!(check("a", "sub/../other/g.txt"), Err(Rule::ClientRoots));
        // A symlink inside the area leading out of it is refused by its target.
        assert_eq!(check("a", "sub/link"), Err(Rule::ClientRoots));
        assert_eq!(check("b", "."), Err(Rule::ClientRoots));
    }

    #[test]
    fn a_client_root_never_widens() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let roots = roots(&base);
        // Outside every root: nothing at all.
        let outside = tempfile::tempdir().unwrap();
        let n = Narrowing::of_client_roots(&roots, &[uri(outside.path())]);
        assert_eq!(n, Narrowing::default());
        // Holding a root: that root whole, not more.
        let n = Narrowing::of_client_roots(&roots, &[uri(&base.join("b"))]);
        assert!(n.reaches("b") && !n.reaches("a"));
        let n = Narrowing::of_client_roots(&roots, &[uri(&base)]);
        assert!(n.reaches("a") && n.reaches("b"));
        // Not a file URI, relative, or climbing: nothing.
        for bad in [
            "https://x/a".to_string(),
            "file://a/b".into(),
            format!("file://{}/b/../a", base.display()),
        ] {
            assert_eq!(
                Narrowing::of_client_roots(&roots, &[bad]),
                Narrowing::default()
            );
        }
        // No client roots: nothing.
        assert!(!Narrowing::of_client_roots(&roots, &[]).reaches("a"));
    }

    #[test]
    fn drive_uris_name_drive_paths_under_windows_rules_only() {
        let windows = |uri: &str| file_uri_bytes(uri, true).map(|b| String::from_utf8(b).unwrap());
        let unix = |uri: &str| file_uri_bytes(uri, false).map(|b| String::from_utf8(b).unwrap());
        assert_eq!(
            windows("file:///C:/Users/me").as_deref(),
            Some("C:/Users/me")
        );
        assert_eq!(
            windows("file:///c%3A/Users/me%20too").as_deref(),
            Some("c:/Users/me too")
        );
        assert_eq!(windows("file://localhost/D:/x").as_deref(), Some("D:/x"));
        assert_eq!(windows("file:///E:").as_deref(), Some("E:/"));
        // Not a drive, a drive-relative path, a UNC share, a device path.
        for uri in [
            "file:///Users/me",
            "file:///C:foo",
            "file:///CD:/x",
            "file:///1:/x",
            "file://server/share/x",
            "file:////server/share",
            "file:///%5C%5C.%5CC:/x",
        ] {
            assert_eq!(windows(uri), None, "{uri}");
        }
        // Elsewhere a drive URI is an ordinary absolute path.
        assert_eq!(unix("file:///C:/Users/me").as_deref(), Some("/C:/Users/me"));
        assert_eq!(unix("file:///Users/me").as_deref(), Some("/Users/me"));
    }
}
