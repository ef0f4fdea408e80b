//! End to end: the Claude Desktop bundle (`bundle/manifest.json`). Its
//! manifest passes `mcpb validate`, and the command lines the `mcpb`
//! library itself computes from it (`getMcpConfigForManifest`) for sample
//! settings start the real binary: every folder gets its picker's role,
//! pickers left unset or empty count as no folder, and no folder at all is
//! refused in the words of the settings. Needs `npm` and the npm registry:
//! skipped with a line on stderr without them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::{Value, json};

/// The `mcpb` version the bundle is built and checked with.
const MCPB: &str = "@anthropic-ai/mcpb@2.1.2";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Installs the `mcpb` package under the test's directory; its package
/// directory, or why not.
fn install_mcpb() -> Result<PathBuf, String> {
    let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcpb");
    let pkg = prefix.join("node_modules/@anthropic-ai/mcpb");
    if pkg.join("dist/index.js").exists() {
        return Ok(pkg);
    }
    let out = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(MCPB)
        .output()
        .map_err(|e| format!("npm cannot run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "npm install {MCPB} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(pkg)
}

/// What Claude Desktop would run for `user_config`, with the bundle's
/// binary replaced by the one under test.
fn command_line(pkg: &Path, user_config: &Value) -> Vec<String> {
    let out = Command::new("node")
        .arg(repo().join("bundle/mcp-config.mjs"))
        .arg(pkg)
        .arg(repo().join("bundle/manifest.json"))
        .arg("/opt/loom-fs-bundle")
        .arg(user_config.to_string())
        .output()
        .expect("run node");
    assert!(out.status.success(), "{out:?}");
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["command"], "/opt/loom-fs-bundle/server/loom-fs-mcp");
    config["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_bundle_validates_and_starts_with_every_combination_of_pickers() {
    let pkg = match install_mcpb() {
        Ok(pkg) => pkg,
        Err(why) => {
            eprintln!("SKIPPED: the bundle's checks need npm and its registry: {why}");
            return;
        }
    };
    let out = Command::new(pkg.join("../../.bin/mcpb"))
        .arg("validate")
        .arg(repo().join("bundle/manifest.json"))
        .output()
        .expect("run mcpb validate");
    assert!(out.status.success(), "mcpb validate: {out:?}");

    let env = Env::new();
    for d in ["r1", "r2", "w1", "w2", "f1", "f2"] {
        env.mkdir(d);
    }
    let dir = |d: &str| env.path(d).to_str().unwrap().to_string();
    let (ro, rw, full) = (
        json!([dir("r1"), dir("r2")]),
        json!([dir("w1"), dir("w2")]),
        json!([dir("f1"), dir("f2")]),
    );
    // Each list filled or not: the roles of the folders served.
    let cases = [
        (
            json!({"read_only_folders": ro, "read_write_folders": rw, "full_access_folders": full}),
            vec![
                ("r1", "reference"),
                ("r2", "reference"),
                ("w1", "sourcecode"),
                ("w2", "sourcecode"),
                ("f1", "workspace"),
                ("f2", "workspace"),
            ],
        ),
        (
            json!({"full_access_folders": full}),
            vec![("f1", "workspace"), ("f2", "workspace")],
        ),
        (
            json!({"read_only_folders": ro, "read_write_folders": [], "full_access_folders": []}),
            vec![("r1", "reference"), ("r2", "reference")],
        ),
        (
            json!({"read_write_folders": rw}),
            vec![("w1", "sourcecode"), ("w2", "sourcecode")],
        ),
    ];
    for (settings, want) in cases {
        let args = command_line(&pkg, &settings);
        let mut cmd = bare_server();
        cmd.args(&args);
        let (client, _, _) = start_command(cmd).await;
        let roots = structured(&call_ok(&client, "list_roots", json!({})).await)["roots"].clone();
        let got: Vec<(String, String)> = roots
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().into(),
                    r["role"].as_str().unwrap().into(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, r)| (n.to_string(), r.to_string()))
            .collect();
        assert_eq!(got, want, "{settings} -> {args:?}");
        client.cancel().await.unwrap();
    }
    // No folder chosen, the pickers unset or emptied: refused, naming them.
    for settings in [
        json!({}),
        json!({"read_only_folders": [], "read_write_folders": [], "full_access_folders": []}),
    ] {
        let args = command_line(&pkg, &settings);
        let out = command()
            .env_remove("LOOMFS_CONFIG")
            .args(&args)
            .output()
            .unwrap();
        assert_fails_with(
            &out,
            "no folder chosen: in the extension's settings, choose at least one folder under \
             'Read-only folders', 'Read and write folders', 'Read, write and delete folders'",
        );
    }
}
