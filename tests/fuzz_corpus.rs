//! Replays the committed fuzz seed corpus (`host/fuzz/corpus/`) through the
//! fuzz targets' checks, on stable, without cargo-fuzz.

use std::fs;
use std::path::Path;

/// The harness reaches the policy module as `crate::policy`.
mod policy {
    pub use loom_fs_mcp::policy::*;
}

#[path = "../host/fuzz/harness.rs"]
mod harness;

/// The one list of the tool crates, as `host/build.rs` reads it.
#[path = "../host/build/tool_crates.rs"]
mod tool_crates;

/// Fewer seeds than this means the corpus went missing.
const MIN_SEEDS: usize = 20;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    seeds.sort();
    for seed in &seeds {
        let data = fs::read(seed).expect("seed");
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("");
            panic!("{target}: seed {} fails: {why}", seed.display());
        }
    }
    assert!(
        seeds.len() >= MIN_SEEDS,
        "{target}: only {} seeds in {}",
        seeds.len(),
        dir.display()
    );
    seeds.len()
}

#[test]
fn seed_corpus_keeps_the_invariants() {
    let resolve = replay("resolve", harness::check_resolve);
    let arguments = replay("arguments", harness::check_arguments);
    eprintln!("replayed {resolve} resolve and {arguments} arguments seeds");
    let _ = fs::remove_dir_all(&harness::fixture().base);
}

#[test]
fn the_harness_knows_every_tool_crate() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-tools");
    let mut crates = tool_crates::tool_crates(&guests);
    crates.sort();
    let mut known: Vec<String> = harness::tool_names()
        .into_iter()
        .chain(harness::LEFT_OUT.iter().copied())
        .map(String::from)
        .collect();
    known.sort();
    assert_eq!(
        known, crates,
        "host/fuzz/harness.rs: model the path arguments of each tool crate of \
         guest-tools/Cargo.toml in tools(), or name it in LEFT_OUT"
    );
}
