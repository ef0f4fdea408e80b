#![no_main]

// The policy sources themselves, not the host crate: keeps wasmtime out of the nightly fuzz build.
#[allow(dead_code, unused_imports)]
#[path = "../../src/policy/mod.rs"]
mod policy;

#[allow(dead_code)]
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::check_resolve(data));
