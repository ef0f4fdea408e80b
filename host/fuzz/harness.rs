//! What the fuzz targets (`fuzz_targets/*.rs`) and the stable replay test
//! (`tests/fuzz_corpus.rs`) share: a fixture tree, built once, and the
//! invariants `resolve` and `path_requests` must keep whatever the input.
//!
//! The policy module is reached as `crate::policy`: the fuzz targets compile
//! its sources in with `#[path]`, the test re-exports `loom_fs_mcp::policy`.
//!
//! Input of `check_resolve`: byte 0 picks the root name (`b % 8`, see
//! [`ROOT_NAMES`]), byte 1 the operation (`b % 3`: read, write, delete), byte
//! 2 the mode (`b % 2`): 0, the rest is the path (UTF-8, else lossy); 1, each
//! further byte picks a [`TOKENS`] entry (`b & 0x7f`), joined with `/` unless
//! the byte's high bit is set. ASCII digits make readable seeds: `010../x`
//! writes `../x` on `data`.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use serde_json::{Map, Value};

use crate::policy::{
    DenyList, PathArg, Permission, Resolved, Role, Root, is_escaped, is_quoted, path_requests,
    resolve, shown,
};

/// Root names the first byte chooses from: the two roots, and near misses.
pub const ROOT_NAMES: [&str; 8] = ["data", "data", "ref", "", "DATA", "data/", "data\0", "nope"];

/// Path pieces the token mode chooses from: every name of the fixture, the
/// traversal parts, and names that must stay ordinary or stay denied.
pub const TOKENS: &[&str] = &[
    "..",
    ".",
    "",
    "a.txt",
    "sub",
    "deep",
    "c.txt",
    "b.txt",
    "docs",
    "missing",
    "x",
    ".env",
    ".ENV",
    ".env.local",
    "id_rsa",
    "id_rsa.pub",
    "server.pem",
    ".git",
    "config",
    "node_modules",
    "scratch.tmp",
    "secrets",
    "link_in",
    "linkdir_in",
    "chain1",
    "dot",
    "up_in",
    "up",
    "back",
    "notes.txt",
    "git_link",
    "key_link",
    "dangling_in",
    "dangling_dir_in",
    "loop_a",
    "loop_b",
    "self_loop",
    "link_out_file",
    "linkdir_out",
    "link_mid",
    "far_out",
    "out_and_back",
    "dangling_out",
    "sibling",
    "sibling_file",
    "ref_link",
    "missing_out",
    "chain_out1",
    "abs_etc",
    "abs_passwd",
    "abs_in",
    "abs_in_dir",
    "abs_dangling",
    "data",
    "data-secrets",
    "data_backup",
    "outside",
    "ref",
    "secret.txt",
    "manual.md",
    "é.txt",
    "．env",
    "...",
    "a\\b",
];

/// The fixture: a temp dir holding the roots `data` (workspace) and `ref`
/// (reference) and their neighbours.
pub struct Fixture {
    /// The temp dir, canonical: no message may name it.
    pub base: PathBuf,
    pub roots: Vec<Arc<Root>>,
}

/// The fixture, built on first use.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build)
}

const PREFIX: &str = "loom-fs-fuzz-";

fn build() -> Fixture {
    let tmp = fs::canonicalize(std::env::temp_dir()).expect("temp dir");
    remove_stale(&tmp);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let base = tmp.join(format!("{PREFIX}{}-{nanos}", std::process::id()));
    let data = base.join("data");
    for dir in [
        "data/sub/deep",
        "data/docs",
        "data/.git",
        "data/node_modules/x",
        "data/secrets",
        "data/empty_dir",
        "data-secrets",
        "data_backup",
        "data.bak",
        "outside/sub",
        "ref/sub",
    ] {
        fs::create_dir_all(base.join(dir)).expect("fixture dir");
    }
    for file in [
        "data/a.txt",
        "data/README.md",
        "data/sub/b.txt",
        "data/sub/deep/c.txt",
        "data/sub/.env",
        "data/docs/guide.md",
        "data/.env",
        "data/.env.local",
        "data/id_rsa",
        "data/id_rsa.pub",
        "data/server.pem",
        "data/.git/config",
        "data/.git/HEAD",
        "data/node_modules/x/index.js",
        "data/scratch.tmp",
        "data/secrets/token",
        "data/é.txt",
        "data/．env",
        "data/...",
        "data/a\\b",
        "data/~",
        "data-secrets/key.txt",
        "data_backup/x.txt",
        "data.bak/y.txt",
        "outside/secret.txt",
        "outside/.env",
        "ref/manual.md",
        "ref/.env",
        "ref/sub/page.md",
    ] {
        fs::write(base.join(file), file).expect("fixture file");
    }
    let abs_a = data.join("a.txt");
    let abs_sub = data.join("sub");
    for (target, link) in [
        // Inside → inside.
        ("a.txt", "link_in"),
        ("sub", "linkdir_in"),
        ("chain2", "chain1"),
        ("sub/chain3", "chain2"),
        ("../a.txt", "sub/chain3"),
        (".", "dot"),
        ("sub/..", "up_in"),
        ("..", "sub/up"),
        ("../sub/deep", "sub/back"),
        // Innocent names for denied ones.
        (".env", "notes.txt"),
        (".git", "git_link"),
        ("id_rsa", "key_link"),
        // Dangling inside, loops.
        ("missing.txt", "dangling_in"),
        ("nowhere/deeper", "dangling_dir_in"),
        ("loop_b", "loop_a"),
        ("loop_a", "loop_b"),
        ("self_loop", "self_loop"),
        // Out: a file, a dir, mid-path, deep, out and back in, dangling,
        // prefix siblings, the other root, through a missing name, a chain.
        ("../outside/secret.txt", "link_out_file"),
        ("../outside", "linkdir_out"),
        ("../../outside", "sub/link_mid"),
        ("../../../outside", "sub/deep/far_out"),
        ("../data/a.txt", "out_and_back"),
        ("../outside/nothing-here", "dangling_out"),
        ("../data-secrets", "sibling"),
        ("../data_backup/x.txt", "sibling_file"),
        ("../ref", "ref_link"),
        ("missing/../../outside", "missing_out"),
        ("chain_out2", "chain_out1"),
        ("linkdir_out", "chain_out2"),
        // Absolute: out, and pointing inside (refused too), dangling.
        ("/etc", "abs_etc"),
        ("/etc/passwd", "abs_passwd"),
        (abs_a.to_str().expect("utf-8 temp dir"), "abs_in"),
        (abs_sub.to_str().expect("utf-8 temp dir"), "abs_in_dir"),
        ("/nonexistent-loom-fs", "abs_dangling"),
    ] {
        symlink(target, data.join(link)).expect("fixture link");
    }
    symlink("../data/a.txt", base.join("ref/back")).expect("fixture link");
    symlink("sub", base.join("ref/inner")).expect("fixture link");
    let root = |name: &str, path: PathBuf, role: Role, extra: &[&str]| {
        Arc::new(Root {
            name: name.into(),
            path,
            role,
            perms: role.ceiling(),
            deny: DenyList::new(extra.iter().copied()).expect("deny list"),
            extra_deny: extra.iter().map(|s| s.to_string()).collect(),
            max_read_bytes: 1 << 20,
            max_document_bytes: 64 << 20,
            min_free_bytes: 0,
            trash_max_bytes: 0,
            repository: None,
        })
    };
    let roots = vec![
        root("data", data, Role::Workspace, &["*.tmp", "secrets"]),
        root("ref", base.join("ref"), Role::Reference, &[]),
    ];
    Fixture { base, roots }
}

/// Removes the fixtures of processes that are gone: a fuzz run never drops
/// its statics. Only where `/proc` tells which processes live.
fn remove_stale(tmp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// One root name, one path, one operation, from raw bytes (see the module
/// docs for the layout).
pub fn check_resolve(data: &[u8]) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let root = ROOT_NAMES[usize::from(byte(0)) % ROOT_NAMES.len()];
    let op = Permission::ALL[usize::from(byte(1)) % 3];
    let rest = data.get(3..).unwrap_or(&[]);
    let path = if byte(2) % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        let mut path = String::new();
        for (i, &b) in rest.iter().enumerate() {
            if i > 0 && b & 0x80 == 0 {
                path.push('/');
            }
            path.push_str(TOKENS[usize::from(b & 0x7f) % TOKENS.len()]);
        }
        path
    };
    // The naming rule: nothing it escapes is left raw, and the shown form
    // reads back as the exact path (a quoted one as JSON).
    let s = shown(&path);
    assert!(
        !s.chars().any(is_escaped),
        "shown() keeps a character it escapes: {s:?}"
    );
    let back = if is_quoted(&s) {
        serde_json::from_str::<String>(&s).expect("a quoted form is a JSON string")
    } else {
        s.to_string()
    };
    assert_eq!(back, path, "shown() does not read back");
    check_one(fixture(), root, &path, op);
}

/// How a tool reads its path arguments.
#[derive(Clone, Copy)]
enum Kind {
    /// `root` + `path`.
    Single { op: Permission, optional: bool },
    /// `root` + `source`, `destination_root` (falling back to `root`) +
    /// `destination`; the source needs `across` when the roots differ.
    Transfer {
        op: Permission,
        across: Option<Permission>,
    },
}

struct Tool {
    name: &'static str,
    kind: Kind,
    declared: Vec<PathArg>,
}

/// The built-in tool crates whose path arguments are not modelled here:
/// each declares its root alone (`apply_patch` checks its patch's paths
/// as text, `git` names files in history), so `path_requests` asks for
/// the root and nothing else. `tests/fuzz_corpus.rs` checks that these and
/// [`tools`] together are the tool crates of `guest-tools/Cargo.toml`.
pub const LEFT_OUT: &[&str] = &["apply_patch", "git_tools"];

/// The names of the tools modelled here (each also its crate's name).
pub fn tool_names() -> Vec<&'static str> {
    tools().iter().map(|t| t.name).collect()
}

/// The built-in tools' path declarations, written out by hand: the fuzz
/// build compiles the policy sources alone, without the runtime that asks
/// the components for theirs.
fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        use Permission::*;
        let single = |op, optional| Kind::Single { op, optional };
        [
            ("read_file", single(Read, false)),
            ("list_directory", single(Read, true)),
            ("get_file_info", single(Read, false)),
            ("read_document", single(Read, false)),
            ("search_files", single(Read, true)),
            ("write_file", single(Write, false)),
            ("edit_file", single(Write, false)),
            ("create_directory", single(Write, false)),
            ("delete_file", single(Delete, false)),
            (
                "move_file",
                Kind::Transfer {
                    op: Write,
                    across: Some(Delete),
                },
            ),
            (
                "copy_file",
                Kind::Transfer {
                    op: Read,
                    across: None,
                },
            ),
        ]
        .into_iter()
        .map(|(name, kind)| Tool {
            name,
            kind,
            declared: declare(kind),
        })
        .collect()
    })
}

fn declare(kind: Kind) -> Vec<PathArg> {
    let arg = |root: &str, fallback: Option<&str>, path: &str, op, across, optional| PathArg {
        root_field: root.into(),
        root_fallback: fallback.map(Into::into),
        path_field: path.into(),
        op,
        across_roots: across,
        optional,
    };
    match kind {
        Kind::Single { op, optional } => vec![arg("root", None, "path", op, None, optional)],
        Kind::Transfer { op, across } => vec![
            arg("root", None, "source", op, across, false),
            arg(
                "destination_root",
                Some("root"),
                "destination",
                Permission::Write,
                None,
                false,
            ),
        ],
    }
}

/// What `path_requests` must answer, from the tool's kind: `None` when the
/// arguments do not fit.
fn expected(kind: Kind, args: &Map<String, Value>) -> Option<Vec<(&str, &str, Permission)>> {
    let text = |field: &str| match args.get(field) {
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let absent = |field: &str| matches!(args.get(field), None | Some(Value::Null));
    let root = text("root")?;
    match kind {
        Kind::Single { op, optional } => {
            let path = match text("path") {
                Some(path) => path,
                None if optional && absent("path") => "",
                None => return None,
            };
            Some(vec![(root, path, op)])
        }
        Kind::Transfer { op, across } => {
            let source = text("source")?;
            let destination = text("destination")?;
            let destination_root = match text("destination_root") {
                Some(r) => r,
                None if absent("destination_root") => root,
                None => return None,
            };
            let source_op = match across {
                Some(stronger) if destination_root != root => stronger,
                _ => op,
            };
            Some(vec![
                (root, source, source_op),
                (destination_root, destination, Permission::Write),
            ])
        }
    }
}

/// A tool call's JSON arguments (non-objects are skipped), read as the tool
/// named by the `tool` key, or as every built-in tool when it names none.
pub fn check_arguments(data: &[u8]) {
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let f = fixture();
    let named = match args.get("tool") {
        Some(Value::String(name)) => tools().iter().find(|t| t.name == name),
        _ => None,
    };
    let chosen = match named {
        Some(tool) => std::slice::from_ref(tool),
        None => tools(),
    };
    for tool in chosen {
        let got = path_requests(&tool.declared, &args);
        match (got, expected(tool.kind, &args)) {
            (Ok(requests), Some(want)) => {
                let got: Vec<_> = requests.iter().map(|r| (r.root, r.path, r.op)).collect();
                assert_eq!(got, want, "{}: requests", tool.name);
                for r in &requests {
                    check_one(f, r.root, r.path, r.op);
                }
            }
            (Err(e), None) => {
                assert!(
                    e.starts_with("invalid arguments: "),
                    "{}: error {e:?}",
                    tool.name
                );
                refused(f, &e, &[]);
            }
            (Ok(requests), None) => panic!("{}: accepted {requests:?}", tool.name),
            (Err(e), Some(want)) => panic!("{}: refused ({e}) {want:?}", tool.name),
        }
    }
}

/// Resolves and checks the answer.
fn check_one(f: &Fixture, root: &str, path: &str, op: Permission) {
    match resolve(&f.roots, root, path, op) {
        Ok(r) => accepted(&r, root, path, op),
        Err(d) => refused(f, &d.message, &[root, path]),
    }
}

/// What an accepted path must be, judged by the OS where it can judge.
fn accepted(r: &Resolved, root: &str, path: &str, op: Permission) {
    let ctx = format!("{root:?} {path:?} {op}");
    let found = r.root();
    assert_eq!(found.name, root, "{ctx}: wrong root");
    assert_eq!(r.requested(), path, "{ctx}");
    assert_eq!(r.op(), op, "{ctx}");
    assert!(found.perms.contains(op), "{ctx}: root does not grant it");
    let rel = r.real_rel();
    assert!(
        rel.components().all(|c| matches!(c, Component::Normal(_))),
        "{ctx}: real_rel {rel:?} is not a plain relative path"
    );
    assert_eq!(r.is_root(), rel.as_os_str().is_empty(), "{ctx}: is_root");
    if op != Permission::Read {
        assert!(!r.is_root(), "{ctx}: mutates the root itself");
    }
    assert_eq!(
        found.deny.match_path(Path::new(path)),
        None,
        "{ctx}: denied"
    );
    assert_eq!(
        found.deny.match_path(rel),
        None,
        "{ctx}: real {rel:?} denied"
    );

    // Inside the root, by the OS: the deepest existing ancestor of the real
    // path, canonicalized, lies under the root and is that path already
    // (every symlink on the way was followed).
    let real = found.path.join(rel);
    let mut existing = real.as_path();
    while fs::symlink_metadata(existing).is_err() {
        existing = existing.parent().expect("the root exists");
    }
    let canonical = fs::canonicalize(existing)
        .unwrap_or_else(|e| panic!("{ctx}: {existing:?} does not canonicalize: {e}"));
    assert!(
        canonical.starts_with(&found.path),
        "{ctx}: {canonical:?} is outside the root"
    );
    assert_eq!(
        canonical, existing,
        "{ctx}: the real path still holds a symlink"
    );

    let meta = fs::symlink_metadata(&real);
    assert_eq!(r.exists(), meta.is_ok(), "{ctx}: exists() is wrong");
    if let Ok(meta) = meta {
        assert!(!meta.file_type().is_symlink(), "{ctx}: real path is a link");
    }
    // Where the OS resolves the path as written, it agrees.
    if let Ok(os) = fs::canonicalize(found.path.join(path)) {
        assert_eq!(os, real, "{ctx}: the OS resolves it elsewhere");
    }
    // And so does the kernel under the rule the guest's filesystem applies:
    // what passes here is no escape there, and opens the same file.
    match beneath(&found.path, path) {
        Some(Ok(opened)) => {
            assert!(r.exists(), "{ctx}: opens, yet exists() is false");
            let here = rustix::fs::stat(&real).expect("real path");
            assert_eq!(
                (opened.st_dev, opened.st_ino),
                (here.st_dev, here.st_ino),
                "{ctx}: openat2 opens another file"
            );
        }
        Some(Err(e)) => assert_ne!(e, Errno::XDEV, "{ctx}: openat2 sees an escape"),
        None => {}
    }
}

/// `path` opened from `root` with `openat2(RESOLVE_BENEATH)`, as the guest's
/// filesystem opens it: the file's stat, or the kernel's refusal. `None`
/// where the kernel offers no openat2 (or a seccomp filter hides it).
fn beneath(root: &Path, path: &str) -> Option<Result<Stat, Errno>> {
    let dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .expect("the root opens");
    let path = if path.is_empty() { "." } else { path };
    let flags = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(
        &dir,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        flags,
    ) {
        Err(Errno::NOSYS | Errno::PERM) => None,
        opened => Some(opened.and_then(rustix::fs::fstat)),
    }
}

/// A refusal: something to say, and no host path in it (unless the model
/// wrote it itself and it is echoed back).
fn refused(f: &Fixture, message: &str, input: &[&str]) {
    assert!(!message.is_empty(), "empty refusal for {input:?}");
    let base = f.base.to_string_lossy();
    for needle in [base.as_ref(), "/tmp/"] {
        assert!(
            !message.contains(needle) || input.iter().any(|i| i.contains(needle)),
            "refusal names a host path: {message:?} for {input:?}"
        );
    }
}
