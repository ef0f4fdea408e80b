//! Protocol-level speed of the real binary, each figure with its baseline
//! from the same run (the machines are shared and noisy; read the ratios):
//!
//! - `startup/loom-fs-mcp`: spawn → `initialize` response, against
//!   `startup/cat`: spawning `cat` and reading back one line (the cost of a
//!   process and a pipe round trip on this machine).
//! - `roundtrip/read_file_4k`: one `tools/call` of `read_file` on a 4 KiB file
//!   (component instantiated, file read in the guest through the policing
//!   filesystem), against `roundtrip/list_roots`: a `tools/call` answered by
//!   the host alone, the protocol floor; and `roundtrip/get_file_info`, a
//!   component call with a small answer (fixed cost of a call vs. size of
//!   the answer).
//!
//! - `roundtrip/write_file_4k`: one `write_file` overwrite of a 4 KiB file
//!   (atomic: temporary file, fsync, rename; the previous content
//!   hard-linked into the trash).
//! - `reference/*`: the same reads and writes through
//!   `@modelcontextprotocol/server-filesystem`, when `LOOMFS_BENCH_REFERENCE`
//!   names its `dist/index.js` (`npm install
//!   @modelcontextprotocol/server-filesystem`; needs `node`).
//!
//! Run with `cargo bench -p loom-fs-mcp --bench protocol`.

// `output()` (running another program) is for the benches that compare with one.
#[allow(dead_code)]
mod session;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use session::{INITIALIZE, Session, spawn};

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    config: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let root = dir.join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let line = "The quick brown fox jumps over the lazy dog, 0123456789 abcdefghij\n";
    let text: String = line.repeat(4096 / line.len() + 1)[..4096].to_string();
    std::fs::write(root.join("page.txt"), &text).unwrap();
    std::fs::write(dir.join("work/page.txt"), &text).unwrap();
    let config = dir.join("roots.toml");
    std::fs::write(
        &config,
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"work\"\npath = \"work\"\nrole = \"workspace\"\n",
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        dir,
        config,
    }
}

/// Sends `initialize` to a fresh process, reads the first line back, and
/// lets the process end (EOF on its stdin).
fn first_line(mut child: Child) -> String {
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    child.wait().unwrap();
    line
}

fn startup(c: &mut Criterion) {
    let f = fixture();
    // Warm the compiled-component cache: a start must not compile.
    drop(Session::open(&f.config));
    let mut group = c.benchmark_group("startup");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("cat", |b| {
        b.iter(|| {
            let cat = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            first_line(cat);
        })
    });
    group.bench_function("loom-fs-mcp", |b| {
        b.iter(|| {
            let line = first_line(spawn(&f.config));
            assert!(line.contains("\"result\""), "{line}");
        })
    });
    group.finish();
}

fn roundtrip(c: &mut Criterion) {
    let f = fixture();
    let mut s = Session::open(&f.config);
    let list_roots = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_roots","arguments":{}}}"#;
    let read_file = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":"page.txt"}}}"#;
    let file_info = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_file_info","arguments":{"root":"docs","path":"page.txt"}}}"#;
    s.request(read_file);
    assert!(
        s.line.contains("quick brown fox") && !s.line.contains("isError\":true"),
        "{}",
        s.line
    );
    let mut group = c.benchmark_group("roundtrip");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("list_roots", |b| b.iter(|| s.request(list_roots)));
    group.bench_function("read_file_4k", |b| b.iter(|| s.request(read_file)));
    group.bench_function("get_file_info", |b| b.iter(|| s.request(file_info)));
    // 4 KiB once decoded: 4095 x and an escaped newline.
    let content = "x".repeat(4095) + "\\n";
    let write_file = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"write_file","arguments":{{"root":"work","path":"page.txt","content":"{content}"}}}}}}"#
    );
    s.request(&write_file);
    assert!(s.line.contains("\"isError\":false"), "{}", s.line);
    group.bench_function("write_file_4k", |b| b.iter(|| s.request(&write_file)));
    group.finish();
    drop(s);

    // The reference server, same files, same pipes.
    let Some(mut r) = session::reference(&f.dir) else {
        return;
    };
    let path = |rel: &str| f.dir.join(rel).to_string_lossy().into_owned();
    let read = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"{}"}}}}}}"#,
        path("docs/page.txt")
    );
    let write = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"{}","content":"{content}"}}}}}}"#,
        path("work/page.txt")
    );
    r.request(&read);
    assert!(r.line.contains("quick brown fox"), "{}", r.line);
    let mut group = c.benchmark_group("reference");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("read_file_4k", |b| b.iter(|| r.request(&read)));
    group.bench_function("write_file_4k", |b| b.iter(|| r.request(&write)));
    group.finish();
}

criterion_group!(benches, startup, roundtrip);
criterion_main!(benches);
