//! The component call alone, without MCP: a fresh instance per call reading
//! a 4 KiB file through the policing filesystem (`runtime/read_file_4k`),
//! against the same call on `get_file_info` of that file, which does no
//! read (`runtime/get_file_info`): the difference is the read itself; and a
//! 1 MiB read (`runtime/read_file_1m`), where the guest's own work shows.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench runtime`.

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(dir.join("page.txt"), "x".repeat(4095) + "\n").unwrap();
    std::fs::write(
        dir.join("book.txt"),
        "a line of sixty-four bytes, the same one again and again.......\n".repeat(1 << 14),
    )
    .unwrap();
    let root = common::reference_root(dir, 2 << 20);
    let tools = common::Components::load(&["get_file_info", "read_file"], 16 << 20);
    let call = |tool: &str, path: &str| tools.call(tool, &root, path);
    let mut group = c.benchmark_group("runtime");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(6));
    group.bench_function("get_file_info", |b| {
        b.iter(|| call("get_file_info", "page.txt"))
    });
    group.bench_function("read_file_4k", |b| b.iter(|| call("read_file", "page.txt")));
    group.bench_function("read_file_1m", |b| b.iter(|| call("read_file", "book.txt")));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
