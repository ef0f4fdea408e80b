//! Paths normalised by spelling alone: the one place `.` and `..` are
//! taken out of a path without asking the filesystem (for a path named
//! before it is resolved, or one whose entry itself matters, not where a
//! symlink leads).

use std::path::{Component, Path, PathBuf};

/// `path` with `.` dropped and each `..` taking back the name before it,
/// by spelling alone: nothing on disk is read, so `link/..` is where
/// `link` is, not its target's parent. A root (`/`, a Windows prefix) is
/// kept, and a `..` at it stays there, as the system takes `/..`. `None`
/// when a `..` climbs above the start of a relative path (a root-relative
/// path that leaves its root).
pub fn normalise_lexically(path: impl AsRef<Path>) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.as_ref().components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => return None,
            },
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::normalise_lexically;
    use std::path::PathBuf;

    fn normal(path: &str) -> Option<PathBuf> {
        normalise_lexically(path)
    }

    #[test]
    fn dots_go_and_each_parent_takes_back_a_name() {
        assert_eq!(normal("a/./b/../c"), Some("a/c".into()));
        assert_eq!(normal("./a//b/"), Some("a/b".into()));
        assert_eq!(normal("a/b/../.."), Some("".into()));
        assert_eq!(normal(""), Some("".into()));
        assert_eq!(normal("."), Some("".into()));
        // Names that only look like dots are names.
        assert_eq!(normal("a/.../..b/b.."), Some("a/.../..b/b..".into()));
    }

    #[test]
    fn a_relative_path_climbing_above_its_start_is_none() {
        assert_eq!(normal(".."), None);
        assert_eq!(normal("a/../.."), None);
        assert_eq!(normal("../a"), None);
        assert_eq!(normal("a/../../a"), None);
    }

    #[test]
    fn an_absolute_path_keeps_its_root_and_stops_there() {
        assert_eq!(normal("/a/./b/../c"), Some("/a/c".into()));
        assert_eq!(normal("/.."), Some("/".into()));
        assert_eq!(normal("/a/../../b"), Some("/b".into()));
        // Two slashes are one root on Unix, a share's prefix on Windows.
        #[cfg(unix)]
        assert_eq!(normal("//a/.."), Some("/".into()));
        #[cfg(windows)]
        assert_eq!(normal("C:\\a\\..\\..\\b"), Some("C:\\b".into()));
    }
}
