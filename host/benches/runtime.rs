//! The component call alone, without MCP: a fresh instance per call reading
//! a 4 KiB file through the policing filesystem (`runtime/read_file_4k`),
//! against the same call on `get_file_info` of that file, which does no
//! read (`runtime/get_file_info`): the difference is the read itself; and a
//! 1 MiB read (`runtime/read_file_1m`), where the guest's own work shows.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench runtime`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use loom_fs_mcp::policy::{DenyList, Permission, Role, Root};
use loom_fs_mcp::runtime::{self, Budget, Cache, CallMount, CallRequest, GuestLimits, Runtime};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(dir.join("page.txt"), "x".repeat(4095) + "\n").unwrap();
    std::fs::write(
        dir.join("book.txt"),
        "a line of sixty-four bytes, the same one again and again.......\n".repeat(1 << 14),
    )
    .unwrap();
    let root = Arc::new(Root {
        name: "docs".into(),
        path: dir,
        role: Role::Reference,
        perms: Role::Reference.ceiling(),
        deny: DenyList::new([]).unwrap(),
        extra_deny: vec![],
        max_read_bytes: 2 << 20,
        max_document_bytes: 64 << 20,
        min_free_bytes: 0,
        trash_max_bytes: 0,
        repository: None,
    });
    let mut rt = Runtime::new(Budget {
        memory_bytes: 256 << 20,
        timeout: Duration::from_secs(30),
        output_bytes: 16 << 20,
    })
    .unwrap();
    let cache = Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/bench-cache"));
    let mut index = std::collections::HashMap::new();
    for (name, wasm) in runtime::BUILTINS {
        let component = cache.component(rt.engine(), name, wasm).unwrap();
        index.insert(
            *name,
            rt.load(&component, runtime::BUILT_IN.into()).unwrap(),
        );
    }
    let call = |tool: &str, path: &str| {
        let out = rt.call(
            index[tool],
            CallRequest {
                mounts: vec![CallMount::unchecked(Arc::clone(&root), Permission::Read)],
                limits: GuestLimits {
                    max_entries: 1000,
                    max_results: 200,
                    max_search_bytes: 1 << 26,
                },
                arguments: format!(r#"{{"root":"docs","path":"{path}"}}"#),
                staging: None,
                cancel: Default::default(),
                activity: Arc::default(),
                quota: None,
            },
        );
        assert!(out.result.is_ok());
    };
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
