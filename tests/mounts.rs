//! End to end: the disk errors a full tmpfs cannot give, and filesystems
//! mounted inside a root. A disk quota (a btrfs subvolume with a qgroup
//! limit, on a loop device the test makes); the OS errors of the
//! operations the host makes for a guest (open, mkdir), injected with
//! `strace`; a read-only filesystem and a writable one mounted inside a
//! root; and a server killed while it copies a file into the trash.
//!
//! Each change that fails answers a sentence naming the error and the root
//! (never "uncategorized", never a host path), leaves the original byte for
//! byte and leaves no file behind, in the root, its staging areas or its
//! trash. The development machines and CI run as root and have the tools;
//! where one is missing (`mkfs.btrfs` from btrfs-progs, `strace`, the right
//! to mount or to trace), its test says so on stderr (`SKIPPED: …`) and
//! passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::json;

/// Every regular file under `dir` with its content, but the host's own
/// state (the lock file, the trash's byte count, the list of nested
/// staging areas): what a change that failed must leave as it was.
/// Directories are left out: a failed call may leave the missing parent
/// directories it made, empty (see docs/disk.md).
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot_dir(dir)
        .into_iter()
        .filter(|(p, _)| {
            !p.ends_with(".mcp-trash/.locks")
                && !p.ends_with(".mcp-trash/.size")
                && !p.ends_with(".mcp-trash/.staging/nested")
        })
        .filter_map(|(p, c)| c.map(|c| (p, c)))
        .collect()
}

/// Whether `tool --version`-like `args` run.
fn runs(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A btrfs filesystem on a loop device (an image file in the test's
/// directory), with quotas on, mounted for the test's life.
struct Btrfs {
    mnt: PathBuf,
}

impl Btrfs {
    /// Makes and mounts it on `mnt`, with the subvolume `ws` limited to
    /// `limit` (as `btrfs qgroup limit` takes it); or says on stderr why it
    /// cannot and gives `None`.
    fn mount(env: &Env, mnt: &str, limit: &str) -> Option<Btrfs> {
        if !runs("mkfs.btrfs", &["--version"]) {
            eprintln!(
                "SKIPPED: mkfs.btrfs is not installed (apt-get install btrfs-progs); the disk \
                 quota test needs it"
            );
            return None;
        }
        let image = env.path(&format!("{mnt}.img"));
        std::fs::File::create(&image)
            .unwrap()
            .set_len(128 << 20)
            .unwrap();
        let made = Command::new("mkfs.btrfs")
            .arg("-q")
            .arg(&image)
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let dir = env.path(mnt);
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&dir)
            .output()
            .unwrap();
        if !out.status.success() {
            eprintln!(
                "SKIPPED: cannot mount a btrfs image here ({}); the disk quota test needs root \
                 and loop devices",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        let fs = Btrfs { mnt: dir.clone() };
        let btrfs = |args: &[&str]| {
            let out = Command::new("btrfs").args(args).output().unwrap();
            assert!(out.status.success(), "btrfs {args:?}: {out:?}");
        };
        let ws = dir.join("ws");
        let (mnt_s, ws_s) = (dir.to_str().unwrap(), ws.to_str().unwrap());
        btrfs(&["quota", "enable", mnt_s]);
        btrfs(&["subvolume", "create", ws_s]);
        btrfs(&["qgroup", "limit", limit, ws_s]);
        Some(fs)
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// Writes `path` until the disk refuses, and returns the OS error.
fn fill(path: &Path) -> std::io::Error {
    use std::io::Write;
    let mut filler = std::fs::File::create(path).unwrap();
    loop {
        if let Err(e) = filler
            .write_all(&[7u8; 64 * 1024])
            .and_then(|()| filler.sync_all())
        {
            return e;
        }
    }
}

const QUOTA: &str = "the disk quota is used up on the disk that holds root 'ws' (EDQUOT)";
const READ_ONLY: &str = "the disk that holds root 'ws' is mounted read-only (EROFS)";
const NO_DESCRIPTORS: &str = "the server has no file descriptor free (EMFILE: too many open files)";

/// `r` names the error `needle`, says nothing "uncategorized" and shows no
/// host path.
fn assert_named(env: &Env, r: &rmcp::model::CallToolResult, needle: &str) {
    assert_refused(r, needle);
    assert!(!text(r).contains("uncategorized"), "{}", text(r));
    assert_no_host_path(env, &[r]);
}

/// A root on a btrfs subvolume whose qgroup limit is used up: making a
/// directory (the policing filesystem's mkdir), a new file, an overwrite, an
/// edit and a copy each answer the quota by name, and change nothing; once
/// space is freed, changes are made again.
#[tokio::test(flavor = "multi_thread")]
async fn a_used_up_disk_quota_is_named() {
    let env = Env::new();
    let Some(_btrfs) = Btrfs::mount(&env, "disk", "4M") else {
        return;
    };
    let mut big = "x".repeat(200 * 1024 - 7);
    big.push_str("MARKER\n");
    env.write("disk/ws/big.txt", &big);
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"disk/ws\"\nrole = \"workspace\"\n",
    );
    let client = start(&config).await;
    // A change that fits first: the server's staging area is made.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "small.txt", "content": "small\n"}),
    )
    .await;
    let full = fill(&env.path("disk/ws/fill.bin"));
    assert_eq!(
        full.raw_os_error(),
        Some(libc::EDQUOT),
        "the qgroup limit refuses: {full}"
    );
    rustix::fs::sync();
    let before = files(&env.path("disk/ws"));
    for (tool, args) in [
        (
            "create_directory",
            json!({"root": "ws", "path": "newdir/sub"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new.txt", "content": "new\n"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": "replaced\n"}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "big.txt",
                   "edits": [{"old_text": "MARKER", "new_text": "EDITED"}]}),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "big.txt", "destination": "copy.txt"}),
        ),
    ] {
        let r = call(&client, tool, args).await;
        assert_named(&env, &r, QUOTA);
        assert_eq!(
            files(&env.path("disk/ws")),
            before,
            "after {tool}: nothing changed, nothing left behind"
        );
        assert!(!env.path("disk/ws/newdir").exists(), "after {tool}");
    }
    assert_eq!(
        std::fs::read(env.path("disk/ws/big.txt")).unwrap(),
        big.as_bytes()
    );
    // Space again.
    std::fs::remove_file(env.path("disk/ws/fill.bin")).unwrap();
    rustix::fs::sync();
    call_ok(
        &client,
        "create_directory",
        json!({"root": "ws", "path": "newdir/sub"}),
    )
    .await;
    client.cancel().await.unwrap();
    let audit = audit(&env);
    assert!(
        audit
            .iter()
            .filter(|l| l["stopped"] == "disk" && l["decision"] == "allow")
            .count()
            >= 5,
        "{audit:?}"
    );
}

/// The real binary under `strace`, which makes every `openat` and `mkdirat`
/// of a name in `names` fail with `errno`: the operations the host makes
/// for the guest when it creates a file or a directory (the reads, the
/// probes and the host's own directories use other calls or other names).
fn under_strace(config: &Path, errno: &str, names: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null", "--seccomp-bpf"])
        .args(["-e", "trace=openat,mkdirat"])
        .arg("-e")
        .arg(format!("inject=openat,mkdirat:error={errno}"));
    for name in names {
        cmd.args(["-P", name]);
    }
    cmd.arg("--").arg(BIN).arg("--config").arg(config);
    with_server_env(cmd)
}

/// wasmtime-wasi folds `EDQUOT`, `EROFS` and `EMFILE` into WASI's generic
/// `io` error: the host makes the files and directories a guest creates
/// itself, so that it has the OS error. Each injected in turn into the
/// creation of a directory (by `create_directory`, and by `write_file` for
/// a missing parent) and of a file (a directory copy's file, made in the
/// staging directory): each is named, and nothing changes.
#[tokio::test(flavor = "multi_thread")]
async fn open_and_mkdir_errors_are_named() {
    if !runs(
        "strace",
        &["-f", "-qq", "-o", "/dev/null", "-e", "trace=none", "true"],
    ) {
        eprintln!(
            "SKIPPED: strace is not installed or cannot trace here (apt-get install strace); the \
             injected-error test needs it"
        );
        return;
    }
    for (errno, needle, stopped) in [
        ("EDQUOT", QUOTA, "disk"),
        ("EROFS", READ_ONLY, "disk"),
        ("EMFILE", NO_DESCRIPTORS, "descriptors"),
    ] {
        let env = Env::new();
        env.write("ws/big.txt", "original\n")
            .write("ws/tree/a.txt", "a\n")
            .write("ws/tree/victim.bin", "v\n");
        let config = env.config(
            "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
             path = \"ws\"\nrole = \"workspace\"\n",
        );
        // Components compiled and cached before tracing starts.
        assert!(check_output(&config).status.success());
        let (client, _pid, _said) =
            start_command(under_strace(&config, errno, &["newdir", "victim.bin"])).await;
        call_ok(
            &client,
            "write_file",
            json!({"root": "ws", "path": "other.txt", "content": "fits\n"}),
        )
        .await;
        let before = files(&env.path("ws"));
        for (tool, args) in [
            ("create_directory", json!({"root": "ws", "path": "newdir"})),
            (
                "write_file",
                json!({"root": "ws", "path": "newdir/x.txt", "content": "x\n"}),
            ),
            (
                "copy_file",
                json!({"root": "ws", "source": "tree", "destination": "tree2"}),
            ),
        ] {
            let r = call(&client, tool, args).await;
            assert_named(&env, &r, needle);
            assert_eq!(
                files(&env.path("ws")),
                before,
                "{errno}, after {tool}: nothing changed, nothing left behind"
            );
            assert!(!env.path("ws/newdir").exists() && !env.path("ws/tree2").exists());
        }
        client.cancel().await.unwrap();
        let audit = audit(&env);
        assert_eq!(
            audit
                .iter()
                .filter(|l| l["stopped"] == stopped && l["decision"] == "allow")
                .count(),
            4,
            "{errno}: {audit:?}"
        );
    }
}

/// A read-only filesystem mounted inside a root: the staging directory
/// cannot be made there (the call stages on the root's), and a new file,
/// a directory, an overwrite and a delete there each fail on `EROFS`,
/// named; the copy an overwrite or a delete had kept in the trash (a hard
/// link would cross filesystems) is taken back: nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_filesystem_inside_a_root_is_named() {
    let env = Env::new();
    env.write("ws/top.txt", "top\n");
    let Some(ro) = Tmpfs::mount(&env.path("ws/ro"), "1m") else {
        return;
    };
    env.write("ws/ro/a.txt", "original\n");
    ro.remount("ro");
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let client = start(&config).await;
    let before = files(&env.path("ws"));
    for (tool, args) in [
        (
            "write_file",
            json!({"root": "ws", "path": "ro/new.txt", "content": "new\n"}),
        ),
        ("create_directory", json!({"root": "ws", "path": "ro/dir"})),
        (
            "write_file",
            json!({"root": "ws", "path": "ro/a.txt", "content": "replaced\n"}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "ro/a.txt",
                   "edits": [{"old_text": "original", "new_text": "edited"}]}),
        ),
        ("delete_file", json!({"root": "ws", "path": "ro/a.txt"})),
    ] {
        let r = call(&client, tool, args).await;
        assert_named(&env, &r, READ_ONLY);
        assert_eq!(
            files(&env.path("ws")),
            before,
            "after {tool}: nothing changed, nothing left in the trash"
        );
    }
    client.cancel().await.unwrap();
    ro.remount("rw");
}

/// A writable filesystem mounted inside a root (here a tmpfs at `sub`):
/// every change there works as anywhere in the root. The call stages on
/// that filesystem (a rename from the root's would cross filesystems), and
/// what an overwrite replaces is kept in the root's trash by one copy.
/// What cannot be done across filesystems is refused, naming why, and
/// changes nothing: moving a directory to the trash whole, and a move
/// within the root from one filesystem to the other. Nothing is left
/// behind: no temporary file in the root, nothing in either staging area.
#[tokio::test(flavor = "multi_thread")]
async fn changes_on_a_filesystem_mounted_inside_a_root_work() {
    let env = Env::new();
    env.write("ws/b.txt", "b\n");
    let Some(_sub) = Tmpfs::mount(&env.path("ws/sub"), "8m") else {
        return;
    };
    env.write("ws/sub/a.txt", "original\n")
        .write("ws/sub/dir/x.txt", "x\n")
        .write("ws/tree/t.txt", "t\n");
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let client = start(&config).await;
    // Each change, then what `sub/a.txt` holds and the version it kept.
    let steps: [(&str, serde_json::Value, &str, Option<&str>); 5] = [
        (
            "write_file",
            json!({"root": "ws", "path": "sub/a.txt", "content": "one\n"}),
            "one\n",
            Some("original\n"),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "sub/a.txt", "content": "two\n", "mode": "append"}),
            "one\ntwo\n",
            Some("one\n"),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "sub/a.txt",
                   "edits": [{"old_text": "two", "new_text": "TWO"}]}),
            "one\nTWO\n",
            Some("one\ntwo\n"),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "b.txt", "destination": "sub/a.txt",
                   "overwrite": true}),
            "b\n",
            Some("one\nTWO\n"),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "sub/new/n.txt", "content": "n\n"}),
            "b\n",
            None,
        ),
    ];
    for (tool, args, now, kept) in steps {
        let r = call_ok(&client, tool, args.clone()).await;
        assert_eq!(
            std::fs::read_to_string(env.path("ws/sub/a.txt")).unwrap(),
            now,
            "{tool} {args}"
        );
        let previous = structured(&r)["previous"].as_str().map(String::from);
        assert_eq!(previous.is_some(), kept.is_some(), "{tool}: {r:?}");
        if let (Some(previous), Some(kept)) = (previous, kept) {
            assert_eq!(
                std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap(),
                kept,
                "{tool}: the version it replaced is kept"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(env.path("ws/sub/new/n.txt")).unwrap(),
        "n\n"
    );
    // A new file and a directory copied whole onto the other filesystem.
    call_ok(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "b.txt", "destination": "sub/c.txt"}),
    )
    .await;
    call_ok(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree", "destination": "sub/tree2"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/sub/tree2/t.txt")).unwrap(),
        "t\n"
    );
    // A file deleted there goes to the trash (copied, then removed).
    let r = call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "sub/c.txt"}),
    )
    .await;
    assert!(!env.path("ws/sub/c.txt").exists());
    let kept = structured(&r)["trash"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{kept}"))).unwrap(),
        "b\n"
    );
    // Each replaced version is in the trash once: no second copy.
    let trash_files: Vec<_> = env
        .trash("ws")
        .into_iter()
        .filter(|(_, _, c)| c.is_some())
        .map(|(_, p, _)| p)
        .collect();
    assert_eq!(trash_files.len(), 5, "{trash_files:?}");
    // What cannot cross filesystems is refused, naming why.
    let before = files(&env.path("ws"));
    let r = call(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "sub/dir"}),
    )
    .await;
    assert_refused(
        &r,
        "'sub/dir' is on another filesystem than the trash of root 'ws' (one mounted inside the \
         root), and a directory is only ever moved to the trash whole, which cannot cross \
         filesystems; nothing was changed",
    );
    for (source, destination, overwrite) in [
        ("b.txt", "sub/m.txt", false),
        ("b.txt", "sub/a.txt", true),
        ("sub/a.txt", "b.txt", true),
    ] {
        let r = call(
            &client,
            "move_file",
            json!({"root": "ws", "source": source, "destination": destination,
                   "overwrite": overwrite}),
        )
        .await;
        assert_refused(
            &r,
            "are on different filesystems (one is mounted inside root 'ws')",
        );
        assert_refused(
            &r,
            "nothing was moved. Use copy_file, then delete_file on the source",
        );
        assert_no_host_path(&env, &[&r]);
    }
    assert_eq!(
        files(&env.path("ws")),
        before,
        "the refusals changed nothing, kept nothing"
    );
    client.cancel().await.unwrap();
    // No temporary file anywhere, nothing left in the staging areas.
    for (path, _) in files(&env.path("ws")) {
        let name = path.to_string_lossy();
        assert!(!name.contains(".loom-fs-write-"), "{name}");
        assert!(!name.contains(".staging/"), "{name}");
    }
    assert!(
        env.path("ws/sub/.mcp-trash/.staging").is_dir(),
        "the call staged on the mounted filesystem"
    );
}

/// A server killed while it copies a file into the trash (the file is on a
/// filesystem mounted inside the root: a hard link would cross
/// filesystems) leaves no partial copy in the trash: the copy is written
/// in the call's directory in the staging area and renamed into the trash
/// only once whole. The next start removes it, and `trash list` lists
/// nothing partial. The kill comes while the copy is seen in the making.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_mid_copy_into_the_trash_leaves_no_partial_copy() {
    const BIG: usize = 48 << 20;
    let env = Env::new();
    env.mkdir("ws");
    let Some(_sub) = Tmpfs::mount(&env.path("ws/sub"), "160m") else {
        return;
    };
    let mut big = vec![b'x'; BIG - 7];
    big.extend_from_slice(b"MARKER\n");
    env.write("ws/sub/big.txt", &big);
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let (client, pid, _said) = start_command(server_command(&config)).await;
    let staging = env.path("ws/.mcp-trash/.staging");
    // The copies in the making: the host's `k<N>` files in a call's stage
    // on the root's filesystem.
    let in_the_making = move || -> Vec<PathBuf> {
        let mut found = Vec::new();
        for server in std::fs::read_dir(&staging).into_iter().flatten().flatten() {
            for call in std::fs::read_dir(server.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                found.extend(
                    std::fs::read_dir(call.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                        .filter(|e| {
                            let name = e.file_name().to_string_lossy().into_owned();
                            name.starts_with('k') && name[1..].bytes().all(|b| b.is_ascii_digit())
                        })
                        .map(|e| e.path()),
                );
            }
        }
        found
    };
    let watch = in_the_making.clone();
    let killer = std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            let seen = watch();
            if !seen.is_empty() {
                rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid as i32).unwrap(),
                    rustix::process::Signal::KILL,
                )
                .unwrap();
                return seen;
            }
            std::thread::yield_now();
        }
        panic!("no copy into the trash was seen");
    });
    let args = json!({"root": "ws", "path": "sub/big.txt", "content": "new\n"});
    let _ = try_call(&client, "write_file", args.as_object().unwrap().clone()).await;
    let seen = killer.join().unwrap();
    eprintln!("killed with {seen:?} in the making");
    assert_eq!(std::fs::read(env.path("ws/sub/big.txt")).unwrap(), big);
    // The trash holds no partial copy: none, or a whole one.
    let in_trash: Vec<_> = env
        .trash("ws")
        .into_iter()
        .filter_map(|(_, p, c)| c.map(|c| (p, c)))
        .collect();
    assert!(
        in_trash.iter().all(|(_, c)| *c == big),
        "a partial copy is in the trash: {:?}",
        in_trash
            .iter()
            .map(|(p, c)| (p, c.len()))
            .collect::<Vec<_>>()
    );
    drop(client);
    // The next start removes what the killed server left in the making.
    let client = start(&config).await;
    call_ok(&client, "list_roots", json!({})).await;
    assert!(in_the_making().is_empty(), "{:?}", in_the_making());
    client.cancel().await.unwrap();
    let listed = command()
        .args(["trash", "list", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    if in_trash.is_empty() {
        assert!(!listed.contains("big.txt"), "{listed}");
    }
}
