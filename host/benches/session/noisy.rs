//! The noisy tree: a seeded, reproducible fixture where most files are noise
//! the deny list prunes, and the `find` and `grep` commands that do the same
//! searches as whole processes (the floor of `search_files`).
//!
//! 300 useful files (240 `.py`, the rest `.md`/`.toml`/`.json`, 100 B – 4 KiB,
//! in nested packages) and 24,000 files under `.venv/` and `node_modules/`,
//! nested like real site-packages. [`TOKEN`] sits in 10 useful files (and in
//! noise files, which no search may report).

use std::path::Path;
use std::process::Command;

use super::code_text;

/// The token some files hold, for `contains` searches.
pub const TOKEN: &str = "LOOMFS_NEEDLE_7f3a";
const SEED: u64 = 0x10_0f5;

/// Words of the generated code-like text.
const WORDS: &[&str] = &[
    "def", "return", "self", "import", "value", "config", "for", "in", "if", "else", "items",
    "result", "path", "name", "=", "(", ")", ":", "None", "True",
];

/// Text of `len` bytes made of code-like lines, with the token when asked.
fn text(rng: &mut fastrand::Rng, len: usize, token: bool) -> String {
    code_text(rng, len, WORDS, token.then_some(TOKEN))
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Builds the tree under `root`; returns the useful files holding the token,
/// relative to `root`.
pub fn build(root: &Path) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut holders = Vec::new();
    // 300 useful files: 20 packages of 3 modules and 12 files; 10 hold the token.
    let token_at: Vec<usize> = (0..10).map(|i| i * 30 + 7).collect();
    for n in 0..300 {
        let package = n / 15;
        let rel = match n % 15 {
            0 => format!("app/pkg{package:02}/README.md"),
            1 => format!("app/pkg{package:02}/pyproject.toml"),
            2 => format!("app/pkg{package:02}/data/schema.json"),
            3 => format!("app/pkg{package:02}/tests/test_{n:03}.py"),
            i if i < 8 => format!("app/pkg{package:02}/core/mod_{n:03}.py"),
            _ => format!("app/pkg{package:02}/mod_{n:03}.py"),
        };
        let has = token_at.contains(&n);
        let len = rng.usize(100..=4096);
        write(&root.join(&rel), &text(&mut rng, len, has));
        if has {
            holders.push(rel);
        }
    }
    // 24,000 noise files: 12,000 in site-packages, 12,000 in node_modules.
    for n in 0..12_000 {
        let package = n / 60;
        let rel = format!(
            ".venv/lib/python3.12/site-packages/dist{package:03}/sub{}/m{n:05}.py",
            (n / 20) % 3
        );
        let len = rng.usize(100..=4096);
        write(&root.join(rel), &text(&mut rng, len, n % 500 == 0));
    }
    for n in 0..12_000 {
        let package = n / 40;
        let rel = format!(
            "node_modules/lib{package:03}/{}/f{n:05}.js",
            ["lib", "dist"][n % 2]
        );
        let len = rng.usize(100..=4096);
        write(&root.join(rel), &text(&mut rng, len, n % 500 == 0));
    }
    holders
}

/// `find ROOT -name node_modules -prune -o -name .venv -prune -o -name
/// '*.py' -print`: the `.py` files outside the noise.
pub fn find_prune(root: &Path) -> Command {
    let mut cmd = Command::new("find");
    cmd.arg(root).args([
        "-name",
        "node_modules",
        "-prune",
        "-o",
        "-name",
        ".venv",
        "-prune",
        "-o",
        "-name",
        "*.py",
        "-print",
    ]);
    cmd
}

/// `grep -rl --exclude-dir=.venv --exclude-dir=node_modules TOKEN ROOT`: the
/// files outside the noise holding the token.
pub fn grep_exclude(root: &Path) -> Command {
    let mut cmd = Command::new("grep");
    cmd.args([
        "-rl",
        "--exclude-dir=.venv",
        "--exclude-dir=node_modules",
        TOKEN,
    ])
    .arg(root);
    cmd
}
