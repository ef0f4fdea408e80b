use super::*;
use crate::policy::{DenyList, Perms, Role};
use std::os::unix::fs::symlink;
use tempfile::TempDir;

/// A parent directory holding the root `data` and its prefix siblings.
struct Fixture {
    _tmp: TempDir,
    parent: PathBuf,
    roots: Vec<Arc<Root>>,
}

fn root(name: &str, path: &Path, role: Role, extra_deny: &[&str]) -> Arc<Root> {
    Arc::new(Root {
        name: name.into(),
        path: path.to_path_buf(),
        role,
        perms: role.ceiling(),
        deny: DenyList::new(extra_deny.iter().copied()).unwrap(),
        extra_deny: extra_deny.iter().map(|s| s.to_string()).collect(),
        max_read_bytes: 1 << 20,
        max_document_bytes: 64 << 20,
        min_free_bytes: 0,
        trash_max_bytes: 0,
        repository: None,
    })
}

fn fixture() -> Fixture {
    let tmp = TempDir::new().unwrap();
    let parent = fs::canonicalize(tmp.path()).unwrap();
    let data = parent.join("data");
    for dir in [
        "data/sub/deep",
        "data/docs",
        "data-secrets",
        "data_backup",
        "data.bak",
        "outside",
    ] {
        fs::create_dir_all(parent.join(dir)).unwrap();
    }
    for file in [
        "data/a.txt",
        "data/sub/b.txt",
        "data/.env",
        "data-secrets/key.txt",
        "data_backup/x.txt",
        "data.bak/y.txt",
        "outside/secret.txt",
    ] {
        fs::write(parent.join(file), file).unwrap();
    }
    // Inside → inside (relative), and every kind of escape.
    symlink("a.txt", data.join("link_in")).unwrap();
    symlink("sub", data.join("linkdir_in")).unwrap();
    symlink("../outside/secret.txt", data.join("link_out_file")).unwrap();
    symlink("../outside", data.join("linkdir")).unwrap();
    symlink("../../outside", data.join("sub/link_mid")).unwrap();
    symlink("../outside/nothing-here", data.join("dangling_out")).unwrap();
    symlink("missing.txt", data.join("dangling_in")).unwrap();
    symlink("chain2", data.join("chain1")).unwrap();
    symlink("link_out_file", data.join("chain2")).unwrap();
    symlink("chain_in2", data.join("chain_in1")).unwrap();
    symlink("sub/b.txt", data.join("chain_in2")).unwrap();
    symlink("loop_b", data.join("loop_a")).unwrap();
    symlink("loop_a", data.join("loop_b")).unwrap();
    symlink(data.join("a.txt"), data.join("abs_in")).unwrap();
    symlink("/etc/passwd", data.join("abs_out")).unwrap();
    symlink(".env", data.join("notes.txt")).unwrap();
    symlink("../data-secrets", data.join("sibling")).unwrap();
    let roots = vec![
        root("data", &data, Role::Workspace, &["*.tmp"]),
        root("docs", &parent.join("data-secrets"), Role::Reference, &[]),
    ];
    Fixture {
        _tmp: tmp,
        parent,
        roots,
    }
}

fn check(f: &Fixture, path: &str, op: Permission) -> Result<Resolved, Denial> {
    resolve(&f.roots, "data", path, op)
}

fn rule(f: &Fixture, path: &str, op: Permission) -> Option<Rule> {
    check(f, path, op).err().map(|d| d.rule)
}

#[test]
fn plain_paths_resolve_inside() {
    let f = fixture();
    let r = check(&f, "sub/b.txt", Permission::Read).unwrap();
    assert_eq!(r.real_rel(), Path::new("sub/b.txt"));
    assert!(r.exists());
    assert!(!r.is_root());
    assert_eq!(r.requested(), "sub/b.txt");
    for p in ["", ".", "./", "sub/..", "sub/deep/../..", "./sub/./../"] {
        let r = check(&f, p, Permission::Read).unwrap();
        assert!(r.is_root(), "{p}");
    }
    let new = check(&f, "sub/new/dir/file.txt", Permission::Write).unwrap();
    assert!(!new.exists());
    assert_eq!(new.real_rel(), Path::new("sub/new/dir/file.txt"));
}

#[test]
fn the_root_itself_is_never_mutated() {
    let f = fixture();
    symlink(".", f.roots[0].path.join("dot")).unwrap();
    for p in [
        ".",
        "./",
        "sub/..",
        "sub/deep/../..",
        "dot",
        "linkdir_in/..",
    ] {
        for op in [Permission::Write, Permission::Delete] {
            let d = check(&f, p, op).unwrap_err();
            assert_eq!(d.rule, Rule::RootItself, "{p}");
            assert_eq!(
                d.message,
                "the root itself cannot be written, moved or deleted"
            );
        }
        assert!(check(&f, p, Permission::Read).unwrap().is_root(), "{p}");
    }
}

#[test]
fn unknown_root() {
    let f = fixture();
    let d = resolve(&f.roots, "nope", "a.txt", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::UnknownRoot);
    assert_eq!(d.message, "unknown root 'nope'; roots: data, docs");
}

#[test]
fn refusals_before_the_checks() {
    let f = fixture();
    let d = check(&f, "a.txt\0/../../etc/passwd", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::NulByte);
    assert_eq!(d.message, "path contains a NUL byte");
    let d = check(&f, "/etc/passwd", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::AbsolutePath);
    assert_eq!(
        d.message,
        "absolute paths are refused; give a path relative to the root"
    );
    let d = check(&f, "", Permission::Write).unwrap_err();
    assert_eq!(d.rule, Rule::EmptyPath);
    assert_eq!(
        d.message,
        "empty path: name a file or directory inside the root"
    );
    assert_eq!(rule(&f, "", Permission::Delete), Some(Rule::EmptyPath));
    assert!(check(&f, "", Permission::Read).is_ok());
}

#[test]
fn over_long_paths_and_names_are_refused() {
    let f = fixture();
    let name = "n".repeat(MAX_NAME_BYTES);
    assert_eq!(rule(&f, &name, Permission::Write), None);
    let d = check(&f, &format!("sub/{name}x"), Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::TooLong);
    assert_eq!(
        d.message,
        "a name in the path is 256 bytes long; at most 255 are allowed"
    );
    let fits = "a/".repeat(MAX_PATH_BYTES / 2) + "b";
    assert_eq!(fits.len(), MAX_PATH_BYTES);
    assert_eq!(rule(&f, &fits, Permission::Write), None);
    let d = check(&f, &format!("{fits}b"), Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::TooLong);
    assert_eq!(
        d.message,
        "path is 4096 bytes long; at most 4095 are allowed"
    );
}

#[test]
fn permission_is_checked_first() {
    let f = fixture();
    let d = resolve(&f.roots, "docs", "key.txt", Permission::Write).unwrap_err();
    assert_eq!(d.rule, Rule::Permission);
    assert_eq!(
        d.message,
        "root 'docs' (role reference) grants [read], not write"
    );
    // Even a path that would also escape and be denied: permission bites first.
    let d = resolve(&f.roots, "docs", "../data/.env", Permission::Delete).unwrap_err();
    assert_eq!(
        d.message,
        "root 'docs' (role reference) grants [read], not delete"
    );
    // Narrowed permissions are named as effective.
    let mut roots = f.roots.clone();
    roots.push(Arc::new(Root {
        name: "src".into(),
        path: f.parent.join("data_backup"),
        role: Role::Sourcecode,
        perms: Perms::of(&[Permission::Read]),
        deny: DenyList::new([]).unwrap(),
        extra_deny: vec![],
        max_read_bytes: 1,
        max_document_bytes: 64 << 20,
        min_free_bytes: 0,
        trash_max_bytes: 0,
        repository: None,
    }));
    let d = resolve(&roots, "src", "x.txt", Permission::Write).unwrap_err();
    assert_eq!(
        d.message,
        "root 'src' (role sourcecode) grants [read], not write"
    );
}

#[test]
fn traversal_in_every_position() {
    let f = fixture();
    for p in [
        "..",
        "../",
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "sub/deep/../../../outside",
        "./../data/../outside",
        "a.txt/../../outside",
        "sub/../..",
        "new/../../x",
        "../data/a.txt",
        "....//../x",
    ] {
        let d = check(&f, p, Permission::Read);
        if p == "....//../x" {
            // `....` is an ordinary name; `..` then pops it: inside.
            assert!(d.is_ok(), "{p}");
            continue;
        }
        let d = d.unwrap_err();
        assert_eq!(d.rule, Rule::Confinement, "{p}");
        assert_eq!(d.message, "path escapes the root", "{p}");
    }
}

#[test]
fn prefix_siblings_are_outside() {
    let f = fixture();
    for p in [
        "../data-secrets/key.txt",
        "../data_backup/x.txt",
        "../data.bak/y.txt",
        "sibling/key.txt",
        "sibling",
    ] {
        assert_eq!(
            rule(&f, p, Permission::Read),
            Some(Rule::Confinement),
            "{p}"
        );
    }
}

#[test]
fn symlinks_inside_are_followed() {
    let f = fixture();
    let r = check(&f, "link_in", Permission::Read).unwrap();
    assert_eq!(r.real_rel(), Path::new("a.txt"));
    let r = check(&f, "linkdir_in/deep", Permission::Read).unwrap();
    assert_eq!(r.real_rel(), Path::new("sub/deep"));
    let r = check(&f, "chain_in1", Permission::Read).unwrap();
    assert_eq!(r.real_rel(), Path::new("sub/b.txt"));
    let r = check(&f, "dangling_in", Permission::Write).unwrap();
    assert_eq!(r.real_rel(), Path::new("missing.txt"));
    assert!(!r.exists());
    let r = check(&f, "linkdir_in/../a.txt", Permission::Read).unwrap();
    assert_eq!(r.real_rel(), Path::new("a.txt"));
}

#[test]
fn symlinks_out_are_refused_in_every_position() {
    let f = fixture();
    for (p, op) in [
        ("link_out_file", Permission::Read),
        ("linkdir", Permission::Read),
        ("linkdir/secret.txt", Permission::Read),
        ("linkdir/payload.sh", Permission::Write),
        ("linkdir/new/deeper/payload.sh", Permission::Write),
        ("sub/link_mid/secret.txt", Permission::Read),
        ("dangling_out", Permission::Write),
        ("chain1", Permission::Read),
        ("abs_out", Permission::Read),
        ("abs_in", Permission::Read),
        ("linkdir/../data/a.txt", Permission::Read),
        // Back out of missing names onto a link: the walk checks it.
        ("missing/../linkdir/secret.txt", Permission::Read),
        ("missing/deeper/../../linkdir", Permission::Write),
        ("sub/missing/../link_mid/secret.txt", Permission::Read),
        ("missing/../link_out_file", Permission::Read),
    ] {
        let d = check(&f, p, op).unwrap_err();
        assert_eq!(d.rule, Rule::Confinement, "{p}");
        assert_eq!(d.message, "path escapes the root", "{p}");
    }
}

/// When the walk cannot look at a name (here: the full path passes
/// PATH_MAX, ENAMETOOLONG; as a user also a directory it may not
/// search), it refuses instead of treating the rest as missing.
#[test]
fn a_walk_that_cannot_see_refuses() {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    let f = fixture();
    let root = &f.roots[0].path;
    let name = "d".repeat(MAX_NAME_BYTES);
    let mut dir =
        rustix::fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    let mut rel = String::new();
    for _ in 0..15 {
        mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        dir = openat(
            &dir,
            name.as_str(),
            OFlags::DIRECTORY | OFlags::RDONLY,
            Mode::empty(),
        )
        .unwrap();
        rel += &name;
        rel.push('/');
    }
    rel += &"f".repeat(MAX_PATH_BYTES - rel.len());
    assert!(root.as_os_str().len() + 1 + rel.len() > 4096);
    let d = check(&f, &rel, Permission::Write).unwrap_err();
    assert_eq!(d.rule, Rule::Confinement);
    assert_eq!(
        d.message,
        "path cannot be resolved: a directory on the way cannot be searched"
    );
}

#[test]
fn symlink_loops_are_refused() {
    let f = fixture();
    let d = check(&f, "loop_a", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::Confinement);
    assert_eq!(
        d.message,
        "path cannot be resolved: too many levels of symbolic links"
    );
    assert_eq!(
        rule(&f, "loop_b/x", Permission::Write),
        Some(Rule::Confinement)
    );
}

#[test]
fn denied_names_as_requested_and_as_resolved() {
    let f = fixture();
    for (p, pattern) in [
        (".env", ".env"),
        (".ENV", ".env"),
        ("sub/.env", ".env"),
        ("sub/../.env", ".env"),
        ("notes.txt", ".env"),
        ("deep/dir/id_rsa", "id_rsa*"),
        ("x/ID_RSA.pub", "id_rsa*"),
        (".git/config", ".git"),
        (".mcp-trash/2026/a.txt", ".mcp-trash"),
        ("scratch.tmp", "*.tmp"),
        (".env/../a.txt", ".env"),
    ] {
        let d = check(&f, p, Permission::Read).unwrap_err();
        assert_eq!(d.rule, Rule::Deny, "{p}");
        assert_eq!(
            d.message,
            format!("matches deny pattern '{pattern}'"),
            "{p}"
        );
    }
    // The root's own patterns do not apply to other roots.
    assert!(resolve(&f.roots, "docs", "x.tmp", Permission::Read).is_ok());
}

#[test]
fn confinement_bites_before_deny() {
    let f = fixture();
    let d = check(&f, "../outside/.env", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::Confinement);
}

#[test]
fn messages_carry_no_host_path() {
    let f = fixture();
    let host = f.parent.to_string_lossy().to_string();
    for p in [
        "../outside/secret.txt",
        "link_out_file",
        "abs_out",
        ".env",
        "loop_a",
        "/etc/passwd",
    ] {
        let d = check(&f, p, Permission::Read).unwrap_err();
        assert!(!d.message.contains(&host), "{p}: {}", d.message);
        assert!(!d.message.contains("/etc"), "{p}: {}", d.message);
    }
}

#[test]
fn an_unknown_root_is_named_by_the_naming_rule() {
    let f = fixture();
    let d = resolve(&f.roots, "da\nta", "a.txt", Permission::Read).unwrap_err();
    assert_eq!(d.rule, Rule::UnknownRoot);
    assert!(
        d.message.starts_with(r#"unknown root '"da\nta"'; roots: "#),
        "{}",
        d.message
    );
    // A root name longer than any path is shown clipped, not whole.
    let long = "x".repeat(MAX_PATH_BYTES + 1);
    let d = resolve(&f.roots, &long, "a.txt", Permission::Read).unwrap_err();
    assert!(d.message.len() < 300, "{}", d.message);
}

mod property {
    use super::*;
    use proptest::prelude::*;

    fn part() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "..",
            ".",
            "",
            "a.txt",
            "sub",
            "deep",
            "docs",
            "new",
            "é",
            "日本",
            "link_in",
            "linkdir_in",
            "link_out_file",
            "linkdir",
            "link_mid",
            "dangling_out",
            "dangling_in",
            "chain1",
            "chain_in1",
            "loop_a",
            "abs_in",
            "abs_out",
            "sibling",
            "data",
            "outside",
            "data-secrets",
            "notes.txt",
            ".env",
            "..\u{2215}",
            "...",
        ])
    }

    fn path() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(part(), 0..8),
            prop::collection::vec(prop::sample::select(vec!["/", "//", "/./"]), 8),
            any::<bool>(),
        )
            .prop_map(|(parts, seps, trailing)| {
                let mut s = String::new();
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        s.push_str(seps[i % seps.len()]);
                    }
                    s.push_str(p);
                }
                if trailing {
                    s.push('/');
                }
                s
            })
    }

    /// Random paths from traversal parts, separators, unicode and every
    /// symlink of the fixture: whatever is accepted lies inside the root,
    /// agrees with the OS's own resolution, and is not denied.
    #[test]
    fn accepted_paths_stay_inside() {
        let f = fixture();
        let root_path = f.roots[0].path.clone();
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 4000,
            ..ProptestConfig::default()
        });
        let accepted = std::cell::Cell::new(0u32);
        runner
            .run(&(path(), any::<bool>()), |(p, write)| {
                let op = if write {
                    Permission::Write
                } else {
                    Permission::Read
                };
                if let Ok(r) = check(&f, &p, op) {
                    accepted.set(accepted.get() + 1);
                    prop_assert!(r.real.starts_with(&root_path));
                    prop_assert!(f.roots[0].deny.match_path(r.real_rel()).is_none());
                    // What the OS itself resolves must agree, when it exists.
                    if let Ok(os_real) = fs::canonicalize(root_path.join(&p)) {
                        prop_assert!(os_real.starts_with(&root_path), "{} -> {:?}", p, os_real);
                        prop_assert!(r.exists());
                        prop_assert_eq!(&os_real, &r.real);
                    }
                }
                Ok(())
            })
            .unwrap();
        // The generator must exercise acceptance too, not only refusals.
        assert!(
            accepted.get() > 100,
            "only {} paths accepted",
            accepted.get()
        );
    }
}
