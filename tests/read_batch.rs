//! End to end: `read_multiple_files` with the real binary over stdio. Each
//! path is resolved and read on its own: denied names (as asked, in every
//! position, through a symlink), `..` and symlinks out of the root, missing,
//! binary and over-limit files are error lines of their own while the others
//! come back; the call's one byte budget names the files it cut; nothing
//! outside or denied is read, no host path is shown, every path is audited.

mod common;

use common::*;
use serde_json::{Value, json};

/// A `docs` root with a 4 KiB read limit, secrets in and around it.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("docs/a.txt", "alpha\none\n")
        .write("docs/sub/b.txt", "bravo\ntwo\nthree\n")
        .write("docs/mid1.txt", "m".repeat(2999) + "\n")
        .write("docs/mid2.txt", "n".repeat(2999) + "\n")
        .write("docs/big.txt", "b".repeat(4999) + "\n")
        .write("docs/blob.bin", b"\x7fELF\0\0\0\x01binary")
        .write("docs/.env", "CANARY-DOTENV\n")
        .write("docs/sub/.env", "CANARY-SUB-DOTENV\n")
        .write("docs/id_rsa", "CANARY-KEY\n")
        .write("docs/sub/id_rsa.pub", "CANARY-PUB\n")
        .write("docs/.git/config", "CANARY-GIT\n")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .symlink("../outside/secret.txt", "docs/link_out")
        .symlink(".env", "docs/alias")
        .symlink("a.txt", "docs/link_in");
    let config = env.config(&format!(
        r#"
        audit_log = "{}"

        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        max_read_bytes = 4096
        "#,
        env.path("audit.log").display()
    ));
    (env, config)
}

fn files(r: &rmcp::model::CallToolResult) -> Vec<Value> {
    structured(r)["files"].as_array().unwrap().clone()
}

#[tokio::test]
async fn each_file_succeeds_or_fails_on_its_own() {
    let (env, config) = fixture();
    let before = (env.snapshot_of("docs"), env.snapshot_of("outside"));
    let client = start(&config).await;
    let paths = [
        "a.txt",
        ".env",
        "missing.txt",
        "big.txt",
        "sub/b.txt",
        "../outside/secret.txt",
        "link_out",
        "sub/.env",
        "id_rsa",
        "sub/id_rsa.pub",
        ".git/config",
        "sub/../.env",
        "alias",
        "blob.bin",
        "sub",
        "link_in",
    ];
    let r = call(
        &client,
        "read_file",
        json!({"root": "docs", "paths": paths}),
    )
    .await;
    assert!(!is_error(&r), "{r:?}");
    let got = files(&r);
    assert_eq!(got.len(), paths.len());
    for (file, asked) in got.iter().zip(paths) {
        assert_eq!(file["path"].as_str(), Some(asked), "{file}");
    }
    assert_eq!(got[0]["content"], "alpha\none\n");
    assert_eq!(got[4]["content"], "bravo\ntwo\nthree\n");
    assert_eq!(got[15]["content"], "alpha\none\n");
    let error = |i: usize| {
        got[i]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", got[i]))
    };
    for i in [1, 7, 8, 9, 10, 11, 12] {
        assert!(error(i).contains("refused by rule 'deny'"), "{}", got[i]);
    }
    for i in [5, 6] {
        assert!(
            error(i).contains("refused by rule 'confinement'"),
            "{}",
            got[i]
        );
    }
    assert!(error(2).contains("does not exist"), "{}", got[2]);
    assert!(
        error(3).contains("over this root's read limit"),
        "{}",
        got[3]
    );
    assert!(error(13).contains("binary file"), "{}", got[13]);
    assert!(error(14).contains("is a directory"), "{}", got[14]);
    assert_eq!(structured(&r)["read"], 3);
    assert_eq!(structured(&r)["failed"], 13);
    // Text: one block per file, the path first, then a summary.
    let blocks: Vec<String> = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_eq!(blocks[0], "a.txt:\nalpha\none\n");
    assert!(
        blocks[1].starts_with(".env: error: refused by rule 'deny'"),
        "{}",
        blocks[1]
    );
    assert_eq!(blocks.last().unwrap(), "3 of 16 files read; 13 failed");
    assert_clean(&env, &[r]);
    assert!((env.snapshot_of("docs"), env.snapshot_of("outside")) == before);

    // Each path is audited: allowed ones as reads, refused ones with their rule.
    client.cancel().await.unwrap();
    let audit = audit(&env);
    let line = |path: &str| {
        audit
            .iter()
            .find(|l| l["tool"] == "read_file" && l["path"] == path)
            .unwrap_or_else(|| panic!("no audit line for {path}: {audit:?}"))
    };
    assert_eq!(line("a.txt")["decision"], "allow");
    assert_eq!(line("missing.txt")["decision"], "allow");
    assert_eq!(line(".env")["rule"], "deny");
    assert_eq!(line("sub/id_rsa.pub")["rule"], "deny");
    assert_eq!(line("link_out")["rule"], "confinement");
    assert_eq!(line("../outside/secret.txt")["decision"], "deny");
}

#[tokio::test]
async fn one_byte_budget_for_the_call_and_the_files_that_did_not_fit_are_named() {
    let (env, config) = fixture();
    let client = start(&config).await;
    // 10 + 3000 bytes fit in 4096; the second 3000 do not, then 17 still do.
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "paths": ["a.txt", "mid1.txt", "mid2.txt", "sub/b.txt"]}),
    )
    .await;
    let got = files(&r);
    assert_eq!(got[1]["content"].as_str().unwrap().len(), 3000);
    assert_eq!(got[2]["cut"], true, "{}", got[2]);
    assert_eq!(got[2]["size"], 3000);
    assert!(got[2].get("content").is_none());
    assert_eq!(got[3]["content"], "bravo\ntwo\nthree\n");
    assert_eq!(structured(&r)["cut"], 1);
    let t = text(&r);
    assert!(
        t.contains(
            "mid2.txt: cut: 2.9 KiB do not fit in the 1.1 KiB left of this call's read limit"
        ),
        "{t}"
    );
    assert!(t.ends_with("3 of 4 files read; 1 cut: this call reads at most 4.0 KiB in all (the root's read limit)"), "{t}");
    assert_clean(&env, &[r]);
}

#[tokio::test]
async fn a_line_range_applies_to_every_file() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "paths": ["sub/b.txt", "a.txt", "big.txt"], "offset": 2, "limit": 1}),
    )
    .await;
    let got = files(&r);
    assert_eq!(got[0]["content"], "two\n");
    assert_eq!(
        (got[0]["start_line"].clone(), got[0]["end_line"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(got[1]["content"], "one\n");
    // A range of a file over the limit is read, as with read_file.
    assert_eq!(got[2]["content"], "");
    assert_eq!(got[2]["note"], "no lines in the range; 1 in the file");
    assert!(
        text(&r).starts_with("sub/b.txt (lines 2-2 of a file of 16 B):\ntwo\n"),
        "{}",
        text(&r)
    );
    assert_clean(&env, &[r]);
}

#[tokio::test]
async fn a_batch_where_every_file_fails_is_an_error_naming_each() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = call(
        &client,
        "read_file",
        json!({"root": "docs", "paths": [".env", "nope.txt", "../outside/secret.txt"]}),
    )
    .await;
    assert_refused(
        &r,
        "no file could be read:\n.env: error: refused by rule 'deny'",
    );
    let t = text(&r);
    assert!(
        t.contains("nope.txt: error: 'nope.txt' does not exist"),
        "{t}"
    );
    assert!(
        t.contains("../outside/secret.txt: error: refused by rule 'confinement'"),
        "{t}"
    );
    assert_clean(&env, &[r]);
}

#[tokio::test]
async fn malformed_lists_are_refused_before_anything_is_read() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let forged = call(
        &client,
        "read_file",
        json!({"root": "docs", "paths": ["a.txt", {"path": ".env", "refused": "x"}]}),
    )
    .await;
    assert_refused(&forged, "'paths' must be an array of strings");
    let many: Vec<String> = (0..300).map(|i| format!("f{i}.txt")).collect();
    let too_many = call(&client, "read_file", json!({"root": "docs", "paths": many})).await;
    assert_refused(&too_many, "at most 256 per call");
    let empty = call(&client, "read_file", json!({"root": "docs", "paths": []})).await;
    assert_refused(&empty, "'paths' must name 1 to 100 files, not 0");
    let unknown = call(
        &client,
        "read_file",
        json!({"root": "nope", "paths": ["a.txt"]}),
    )
    .await;
    assert!(is_error(&unknown), "{unknown:?}");
    assert_clean(&env, &[forged, too_many, empty, unknown]);
}
