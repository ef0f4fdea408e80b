//! End to end: `list_directory` with `tree: true` over stdio. The tree's shape (directories
//! first, then by name; depth; empty and unopened directories told apart),
//! the entry cap and its note, `exclude` globs, depth bounds, denied names
//! at every depth, symlinks (a loop, one out of the root) shown and never
//! followed, an ignored `target/` shown once, refusals of paths that leave
//! the root. Nothing outside the root shows, no host path in any reply.

mod common;

use common::*;
use serde_json::{Value, json};

fn config(env: &Env, max_entries: usize) -> std::path::PathBuf {
    env.config(&format!(
        "audit_log = \"audit.log\"\nmax_list_entries = {max_entries}\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"reference\"\n"
    ))
}

/// `list_directory` with `tree: true` and `args`.
fn as_tree(mut args: Value) -> Value {
    args["tree"] = json!(true);
    args
}

async fn tree(client: &Client, args: Value) -> rmcp::model::CallToolResult {
    call_ok(client, "list_directory", as_tree(args)).await
}

#[tokio::test]
async fn a_tree_lists_directories_first_then_by_name_down_to_its_depth() {
    let env = Env::new();
    env.write("ws/b.txt", "b\n")
        .write("ws/A.md", "a\n")
        .write("ws/src/main.rs", "fn main() {}\n")
        .write("ws/src/deep/er/most.rs", "x\n")
        .write("ws/src/deep/er/than/three.rs", "x\n")
        .mkdir("ws/empty")
        .mkdir("ws/src/zz");
    let client = start(&config(&env, 1000)).await;
    let r = tree(&client, json!({"root": "ws"})).await;
    assert_eq!(
        text(&r),
        "'.': 8 entries, depth 3, directories first, then by name\n\
         empty/\n\
         src/\n  deep/\n    er/\n  zz/\n  main.rs\n\
         A.md\n\
         b.txt\n"
    );
    assert_eq!(
        structured(&r),
        &json!({"path": ".", "entries": 8, "tree": [
            {"empty/": []},
            {"src/": [{"deep/": ["er/"]}, {"zz/": []}, "main.rs"]},
            "A.md", "b.txt"]})
    );
    // Depth 1 shows the first level only; 10 everything here.
    let r = tree(&client, json!({"root": "ws", "depth": 1})).await;
    assert_eq!(
        structured(&r)["tree"],
        json!(["empty/", "src/", "A.md", "b.txt"])
    );
    let r = tree(&client, json!({"root": "ws", "path": "src", "depth": 10})).await;
    assert_eq!(
        structured(&r)["tree"],
        json!([{"deep/": [{"er/": [{"than/": ["three.rs"]}, "most.rs"]}]}, {"zz/": []}, "main.rs"])
    );
    assert!(
        text(&r).starts_with("'src': 7 entries, depth 10,"),
        "{}",
        text(&r)
    );
    assert_no_host_path(&env, &[&r]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn depth_out_of_bounds_and_bad_arguments_are_refused_clearly() {
    let env = Env::new();
    env.write("ws/a.txt", "a\n")
        .write("outside/o.txt", "CANARY\n");
    env.symlink("../outside", "ws/out");
    let client = start(&config(&env, 1000)).await;
    let mut results = Vec::new();
    for (args, needle) in [
        (
            json!({"root": "ws", "depth": 0}),
            "'depth' must be between 1 and 10, not 0",
        ),
        (
            json!({"root": "ws", "depth": 11}),
            "'depth' must be between 1 and 10, not 11",
        ),
        (
            json!({"root": "ws", "exclude": ["/abs"]}),
            "exclude '/abs' is absolute",
        ),
        (
            json!({"root": "ws", "exclude": ["../x"]}),
            "exclude '../x' contains '..'",
        ),
        (
            json!({"root": "ws", "exclude": ["a["]}),
            "invalid exclude 'a['",
        ),
        (json!({"root": "ws", "exclude": [""]}), "'exclude' is empty"),
        (
            json!({"root": "ws", "path": "a.txt"}),
            "'a.txt' is not a directory",
        ),
        (
            json!({"root": "ws", "path": ".."}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "../outside"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "out"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "missing"}),
            "'missing' does not exist",
        ),
    ] {
        let r = call(&client, "list_directory", as_tree(args.clone())).await;
        assert_refused(&r, needle);
        results.push(r);
    }
    assert_clean(&env, &results);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_tree_cut_by_its_entry_cap_says_so_and_names_what_was_left_out() {
    let env = Env::new();
    for d in ["a", "b", "c"] {
        for f in 0..3 {
            env.write(&format!("ws/{d}/f{f}.txt"), "x\n");
        }
    }
    env.write("ws/top.txt", "x\n");
    let client = start(&config(&env, 6)).await;
    let r = tree(&client, json!({"root": "ws"})).await;
    let s = structured(&r);
    assert_eq!(s["truncated"], true);
    assert_eq!(s["entries"], 6);
    // Breadth first: the four first-level entries, then two of a/.
    assert_eq!(
        s["tree"],
        json!([{"a/": ["f0.txt", "f1.txt"]}, "b/", "c/", "top.txt"])
    );
    assert_eq!(
        s["note"],
        "tree cut at 6 entries (nearest levels first); entries not shown, by directory: \
         'a' (1), 'b' (3), 'c' (3); call again with 'path' set to one of them"
    );
    assert!(
        text(&r).starts_with(
            "'.': 6 entries, depth 3, directories first, then by name, cut: the note below \
             names what was left out\n"
        ),
        "{}",
        text(&r)
    );
    // Not cut: no mark at all.
    let r = tree(&client, json!({"root": "ws", "path": "b"})).await;
    assert!(structured(&r).get("truncated").is_none());
    assert!(structured(&r).get("note").is_none());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn exclude_globs_leave_entries_out_with_everything_below() {
    let env = Env::new();
    env.write("ws/app.log", "x\n")
        .write("ws/src/run.log", "x\n")
        .write("ws/src/main.rs", "x\n")
        .write("ws/src/gen/big.rs", "x\n")
        .write("ws/build/out/a.o", "x\n")
        .write("ws/docs/gen/keep.md", "x\n");
    let client = start(&config(&env, 1000)).await;
    let r = tree(
        &client,
        json!({"root": "ws", "exclude": ["*.log", "build", "src/gen"]}),
    )
    .await;
    assert_eq!(
        structured(&r)["tree"],
        json!([{"docs/": [{"gen/": ["keep.md"]}]}, {"src/": ["main.rs"]}])
    );
    assert_eq!(structured(&r)["entries"], 5);
    // Relative to `path`.
    let r = tree(
        &client,
        json!({"root": "ws", "path": "src", "exclude": ["gen/*"]}),
    )
    .await;
    assert_eq!(
        structured(&r)["tree"],
        json!([{"gen/": []}, "main.rs", "run.log"])
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn denied_names_show_at_no_depth() {
    let env = Env::new();
    env.write("ws/ok.txt", "x\n");
    let denied = [".env", "id_rsa", ".env.local", "id_rsa.pub", "key.pem"];
    let mut dir = String::from("ws");
    for level in 0..5 {
        for name in denied {
            env.write(&format!("{dir}/{name}"), "CANARY\n");
        }
        env.write(&format!("{dir}/.ssh/id_ed25519"), "CANARY\n")
            .write(&format!("{dir}/.git/config"), "CANARY\n")
            .write(&format!("{dir}/node_modules/m.js"), "CANARY\n");
        dir = format!("{dir}/d{level}");
        env.write(&format!("{dir}/f.txt"), "x\n");
    }
    env.symlink(".env", "ws/alias");
    let client = start(&config(&env, 1000)).await;
    let r = tree(&client, json!({"root": "ws", "depth": 10})).await;
    let all = serde_json::to_string(&r).unwrap();
    for name in denied
        .iter()
        .chain(&[".ssh", "id_ed25519", ".git", "node_modules", "CANARY"])
    {
        assert!(!all.contains(name), "{name} shown: {all}");
    }
    // The levels are all there, each with its one file.
    assert_eq!(structured(&r)["entries"], 12, "{}", text(&r));
    // The symlink `alias` (to `.env`) turns the type column on.
    assert!(
        text(&r).contains("\n        d d4/\n          - f.txt\n"),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("\nl alias\n"), "{}", text(&r));
    // Named as the path, a denied directory is refused as its rule says.
    for (path, rule) in [
        (".ssh", "matches deny pattern '.ssh'"),
        ("d0/.git", "matches deny pattern '.git'"),
        ("d0/d1/node_modules", "matches deny pattern 'node_modules'"),
    ] {
        let r = call(
            &client,
            "list_directory",
            json!({"root": "ws", "path": path, "tree": true}),
        )
        .await;
        assert_refused(&r, rule);
        assert_clean(&env, &[r]);
    }
    assert_clean(&env, &[r]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn symlinks_are_shown_never_followed_even_in_a_loop() {
    let env = Env::new();
    env.write("ws/d/f.txt", "x\n")
        .write("outside/secret.txt", "CANARY\n")
        .symlink(".", "ws/d/self")
        .symlink("..", "ws/d/up")
        .symlink("../outside", "ws/out")
        .symlink("d/f.txt", "ws/to_file");
    let client = start(&config(&env, 1000)).await;
    let r = tree(&client, json!({"root": "ws", "depth": 10})).await;
    assert_eq!(
        structured(&r)["tree"],
        json!([{"d/": ["f.txt", "self", "up"]}, "out", "to_file"])
    );
    assert_eq!(
        structured(&r)["types"],
        json!({"d/self": "symlink", "d/up": "symlink", "out": "symlink", "to_file": "symlink"})
    );
    assert_eq!(
        text(&r),
        "'.': 6 entries, depth 10, directories first, then by name; each line: type \
         (d directory, - file, l symlink), name\n\
         d d/\n  - f.txt\n  l self\n  l up\nl out\nl to_file\n"
    );
    assert_clean(&env, &[r]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_ignored_target_is_shown_once_and_not_descended() {
    let env = Env::new();
    env.write("ws/.gitignore", "target/\n*.tmp\n")
        .write("ws/src/lib.rs", "x\n")
        .write("ws/src/scratch.tmp", "x\n")
        .write("ws/target/debug/build/out.o", "x\n")
        .write("ws/target/release/app", "x\n");
    let client = start(&config(&env, 1000)).await;
    let r = tree(&client, json!({"root": "ws", "depth": 5})).await;
    assert_eq!(
        structured(&r)["tree"],
        json!([{"src/": ["lib.rs", "scratch.tmp"]}, "target/", ".gitignore"])
    );
    assert_eq!(
        structured(&r)["ignored"],
        json!(["src/scratch.tmp", "target/"])
    );
    let t = text(&r);
    assert_eq!(t.matches("target").count(), 1, "{t}");
    assert!(!t.contains("debug") && !t.contains("release"), "{t}");
    assert!(t.contains("\nd! target/\n"), "{t}");
    assert!(t.contains("\n  -! scratch.tmp\n"), "{t}");
    assert!(
        structured(&r)["note"]
            .as_str()
            .unwrap()
            .starts_with("1 ignored directories (excluded by the root's .gitignore/.ignore files) are shown but not descended"),
        "{}",
        structured(&r)["note"]
    );
    // Named as the path, it is shown inside.
    let r = tree(&client, json!({"root": "ws", "path": "target", "depth": 1})).await;
    assert_eq!(structured(&r)["tree"], json!(["debug/", "release/"]));
    client.cancel().await.unwrap();
}
