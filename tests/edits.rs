//! End to end: `edit_file` when the model's `old_text` is not the file's
//! text exactly. Indentation drift (spaces for tabs, CRLF for LF) matched
//! line by line when the match is unique, written with the file's
//! indentation and said so; an ambiguous one refused naming both places
//! with the file untouched; a miss answered with the closest region;
//! `replace_all`; parallel tolerant edits of one file all on disk.

mod common;

use common::*;
use futures::future::join_all;
use serde_json::{Value, json};

const WORKSPACE: &str = "audit_log = \"audit.log\"\n\
    [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n";

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"root": "ws", "path": path, "edits": [{"old_text": old, "new_text": new}]})
}

#[tokio::test]
async fn spaces_where_the_file_has_tabs_apply_with_the_files_tabs() {
    let env = Env::new();
    let file = "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n";
    env.write("ws/tabs.rs", file);
    let client = start(&env.config(WORKSPACE)).await;
    let r = call_ok(
        &client,
        "edit_file",
        edit(
            "tabs.rs",
            "    if x {\n        y();\n    }",
            "    if x {\n        y();\n        z();\n    }",
        ),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/tabs.rs")).unwrap(),
        "fn f() {\n\tif x {\n\t\ty();\n\t\tz();\n\t}\n}\n"
    );
    assert!(
        text(&r).contains(
            "edit 1 matched ignoring whitespace at line ends (lines 2-4), written with the \
             file's indentation"
        ),
        "{}",
        text(&r)
    );
    assert_eq!(structured(&r)["tolerant"], json!([1]));
    assert!(structured(&r).get("replaced").is_none());
    assert!(text(&r).contains("+\t\tz();"), "{}", text(&r));
    // An exact match says nothing of the kind.
    let exact = call_ok(&client, "edit_file", edit("tabs.rs", "z();", "w();")).await;
    assert!(structured(&exact).get("tolerant").is_none());
    assert!(!text(&exact).contains("ignoring whitespace"));
    assert_no_host_path(&env, &[&r, &exact]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_crlf_file_with_tabs_keeps_both_under_an_lf_old_text_with_spaces() {
    let env = Env::new();
    env.write("ws/dos.txt", "a:\r\n\tb: 1\r\n\tc: 2\r\n");
    let client = start(&env.config(WORKSPACE)).await;
    let r = call_ok(
        &client,
        "edit_file",
        edit("dos.txt", "  b: 1\n  c: 2\n", "  b: 1\n  c: 3\n  d: 4\n"),
    )
    .await;
    assert_eq!(structured(&r)["tolerant"], json!([1]));
    assert_eq!(
        std::fs::read(env.path("ws/dos.txt")).unwrap(),
        b"a:\r\n\tb: 1\r\n\tc: 3\r\n\td: 4\r\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_match_ambiguous_once_whitespace_is_ignored_is_refused_naming_both() {
    let env = Env::new();
    let file = "def f():\n\treturn 1\n\ndef g():\n\t\treturn 1\n";
    env.write("ws/two.py", file);
    let client = start(&env.config(WORKSPACE)).await;
    let r = call(
        &client,
        "edit_file",
        edit("two.py", "    return 1", "    return 2"),
    )
    .await;
    assert_refused(
        &r,
        "edit 1: old_text is not in 'two.py' exactly, and ignoring whitespace at line ends it \
         matches 2 places (line 2, line 5)",
    );
    assert_eq!(
        std::fs::read(env.path("ws/two.py")).unwrap(),
        file.as_bytes()
    );
    assert!(env.trash("ws").is_empty());
    // With more context it is unique, and applies.
    call_ok(
        &client,
        "edit_file",
        edit("two.py", "def g():\n    return 1", "def g():\n    return 2"),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/two.py")).unwrap(),
        "def f():\n\treturn 1\n\ndef g():\n\t\treturn 2\n"
    );
    // Exact ambiguity names its lines too.
    let r = call(&client, "edit_file", edit("two.py", "return", "r")).await;
    assert_refused(
        &r,
        "edit 1: old_text matches 2 times in 'two.py' (line 2, 5); include more context so it \
         matches once, or pass replace_all",
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_miss_shows_the_closest_region_with_a_short_diff() {
    let env = Env::new();
    let mut file: String = (1..=40).map(|i| format!("filler line {i}\n")).collect();
    file.push_str("fn total(xs: &[u32]) -> u32 {\n    xs.iter().sum()\n}\n");
    env.write("ws/lib.rs", &file);
    let client = start(&env.config(WORKSPACE)).await;
    let r = call(
        &client,
        "edit_file",
        edit(
            "lib.rs",
            "fn total(xs: &[u64]) -> u64 {\n    xs.iter().sum()\n}",
            "x",
        ),
    )
    .await;
    assert_refused(
        &r,
        "edit 1: old_text was not found in 'lib.rs', even ignoring whitespace at line ends; \
         nothing was changed. The closest region is lines 41-43 ('-' old_text, '+' the file):\n\
         -fn total(xs: &[u64]) -> u64 {\n\
         +fn total(xs: &[u32]) -> u32 {\n     xs.iter().sum()\n }\n",
    );
    // Bounded: nothing of the filler above it.
    assert!(!text(&r).contains("filler"), "{}", text(&r));
    // Nothing alike at all: said so, with no region.
    let r = call(&client, "edit_file", edit("lib.rs", "qqqq wwww", "x")).await;
    assert_refused(&r, "and no region of it is alike; nothing was changed");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/lib.rs")).unwrap(),
        file
    );
    assert!(env.trash("ws").is_empty());
    assert_no_host_path(&env, &[&r]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn replace_all_replaces_every_place_and_needs_one() {
    let env = Env::new();
    env.write("ws/todo.md", "- [ ] a\n- [ ] b\n- [x] c\n- [ ] d\n");
    env.write("ws/ind.py", "if a:\n\tx = 1\nif b:\n\t\tx = 1\n");
    let client = start(&env.config(WORKSPACE)).await;
    let r = call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "todo.md", "edits": [
            {"old_text": "- [ ]", "new_text": "- [x]", "replace_all": true},
            {"old_text": "- [x] d", "new_text": "- [x] D"}]}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/todo.md")).unwrap(),
        "- [x] a\n- [x] b\n- [x] c\n- [x] D\n"
    );
    assert_eq!(structured(&r)["replaced"], json!([3, 1]));
    assert!(
        text(&r).contains("; edit 1 replaced 3 place(s)"),
        "{}",
        text(&r)
    );
    // Tolerant places, each with its own indentation.
    let r = call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "ind.py", "edits": [
            {"old_text": "  x = 1", "new_text": "  x = 2", "replace_all": true}]}),
    )
    .await;
    assert_eq!(structured(&r)["replaced"], json!([2]));
    assert_eq!(structured(&r)["tolerant"], json!([1]));
    assert_eq!(
        std::fs::read_to_string(env.path("ws/ind.py")).unwrap(),
        "if a:\n\tx = 2\nif b:\n\t\tx = 2\n"
    );
    // No place at all: refused, nothing written.
    let r = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "todo.md", "edits": [
            {"old_text": "- [ ] z", "new_text": "y", "replace_all": true}]}),
    )
    .await;
    assert_refused(&r, "edit 1: old_text was not found in 'todo.md'");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/todo.md")).unwrap(),
        "- [x] a\n- [x] b\n- [x] c\n- [x] D\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn denied_and_outside_files_stay_out_of_reach_of_tolerant_edits() {
    let env = Env::new();
    env.write("ws/.env", "\tKEY=CANARY\n")
        .write("ws/sub/id_rsa", "\tCANARY\n")
        .write("outside/o.txt", "\tCANARY\n")
        .symlink("../outside", "ws/out");
    let client = start(&env.config(WORKSPACE)).await;
    let mut results = Vec::new();
    for (path, rule) in [
        (".env", "matches deny pattern '.env'"),
        ("sub/id_rsa", "matches deny pattern 'id_rsa*'"),
        ("../outside/o.txt", "refused by rule 'confinement'"),
        ("out/o.txt", "refused by rule 'confinement'"),
    ] {
        let r = call(&client, "edit_file", edit(path, "    CANARY", "x")).await;
        assert_refused(&r, rule);
        results.push(r);
    }
    assert_clean(&env, &results);
    assert_eq!(
        std::fs::read_to_string(env.path("outside/o.txt")).unwrap(),
        "\tCANARY\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/.env")).unwrap(),
        "\tKEY=CANARY\n"
    );
    client.cancel().await.unwrap();
}

/// Tolerant edits sent at once to one file: each is applied to the file as
/// the ones before left it, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tolerant_edits_of_one_file_all_land() {
    let n = 16;
    let env = Env::new();
    let file: String = (0..n)
        .map(|i| format!("\tline {i:02}: original\n"))
        .collect();
    env.write("ws/e.txt", &file);
    let client = start(&env.config(WORKSPACE)).await;
    let results = join_all((0..n).map(|i| {
        call(
            &client,
            "edit_file",
            edit(
                "e.txt",
                &format!("    line {i:02}: original"),
                &format!("    line {i:02}: changed by call {i}"),
            ),
        )
    }))
    .await;
    for (i, r) in results.iter().enumerate() {
        assert!(!is_error(r), "call {i}: {}", text(r));
        assert_eq!(structured(r)["tolerant"], json!([1]), "call {i}");
    }
    let expected: String = (0..n)
        .map(|i| format!("\tline {i:02}: changed by call {i}\n"))
        .collect();
    assert_eq!(
        std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
        expected
    );
    assert_eq!(
        env.trash("ws").len(),
        n,
        "each call kept the version it replaced"
    );
    client.cancel().await.unwrap();
}
