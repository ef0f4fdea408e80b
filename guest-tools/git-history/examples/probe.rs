//! Runs the history library on a git directory from the command line, to
//! check and time it under a standalone WASI runtime (no tool, no host):
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 -p git-history --example probe
//! wasmtime run --dir REPO/.git::/git target/wasm32-wasip2/release/examples/probe.wasm \
//!     /git log 50 | show REV | cat REV PATH | blame REV PATH | status WORKTREE
//! ```
//!
//! Nothing is hidden and the whole repository is in view.

use git_history::{History, LogQuery, View, blame, log, show_commit, show_file, status};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fail = |m: String| -> ! {
        eprintln!("{m}");
        std::process::exit(1)
    };
    let [git_dir, command, rest @ ..] = args.as_slice() else {
        fail("usage: probe GIT_DIR log N | show REV | cat REV PATH | blame REV PATH | status WORKTREE".into())
    };
    let started = std::time::Instant::now();
    let history =
        History::open(std::path::Path::new(git_dir)).unwrap_or_else(|e| fail(e.to_string()));
    let opened = started.elapsed();
    let nothing = |_: &str| false;
    let view = View::new("", &nothing);
    let mut out = std::io::stdout().lock();
    match (command.as_str(), rest) {
        ("log", [n]) => {
            let query = LogQuery {
                rev: "HEAD",
                path: "",
                max_count: n.parse().unwrap_or_else(|_| fail("N: a number".into())),
                since: None,
                author: None,
                grep: None,
                line_counts: true,
            };
            let (entries, _) = log(&history, &query, &view).unwrap_or_else(|e| fail(e.to_string()));
            for entry in entries {
                writeln!(out, "{} {}", entry.id, entry.subject).unwrap();
                for (change, counts) in entry.changes.iter().zip(&entry.counts) {
                    let (added, removed) = counts.unwrap_or_default();
                    writeln!(out, "{added}\t{removed}\t{}", change.path).unwrap();
                }
            }
        }
        ("show", [rev]) => {
            let shown =
                show_commit(&history, rev, "", &view).unwrap_or_else(|e| fail(e.to_string()));
            writeln!(out, "{}\n{}", shown.id, shown.message).unwrap();
            for file in shown.files {
                writeln!(
                    out,
                    "--- {}\n{}",
                    file.change.path,
                    file.hunks.unwrap_or_default()
                )
                .unwrap();
            }
        }
        ("cat", [rev, path]) => {
            let bytes =
                show_file(&history, rev, path, &view).unwrap_or_else(|e| fail(e.to_string()));
            out.write_all(&bytes).unwrap();
        }
        ("blame", [rev, path]) => {
            let (lines, _) =
                blame(&history, rev, path, &view).unwrap_or_else(|e| fail(e.to_string()));
            for line in lines {
                writeln!(out, "{} {}", line.commit, line.original_line).unwrap();
            }
        }
        ("status", [worktree]) => {
            let found = status(&history, std::path::Path::new(worktree), &view)
                .unwrap_or_else(|e| fail(e.to_string()));
            for (path, kind) in found.staged {
                writeln!(out, "staged {} {path}", kind.letter()).unwrap();
            }
            for (path, kind) in found.modified {
                writeln!(out, "worktree {} {path}", kind.letter()).unwrap();
            }
            for path in found.untracked {
                writeln!(out, "untracked {path}").unwrap();
            }
        }
        _ => fail("usage: probe GIT_DIR log N | show REV | cat REV PATH | blame REV PATH | status WORKTREE".into()),
    }
    eprintln!("open {opened:?}, total {:?}", started.elapsed());
}
