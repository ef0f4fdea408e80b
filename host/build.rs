//! Builds the built-in tool components (`guest-tools/`, its own workspace)
//! for wasm32-wasip2, embeds them in the binary, and writes them out as plain
//! `.wasm` files next to it (`<target>/<profile>/components/`), so the same
//! components can be inspected or run under a standalone `wasmtime`.
//!
//! The nested cargo uses its own target directory (sharing ours would
//! deadlock on cargo's lock) and none of the flags meant for the host build.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "build/tool_crates.rs"]
mod tool_crates;

use tool_crates::tool_crates;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let repo = manifest_dir.parent().expect("host/ sits in the repository");
    let guests = repo.join("guest-tools");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    // `names/` is the naming rule the guests are built with.
    for watched in ["guest-tools", "wit", "names"] {
        println!("cargo:rerun-if-changed={}", repo.join(watched).display());
    }

    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR layout")
        .to_path_buf();
    let target_dir = profile_dir.parent().expect("OUT_DIR layout").to_path_buf();
    // The components are the same wasm whatever the host's target:
    // scripts/test's type-checks for macOS and Windows point this at the
    // native build's guest directory rather than building them twice more.
    println!("cargo:rerun-if-env-changed=LOOMFS_GUEST_TARGET_DIR");
    let guest_target = env::var_os("LOOMFS_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir.join("guest-tools"));

    // The tool crates (see build/tool_crates.rs), by the name of the
    // `.wasm` each produces.
    let tools = tool_crates(&guests);
    assert!(
        !tools.is_empty(),
        "guest-tools/Cargo.toml lists no tool crate"
    );

    ensure_wasm_target();
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        // Run from guest-tools/ so its .cargo/config.toml applies.
        .current_dir(&guests)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            TARGET,
            "--manifest-path",
        ])
        .arg(guests.join("Cargo.toml"))
        .args(tools.iter().flat_map(|tool| ["-p", tool.as_str()]))
        .env("CARGO_TARGET_DIR", &guest_target)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_MAKEFLAGS")
        // `cargo clippy` on the host must not lint (and rebuild) the guests.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .stdout(Stdio::null())
        .status()
        .expect("cannot run cargo for the guest components");
    assert!(status.success(), "building the guest components failed");

    let built = guest_target.join(TARGET).join("release");
    let published = profile_dir.join("components");
    fs::create_dir_all(&published).expect("create components dir");
    let mut list = String::from("&[\n");
    for tool in &tools {
        let file = format!("{tool}.wasm");
        let embedded = out_dir.join(&file);
        copy(&built.join(&file), &embedded);
        copy(&built.join(&file), &published.join(&file));
        list.push_str(&format!(
            "    ({tool:?}, include_bytes!({:?}).as_slice()),\n",
            embedded.display().to_string()
        ));
    }
    list.push(']');
    fs::write(out_dir.join("builtins.rs"), list).expect("write builtins.rs");
    println!(
        "cargo:rustc-env=LOOMFS_COMPONENTS_DIR={}",
        published.display()
    );
}

fn copy(from: &Path, to: &Path) {
    fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}

/// rust-toolchain.toml names the target, but rustup only installs listed
/// targets with a toolchain it installs; on a machine that already has the
/// toolchain, add the target here so the build needs no extra step.
fn ensure_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot.is_some_and(|s| s.join("lib/rustlib").join(TARGET).exists());
    if installed {
        return;
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup (needed for the tool components)"
    );
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", TARGET]);
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        rustup.args(["--toolchain", &toolchain]);
    }
    let ok = rustup
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the {TARGET} target is missing and `rustup target add {TARGET}` failed; install it and build again"
    );
    // Cargo shows a build script's warnings again on every build until the
    // script runs again, and a file changed while it runs does not count:
    // one dated ahead makes the next build run it once more, with the
    // target there and nothing to say (checked by hand on cargo 1.95).
    let stamp = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("wasm-target-added");
    let ahead = std::time::SystemTime::now() + std::time::Duration::from_secs(24 * 3600);
    fs::File::create(&stamp)
        .and_then(|f| f.set_modified(ahead))
        .expect("write the target stamp");
    println!("cargo:rerun-if-changed={}", stamp.display());
}
