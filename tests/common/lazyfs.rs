//! LazyFS (vendored in tests/lazyfs) for the power-loss tests: a FUSE mount
//! over a directory whose own page cache holds every write until it is
//! fsynced, and drops what is unsynced on [`LazyFs::power_cut`], as a power
//! cut drops the kernel's page cache. `scripts/test` builds it and names the
//! binary in `LOOMFS_LAZYFS`; without it a test says SKIPPED, or fails under
//! `CI=true`.
//!
//! What LazyFS models: file data written and not fsynced is lost (a file
//! created and written without fsync is still there after a cut, empty or
//! shorter). Creates, renames and unlinks pass straight to the underlying
//! directory, so a cut never undoes a directory entry: it tests that data
//! is synced before it is published, not that the directory was synced.
//! Its cache is preallocated ([`CACHE_SIZE`]); once full (no eviction),
//! writes go straight to the underlying files and would survive a cut.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long LazyFS gets to mount, or to clear its cache, before a panic.
const TIMEOUT: Duration = Duration::from_secs(30);

/// LazyFS's cache, allocated (and zeroed) whole at start: enough for what a
/// test writes between two syncs, small enough for a few mounts at once.
pub const CACHE_SIZE: &str = "256mb";

/// The log line LazyFS writes when the cache is cleared. Its completion FIFO
/// answers only the first command of a mount reliably (tests/lazyfs/SNAPSHOT.md);
/// the log, flushed at every line, is dependable.
const CLEARED: &str = "[lazyfs.cmds]: cache is cleared.";

/// The log line of LazyFS's command thread, ready to read the FIFO.
const READY: &str = "[lazyfs.faults.worker]: waiting for fault commands";

/// A LazyFS mount over a directory; unmounted, and LazyFS stopped, on drop.
pub struct LazyFs {
    child: Child,
    /// The mount point, the config, the FIFO and the logs; `None` once
    /// dropped or left behind (a mount that would not go).
    dir: Option<tempfile::TempDir>,
    mount: PathBuf,
    fifo: PathBuf,
    log: PathBuf,
    output: PathBuf,
}

impl LazyFs {
    /// Mounts LazyFS (`LOOMFS_LAZYFS`) over `underlying` on a fresh mount
    /// point and waits until the mount is live and LazyFS reads commands.
    /// `None`, with a SKIPPED line on stderr, when `LOOMFS_LAZYFS` is unset;
    /// under `CI=true` that is a failure. Panics if LazyFS will not mount.
    pub fn mount(underlying: &Path) -> Option<LazyFs> {
        let Some(bin) = std::env::var_os("LOOMFS_LAZYFS") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "LOOMFS_LAZYFS is not set under CI=true: run the tests with scripts/test, which \
                 builds LazyFS from tests/lazyfs (as root, with /dev/fuse) and names it there"
            );
            eprintln!(
                "SKIPPED: LOOMFS_LAZYFS is not set (scripts/test builds LazyFS); the power-loss \
                 test did not run"
            );
            return None;
        };
        let underlying = fs::canonicalize(underlying)
            .unwrap_or_else(|e| panic!("the directory under LazyFS {underlying:?}: {e}"));
        // `-o subdir=` is one of FUSE's comma-separated options.
        assert!(
            !underlying.to_string_lossy().contains(','),
            "LazyFS cannot mount over a path with a comma: {underlying:?}"
        );
        let dir = tempfile::Builder::new()
            .prefix("lazyfs.")
            .tempdir()
            .unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let mount = base.join("mnt");
        let fifo = base.join("faults.fifo");
        let log = base.join("lazyfs.log");
        let output = base.join("lazyfs.out");
        let config = base.join("config.toml");
        // LazyFS takes a `--config-path` holding "-o" (in any case) for an
        // option, and reads config/default.toml instead.
        assert!(
            !config.to_string_lossy().to_lowercase().contains("-o"),
            "LazyFS would not read a config path holding \"-o\": {config:?} (set TMPDIR)"
        );
        fs::create_dir(&mount).unwrap();
        fs::write(
            &config,
            format!(
                "[faults]\nfifo_path = {}\n\
                 [cache]\napply_eviction = false\n\
                 [cache.simple]\ncustom_size = \"{CACHE_SIZE}\"\nblocks_per_page = 1\n\
                 [filesystem]\nlog_all_operations = false\nlogfile = {}\n",
                toml_string(&fifo),
                toml_string(&log)
            ),
        )
        .unwrap();
        let out = File::create(&output).unwrap();
        // At most 10 arguments reach LazyFS's FUSE options (main.cpp drops
        // the rest); these are 9. LazyFS aborts as it exits (its command
        // thread is never joined): it runs in the temporary directory, where
        // a core file would go too.
        let child = Command::new(&bin)
            .arg(&mount)
            .arg("--config-path")
            .arg(&config)
            .args(["-o", "allow_other", "-o", "modules=subdir", "-o"])
            .arg(format!("subdir={}", underlying.display()))
            .arg("-f")
            .current_dir(&base)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run LazyFS {bin:?} (LOOMFS_LAZYFS): {e}"));
        let mut lazyfs = LazyFs {
            child,
            dir: Some(dir),
            mount,
            fifo,
            log,
            output,
        };
        lazyfs.wait_for("mount", |l| {
            mounted(&l.mount) && l.log_text().contains(READY)
        });
        Some(lazyfs)
    }

    /// The mount point: what a test writes through.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// The power cut: LazyFS drops every write not yet fsynced. Returns
    /// once LazyFS's log says the cache is cleared.
    pub fn power_cut(&mut self) {
        let before = self.log_text().matches(CLEARED).count();
        // Non-blocking, so that a LazyFS gone (no reader) fails here rather
        // than hanging; LazyFS keeps the FIFO open from start.
        let mut fifo = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo)
            .unwrap_or_else(|e| {
                panic!("LazyFS's FIFO {:?}: {e}\n{}", self.fifo, self.output_text())
            });
        // One write, newline-terminated: LazyFS reads a command per read(2).
        fifo.write_all(b"lazyfs::clear-cache\n")
            .unwrap_or_else(|e| panic!("writing to LazyFS's FIFO: {e}\n{}", self.output_text()));
        drop(fifo);
        self.wait_for("clear its cache", |l| {
            l.log_text().matches(CLEARED).count() > before
        });
    }

    /// Polls `done` until it holds; panics, with LazyFS's output, if LazyFS
    /// exits first or [`TIMEOUT`] passes.
    fn wait_for(&mut self, what: &str, done: impl Fn(&LazyFs) -> bool) {
        let started = Instant::now();
        loop {
            if done(self) {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "LazyFS exited ({status}) before it would {what}:\n{}",
                    self.output_text()
                );
            }
            if started.elapsed() > TIMEOUT {
                panic!(
                    "LazyFS did not {what} within {TIMEOUT:?}:\n{}",
                    self.output_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// LazyFS's stdout and stderr (its log lines included), for a panic.
    fn output_text(&self) -> String {
        let text = fs::read_to_string(&self.output).unwrap_or_default();
        let tail = text.len().saturating_sub(8000);
        let tail = (tail..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!("--- LazyFS output ---\n{}", &text[tail..])
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        // A test that failed may hold a file open under the mount: then a
        // lazy unmount, which detaches it now and ends it when it is closed.
        let unmounted = |args: &[&str]| {
            let mut cmd = Command::new(args[0]);
            cmd.args(&args[1..])
                .arg(&self.mount)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd.status().is_ok_and(|s| s.success())
        };
        let _ = unmounted(&["fusermount3", "-u"])
            || unmounted(&["fusermount3", "-u", "-z"])
            || unmounted(&["umount", "-l"]);
        // LazyFS exits once unmounted; it is killed if it has not within 5 s.
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && started.elapsed() < TIMEOUT / 6 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if mounted(&self.mount) {
            // Removing the directory would go through the mount and delete
            // the files under it: it is left behind.
            eprintln!(
                "warning: LazyFS is still mounted on {:?}; left there",
                self.mount
            );
            std::mem::forget(self.dir.take());
        }
    }
}

/// Whether `path` is a mount point, from `/proc/self/mountinfo` (which does
/// not touch the mount itself).
fn mounted(path: &Path) -> bool {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|point| Path::new(&unescape_mountinfo(point)) == path)
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d[0] <= b'3' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` as a TOML basic string.
fn toml_string(path: &Path) -> String {
    let s = path.to_str().expect("a UTF-8 temporary path");
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
