use super::*;
use std::fs;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::process::Command;

#[test]
fn an_audit_directory_over_another_grant_is_refused_however_it_is_spelt() {
    let tmp = tempfile::TempDir::new().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    tree(&base);
    let config = Config::parse(CONFIG, &base, false).unwrap();
    assert!(Plan::new(&config, Some(&base.join("cache"))).is_ok());
    // The cache in the audit log's directory, through a symlink, and
    // before it exists.
    std::os::unix::fs::symlink(base.join("logs"), base.join("link")).unwrap();
    for cache in ["link/cache", "logs/not-yet"] {
        let refused = Plan::new(&config, Some(&base.join(cache))).unwrap_err();
        assert!(
            refused.to_string().contains("holds the component cache"),
            "{cache}: {refused}"
        );
    }
    // The audit log beside the roots holds them.
    let beside = CONFIG.replace("logs/audit.log", "audit.log");
    let config = Config::parse(&beside, &base, false).unwrap();
    let refused = Plan::new(&config, None).unwrap_err();
    assert!(
        refused.to_string().contains("holds root 'ref'"),
        "{refused}"
    );
}

#[test]
fn rights_follow_the_permissions() {
    let of = |perms: &[Permission]| root_access(Perms::of(perms));
    use Permission::*;
    assert_eq!(of(&[Read]), READ);
    assert!(!of(&[Read]).intersects(WRITE));
    assert_eq!(of(&[Read, Write]), READ | WRITE);
    assert_eq!(of(&[Read, Write, Delete]), READ | WRITE);
    // A delete moves into the trash: no content is changed.
    let delete = of(&[Read, Delete]);
    assert!(delete.contains(AccessFs::Refer | AccessFs::RemoveFile | AccessFs::MakeReg));
    assert!(!delete.intersects(AccessFs::WriteFile | AccessFs::Truncate));
    // Whatever the role: no program run, no device made or ioctl'd.
    for perms in [&[Read][..], &[Write], &[Read, Write, Delete]] {
        let access = of(perms);
        assert!(access.contains(AccessFs::ReadDir), "{perms:?}");
        assert!(
            !access.intersects(
                AccessFs::Execute
                    | AccessFs::MakeChar
                    | AccessFs::MakeBlock
                    | AccessFs::IoctlDev
                    | AccessFs::ResolveUnix
            ),
            "{perms:?}"
        );
    }
}

#[test]
fn what_the_status_says_by_kernel() {
    let on = |abi| Status::Enforced {
        abi,
        missing: missing(abi),
        kept: "1 root and the cache".into(),
    };
    assert_eq!(
        on(HANDLED).to_string(),
        "process restricted to 1 root and the cache"
    );
    assert_eq!(
        on(ABI::V7).to_string(),
        "process restricted to 1 root and the cache; partially: this kernel (Landlock ABI \
         7) does not restrict connecting to UNIX sockets by path"
    );
    assert_eq!(
        Status::NotEnforced("this kernel has no Landlock".into()).to_string(),
        "this kernel has no Landlock; the server runs without the kernel sandbox"
    );
    assert!(missing(HANDLED).is_empty());
    assert_eq!(missing(ABI::V7), ["connecting to UNIX sockets by path"]);
    assert_eq!(
        missing(ABI::V2),
        [
            "truncating files",
            "ioctl on devices",
            "connecting to UNIX sockets by path"
        ]
    );
}

/// The test tree: a reference root, a workspace root, the audit log's
/// own directory, a component, and files outside all of them.
fn tree(base: &Path) {
    for dir in [
        "ref/sub",
        "ws/sub",
        "ws/.mcp-trash",
        "logs",
        "cache",
        "tools",
        "outside",
    ] {
        fs::create_dir_all(base.join(dir)).unwrap();
    }
    fs::write(base.join("ref/a.txt"), "in ref\n").unwrap();
    fs::write(base.join("ws/b.txt"), "in ws\n").unwrap();
    fs::write(base.join("cache/e.cwasm"), "compiled\n").unwrap();
    fs::write(base.join("tools/tool.wasm"), "component\n").unwrap();
    fs::write(base.join("tools/other.wasm"), "not declared\n").unwrap();
    fs::write(base.join("outside/secret.txt"), "CANARY\n").unwrap();
    fs::write(base.join("secret-beside.txt"), "CANARY\n").unwrap();
}

const CONFIG: &str = r#"
    audit_log = "logs/audit.log"
    landlock = true
    [[roots]]
    name = "ref"
    path = "ref"
    role = "reference"
    [[roots]]
    name = "ws"
    path = "ws"
    role = "workspace"
    [[components]]
    path = "tools/tool.wasm"
    unpinned = true
"#;

const CHILD: &str = "LOOMFS_SANDBOX_TEST_DIR";

/// Landlock cannot be undone, so the proof runs in a child: this test
/// binary again, running only this test, with the tree's directory in
/// [`CHILD`]. The child restricts itself as the server does, then tries
/// every kind of access directly (no policing filesystem in the way)
/// and prints one line per attempt; it fails on any surprise.
#[test]
fn the_kernel_refuses_what_the_grants_leave_out() {
    if let Some(dir) = std::env::var_os(CHILD) {
        return restricted_child(Path::new(&dir));
    }
    if !available() {
        eprintln!("SKIPPED: kernel has no Landlock; the in-process sandbox proof was not run");
        return;
    }
    let tmp = tempfile::TempDir::new().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    tree(&base);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            // This test's own name, whatever module holds it.
            &format!(
                "{}::the_kernel_refuses_what_the_grants_leave_out",
                module_path!().split_once("::").unwrap().1
            ),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &base)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    // The child's report, for `--nocapture`.
    print!("{stdout}");
    assert!(
        stdout.contains("landlock: process restricted to 2 roots, the audit log, the cache (read-only) and 1 component file"),
        "{stdout}"
    );
    assert!(stdout.contains("\nevery attempt made\n"), "{stdout}");
    // Nothing outside changed.
    assert_eq!(
        fs::read_to_string(base.join("outside/secret.txt")).unwrap(),
        "CANARY\n"
    );
    assert!(!base.join("outside/new.txt").exists());
    assert!(!base.join("ref/new.txt").exists());
}

/// Expects `result` to be what `allowed` says, printing the attempt.
fn expect<T>(what: &str, allowed: bool, result: std::io::Result<T>) {
    match (allowed, result) {
        (true, Ok(_)) => println!("ok {what}: allowed"),
        (false, Err(e)) if e.kind() == ErrorKind::PermissionDenied => {
            println!("ok {what}: refused ({e})")
        }
        (true, Err(e)) => panic!("{what}: should be allowed, got {e}"),
        (false, Ok(_)) => panic!("{what}: should be refused, but it worked"),
        (false, Err(e)) => panic!("{what}: should be refused with EACCES, got {e}"),
    }
}

fn restricted_child(base: &Path) {
    let config = Config::parse(CONFIG, base, false).unwrap();
    // As the server does: the audit log and the policing filesystem's
    // `/proc/self/fd` are opened before restricting.
    let audit = crate::store::audit::Audit::open(&config.audit, config.audit_max_bytes, 0).unwrap();
    crate::runtime::fs::self_test().unwrap();
    let status = Plan::new(&config, Some(&base.join("cache")))
        .unwrap()
        .restrict_self()
        .unwrap();
    println!("\nlandlock: {status}");
    assert!(matches!(status, Status::Enforced { .. }), "{status}");
    let at = |rel: &str| base.join(rel);

    // Reading.
    expect(
        "read a file in a read root",
        true,
        fs::read(at("ref/a.txt")),
    );
    expect("list a read root", true, fs::read_dir(at("ref/sub")));
    expect(
        "read a file outside",
        false,
        fs::read(at("outside/secret.txt")),
    );
    expect(
        "read a file beside the roots",
        false,
        fs::read(at("secret-beside.txt")),
    );
    expect("list the roots' parent", false, fs::read_dir(base));
    expect("read /etc/passwd", false, fs::read("/etc/passwd"));
    expect(
        "read the declared component",
        true,
        fs::read(at("tools/tool.wasm")),
    );
    expect(
        "read a file beside it",
        false,
        fs::read(at("tools/other.wasm")),
    );

    // Writing in a reference root fails at the kernel, policy or not.
    expect(
        "create a file in a read root",
        false,
        fs::write(at("ref/new.txt"), "x"),
    );
    expect(
        "open a read root's file for writing",
        false,
        fs::OpenOptions::new().append(true).open(at("ref/a.txt")),
    );
    expect(
        "make a directory in a read root",
        false,
        fs::create_dir(at("ref/d")),
    );
    expect(
        "rename in a read root",
        false,
        fs::rename(at("ref/a.txt"), at("ref/sub/a.txt")),
    );
    expect(
        "write outside",
        false,
        fs::write(at("outside/new.txt"), "x"),
    );
    expect(
        "empty a file outside",
        false,
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(at("outside/secret.txt")),
    );
    expect(
        "move a file out of a workspace",
        false,
        fs::rename(at("ws/b.txt"), at("outside/b.txt")),
    );
    expect(
        "run a program",
        false,
        Command::new(std::env::current_exe().unwrap())
            .arg("--list")
            .status(),
    );

    // A workspace: what the write tools do.
    expect(
        "write a file in a workspace",
        true,
        fs::write(at("ws/sub/c.txt"), "c"),
    );
    expect(
        "make a directory there",
        true,
        fs::create_dir(at("ws/.mcp-trash/stamp")),
    );
    expect(
        "keep a file in the trash by a hard link",
        true,
        fs::hard_link(at("ws/b.txt"), at("ws/.mcp-trash/stamp/b.txt")),
    );
    expect(
        "replace a file by rename",
        true,
        fs::rename(at("ws/sub/c.txt"), at("ws/b.txt")),
    );
    expect(
        "move a directory into the trash",
        true,
        fs::rename(at("ws/sub"), at("ws/.mcp-trash/stamp/sub")),
    );

    // The audit log rotates; it is never read back.
    drop(audit);
    expect(
        "rotate the audit log",
        true,
        fs::rename(at("logs/audit.log"), at("logs/audit.log.1")),
    );
    expect(
        "start a new audit log",
        true,
        fs::write(at("logs/audit.log"), "{}\n"),
    );
    expect("read the audit log", false, fs::read(at("logs/audit.log")));

    // The cache is read, never written: what a compromised server wrote
    // there would run in later starts.
    expect("read a cache entry", true, fs::read(at("cache/e.cwasm")));
    expect("list the cache", true, fs::read_dir(at("cache")));
    expect(
        "write a cache entry",
        false,
        fs::write(at("cache/new.cwasm"), "x"),
    );
    expect(
        "overwrite a cache entry",
        false,
        fs::OpenOptions::new().write(true).open(at("cache/e.cwasm")),
    );
    expect(
        "remove a cache entry",
        false,
        fs::remove_file(at("cache/e.cwasm")),
    );

    // A workspace's trash index: a temporary file, renamed.
    expect(
        "write a trash index",
        true,
        fs::write(at("ws/.mcp-trash/.stamp.json.tmp"), "{}"),
    );
    expect(
        "rename it into place",
        true,
        fs::rename(
            at("ws/.mcp-trash/.stamp.json.tmp"),
            at("ws/.mcp-trash/stamp.json"),
        ),
    );

    // `/proc/self/fd`: an `O_PATH` probe opens anywhere (Landlock does
    // not govern it), but reopening it for reading is checked as the
    // file itself, as the policing filesystem relies on.
    let reopen = |rel: &str| {
        let probe = rustix::fs::open(
            at(rel),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        fs::read(format!("/proc/self/fd/{}", probe.as_raw_fd()))
    };
    expect("reopen a probe in a root", true, reopen("ref/a.txt"));
    expect(
        "reopen a probe outside",
        false,
        reopen("outside/secret.txt"),
    );
    expect(
        "the policing filesystem's self-test",
        true,
        crate::runtime::fs::self_test().map_err(std::io::Error::other),
    );
    println!("\nevery attempt made");
}
