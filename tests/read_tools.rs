//! End to end: the real binary over stdio with rmcp's client, every read tool
//! on real fixtures, every refusal, and no host path in any response.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// A PNG signature and header: binary (NUL bytes), recognised as an image.
const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// The fixture tree: a `docs` root holding every kind of entry, secrets
/// around and inside it, and a second root.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("docs/README.md", "# Title\n\nHello.\n")
        .write(
            "docs/notes.txt",
            (1..=10).map(|i| format!("line {i}\n")).collect::<String>(),
        )
        .write("docs/sub/deep/a.txt", "deep file\n")
        .write("docs/sub/b.txt", "b\n")
        .write("docs/.env", "CANARY-DOTENV\n")
        .write("docs/sub/.env", "CANARY-SUB-DOTENV\n")
        .write("docs/id_rsa", "CANARY-KEY\n")
        .write("docs/.git/config", "CANARY-GIT\n")
        .write("docs/node_modules/pkg/index.js", "CANARY-NODE\n")
        .write("docs/big.txt", "x".repeat(99).to_string() + "\n")
        .write("docs/image.png", PNG)
        .write("docs/blob.bin", b"\x7fELF\0\0\0\x01binary")
        .write("docs/latin1.txt", b"caf\xe9 au lait\n")
        .write("docs/empty.txt", "")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .write("docs-secrets/key.txt", "CANARY-SIBLING\n")
        .write("other/readme.txt", "other root\n")
        .fifo("docs/pipe")
        .symlink("README.md", "docs/link_in")
        .symlink("../outside/secret.txt", "docs/link_out")
        .symlink(".env", "docs/alias")
        .symlink("../outside", "docs/linkdir")
        .symlink("pipe", "docs/pipe_link");
    // big.txt: 50 lines of 100 bytes = 5000 bytes, over the 4096 cap.
    env.write(
        "docs/big.txt",
        (1..=50)
            .map(|i| format!("{:0>99}\n", i))
            .collect::<String>(),
    );
    let config = env.config(
        r#"
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        max_read_bytes = 4096

        [[roots]]
        name = "other"
        path = "other"
        role = "reference"
        "#,
    );
    (env, config)
}

#[tokio::test]
async fn reference_roots_get_only_read_tools() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let tools = tools(&client).await;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "get_file_info",
            "list_directory",
            "list_roots",
            "read_document",
            "read_file",
            "search_files"
        ]
    );
    for t in &tools {
        let a = t.annotations.as_ref().expect("annotations");
        assert_eq!(a.read_only_hint, Some(true), "{}", t.name);
        assert_eq!(
            (a.destructive_hint, a.idempotent_hint),
            (None, None),
            "{}: hints MCP ignores on a read-only tool",
            t.name
        );
        assert!(t.output_schema.is_some(), "{} has an output schema", t.name);
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")));
        let d = t.description.as_deref().unwrap();
        if t.name != "list_roots" {
            assert_eq!(
                t.input_schema["properties"]["root"],
                json!({"enum": ["docs", "other"]}),
                "{}",
                t.name
            );
        }
        assert!(!d.contains(&*env.dir.to_string_lossy()));
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_roots_shows_names_roles_and_permissions() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&r));
    assert_eq!(
        structured(&r),
        &json!({"roots": [
            {"name": "docs", "role": "reference", "permissions": ["read"]},
            {"name": "other", "role": "reference", "permissions": ["read"]},
        ], "read_only": false})
    );
    assert_no_host_path(&env, &[&r]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_file_whole_by_range_and_tail() {
    let (env, config) = fixture();
    let client = start(&config).await;

    let whole = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "README.md"}),
    )
    .await;
    assert_eq!(whole.content.len(), 1);
    assert_eq!(text(&whole), "# Title\n\nHello.\n");
    let s = structured(&whole);
    assert_eq!(s["content"], "# Title\n\nHello.\n");
    assert_eq!(
        (s["start_line"].clone(), s["end_line"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(s["total_lines"], 3);
    // What is false or unknown is left out.
    assert_eq!(s.get("truncated"), None);
    assert_eq!(s.get("note"), None);

    let range = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "notes.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert_eq!(range.content[0].as_text().unwrap().text, "line 3\nline 4\n");
    let s = structured(&range);
    assert_eq!(
        (s["start_line"].clone(), s["end_line"].clone()),
        (json!(3), json!(4))
    );
    assert!(text(&range).contains("lines 3-4"), "{}", text(&range));

    let tail = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "notes.txt", "tail": 2}),
    )
    .await;
    assert_eq!(tail.content[0].as_text().unwrap().text, "line 9\nline 10\n");
    let s = structured(&tail);
    assert_eq!(
        (
            s["start_line"].clone(),
            s["end_line"].clone(),
            s["total_lines"].clone()
        ),
        (json!(9), json!(10), json!(10))
    );

    let past_end = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "notes.txt", "offset": 50}),
    )
    .await;
    assert_eq!(structured(&past_end)["content"], "");
    assert_eq!(structured(&past_end)["total_lines"], 10);

    let empty = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "empty.txt"}),
    )
    .await;
    assert!(!is_error(&empty));
    assert_eq!(structured(&empty)["content"], "");

    // A symlink that stays inside is followed.
    let link = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "link_in"}),
    )
    .await;
    assert_eq!(text(&link), "# Title\n\nHello.\n");

    // Over the root's read cap: refused whole, fine by range.
    let big = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "big.txt"}),
    )
    .await;
    assert_refused(
        &big,
        "'big.txt' is 4.9 KiB, over this root's read limit of 4.0 KiB",
    );
    let big_range = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "big.txt", "offset": 49}),
    )
    .await;
    assert_eq!(structured(&big_range)["start_line"], 49);
    assert_eq!(structured(&big_range)["end_line"], 50);
    let big_tail = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "big.txt", "tail": 1}),
    )
    .await;
    assert_eq!(
        big_tail.content[0].as_text().unwrap().text,
        format!("{:0>99}\n", 50)
    );
    // A range larger than the cap is cut at whole lines and says so.
    let capped = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "big.txt", "offset": 1, "limit": 50}),
    )
    .await;
    let s = structured(&capped);
    assert_eq!(s["truncated"], true);
    assert_eq!(s["end_line"], 40);
    assert!(text(&capped).contains("cut short at this root's read limit"));

    assert_no_host_path(&env, &[&whole, &range, &tail, &big, &big_range, &capped]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_file_images_binary_and_invalid_utf8() {
    let (env, config) = fixture();
    let client = start(&config).await;

    let image = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "image.png"}),
    )
    .await;
    let img = image
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("image content");
    assert_eq!(img.mime_type, "image/png");
    use base64::Engine as _;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&img.data)
            .unwrap(),
        PNG
    );
    assert_eq!(structured(&image)["mime_type"], "image/png");

    let blob = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "blob.bin"}),
    )
    .await;
    assert_refused(&blob, "'blob.bin' is a binary file");

    let latin1 = call(
        &client,
        "read_file",
        json!({"root": "docs", "path": "latin1.txt"}),
    )
    .await;
    assert!(!is_error(&latin1));
    // Not UTF-8: decoded from the encoding detected, which is named.
    assert_eq!(structured(&latin1)["content"], "café au lait\n");
    assert_eq!(structured(&latin1)["encoding"], "windows-1252");
    assert!(text(&latin1).contains("windows-1252 text, shown decoded"));
    assert_no_host_path(&env, &[&image, &blob, &latin1]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_file_refusals_name_the_rule() {
    let (env, config) = fixture();
    let before = env.snapshot();
    let client = start(&config).await;
    let mut results = Vec::new();
    for (args, needle) in [
        (
            json!({"root": "docs", "path": "../outside/secret.txt"}),
            "refused by rule 'confinement': path escapes the root",
        ),
        (
            json!({"root": "docs", "path": "sub/../../outside/secret.txt"}),
            "path escapes the root",
        ),
        (
            json!({"root": "docs", "path": "../docs-secrets/key.txt"}),
            "path escapes the root",
        ),
        (
            json!({"root": "docs", "path": "link_out"}),
            "path escapes the root",
        ),
        (
            json!({"root": "docs", "path": "linkdir/secret.txt"}),
            "path escapes the root",
        ),
        (
            json!({"root": "docs", "path": ".env"}),
            "refused by rule 'deny': matches deny pattern '.env'",
        ),
        (
            json!({"root": "docs", "path": "sub/.ENV"}),
            "matches deny pattern '.env'",
        ),
        (
            json!({"root": "docs", "path": "alias"}),
            "matches deny pattern '.env'",
        ),
        (
            json!({"root": "docs", "path": "id_rsa"}),
            "matches deny pattern 'id_rsa*'",
        ),
        (
            json!({"root": "docs", "path": ".git/config"}),
            "matches deny pattern '.git'",
        ),
        (
            json!({"root": "docs", "path": "node_modules/pkg/index.js"}),
            "matches deny pattern 'node_modules'",
        ),
        (
            json!({"root": "nope", "path": "a.txt"}),
            "refused by rule 'unknown_root': unknown root 'nope'; roots: docs, other",
        ),
        (
            json!({"root": "docs", "path": "README.md\u{0}/../../x"}),
            "refused by rule 'nul_byte'",
        ),
        (
            json!({"root": "docs", "path": "/etc/passwd"}),
            "refused by rule 'absolute_path'",
        ),
        (
            json!({"root": "docs", "path": "missing.txt"}),
            "'missing.txt' does not exist",
        ),
        (
            json!({"root": "docs", "path": "sub"}),
            "'sub' is a directory",
        ),
        (json!({"root": "docs"}), "invalid arguments: missing 'path'"),
        (
            json!({"root": 7, "path": "a"}),
            "invalid arguments: 'root' must be a string",
        ),
        (
            json!({"root": "docs", "path": "notes.txt", "offset": "x"}),
            "invalid arguments",
        ),
        (
            json!({"root": "docs", "path": "notes.txt", "tail": 2, "limit": 1}),
            "'tail' cannot be combined",
        ),
        (
            json!({"root": "docs", "path": "notes.txt", "offset": 0}),
            "'offset' must be at least 1",
        ),
        (
            json!({"root": "docs", "path": "notes.txt", "colour": "red"}),
            "unknown field `colour`",
        ),
    ] {
        let r = call(&client, "read_file", args.clone()).await;
        assert_refused(&r, needle);
        assert!(!text(&r).contains("CANARY"), "{args}: {}", text(&r));
        results.push(r);
    }
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
    assert_eq!(env.snapshot(), before, "nothing on disk changed");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn special_files_are_refused_without_blocking() {
    let (env, config) = fixture();
    let client = start(&config).await;
    for path in ["pipe", "pipe_link"] {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            call(&client, "read_file", json!({"root": "docs", "path": path})),
        )
        .await
        .expect("a FIFO must never block a read");
        assert_refused(&r, "is a fifo (special file): never opened");
        assert_no_host_path(&env, &[&r]);
    }
    let info = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "pipe"}),
    )
    .await;
    assert_eq!(structured(&info)["type"], "fifo");
    client.cancel().await.unwrap();
}

/// Sets the modification time of `path` to `secs` after the epoch.
fn touch(path: &std::path::Path, secs: u64) {
    let time = std::time::UNIX_EPOCH + Duration::from_secs(secs);
    std::fs::File::open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

#[tokio::test]
async fn list_directory_sorts_by_size_and_by_time_with_totals_and_no_denied_entry() {
    let env = Env::new();
    env.write("ls/small.txt", "s")
        .write("ls/mid.txt", "m".repeat(50))
        .write("ls/large.txt", "l".repeat(300))
        .write("ls/sub/inner.txt", "i".repeat(1000))
        .write("ls/.env", "CANARY".repeat(1000))
        .write("ls/id_rsa.png", "CANARY".repeat(500))
        .write("ls/sub/.env", "CANARY".repeat(900))
        .symlink("large.txt", "ls/link");
    for (path, secs) in [
        ("ls/large.txt", 1_000_000),
        ("ls/sub/inner.txt", 2_000_000),
        ("ls/mid.txt", 3_000_000),
        ("ls/sub", 4_000_000),
        ("ls/small.txt", 5_000_000),
        ("ls/.env", 9_000_000),
        ("ls/sub/.env", 9_000_000),
        ("ls/id_rsa.png", 9_000_000),
    ] {
        touch(&env.path(path), secs);
    }
    let config = env.config(
        r#"
        [[roots]]
        name = "ls"
        path = "ls"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    let paths = |r: &rmcp::model::CallToolResult| -> Vec<String> {
        structured(r)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[0].as_str().unwrap().to_string())
            .collect()
    };
    let by_size = call_ok(
        &client,
        "list_directory",
        json!({"root": "ls", "depth": 2, "sort_by": "size"}),
    )
    .await;
    assert_eq!(
        paths(&by_size),
        [
            "sub/inner.txt",
            "large.txt",
            "mid.txt",
            "small.txt",
            "link",
            "sub/"
        ]
    );
    let totals = json!({"files": 4, "directories": 1, "others": 1, "bytes": 1351});
    assert_eq!(structured(&by_size)["totals"], totals);
    let t = text(&by_size);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "'.': 6 entries, largest first; each line: type (d directory, - file, l symlink), \
         size in bytes (files), modified (UTC), path"
    );
    assert!(
        lines[1].starts_with("- 1000 1970-01-24T03:33:20Z sub/inner.txt"),
        "{t}"
    );
    assert_eq!(
        lines[7],
        "total: 4 files (1351 bytes), 1 directories, 1 other"
    );

    let by_time = call_ok(
        &client,
        "list_directory",
        json!({"root": "ls", "depth": 2, "sort_by": "modified"}),
    )
    .await;
    // The symlink's own time is now: newest.
    assert_eq!(
        paths(&by_time),
        [
            "link",
            "small.txt",
            "sub/",
            "mid.txt",
            "sub/inner.txt",
            "large.txt"
        ]
    );
    assert!(text(&by_time).starts_with("'.': 6 entries, newest first;"));
    assert_eq!(structured(&by_time)["totals"], totals);

    // By name with details: the tree order, and the same totals.
    let by_name = call_ok(
        &client,
        "list_directory",
        json!({"root": "ls", "depth": 2, "details": true, "sort_by": "name"}),
    )
    .await;
    assert_eq!(
        paths(&by_name),
        [
            "large.txt",
            "link",
            "mid.txt",
            "small.txt",
            "sub/",
            "sub/inner.txt"
        ]
    );
    assert_eq!(structured(&by_name)["totals"], totals);
    // The default listing stays lean: no sizes, no totals.
    let lean = call_ok(&client, "list_directory", json!({"root": "ls"})).await;
    assert_eq!(structured(&lean).get("totals"), None);
    assert!(!text(&lean).contains("total:"), "{}", text(&lean));
    assert_clean(&env, &[by_size, by_time, by_name, lean]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_sorted_listing_cut_at_the_entry_limit_says_it_is_sorted_page_by_page() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("many/f{i:02}.txt"), "x".repeat(i));
    }
    let config = many_cut_at_25(&env);
    let client = start(&config).await;
    let r = call(
        &client,
        "list_directory",
        json!({"root": "many", "sort_by": "size"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["truncated"], true);
    assert_eq!(s["entries"][0][0], "f24.txt");
    assert!(
        s["note"]
            .as_str()
            .unwrap()
            .contains("sorted and totalled within this page only"),
        "{s}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_directory_sorts_and_hides_denied_names() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = call_ok(&client, "list_directory", json!({"root": "docs"})).await;
    let s = structured(&r);
    let entries = listing(&r);
    let listed: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.path.as_str(), e.kind.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("README.md", "file"),
            ("alias", "symlink"),
            ("big.txt", "file"),
            ("blob.bin", "file"),
            ("empty.txt", "file"),
            ("image.png", "file"),
            ("latin1.txt", "file"),
            ("link_in", "symlink"),
            ("link_out", "symlink"),
            ("linkdir", "symlink"),
            ("notes.txt", "file"),
            ("pipe", "fifo"),
            ("pipe_link", "symlink"),
            ("sub", "directory"),
        ]
    );
    // Each line of text says the same, the type in its first column (there
    // are symlinks and a FIFO), the path relative to the directory listed.
    let listed_text = text(&r);
    let lines: Vec<&str> = listed_text.lines().collect();
    assert_eq!(
        lines[0],
        "'.': 14 entries; each line: type (d directory, - file, l symlink, p fifo), path"
    );
    assert_eq!(lines[1], "- README.md");
    assert_eq!(lines[2], "l alias");
    assert_eq!(lines[12], "p pipe");
    assert_eq!(lines[14], "d sub/");
    // No size or time unless asked; no flag that is false.
    assert_eq!(s["entries"][0], "README.md");
    assert_eq!(s.get("truncated"), None);
    let detailed = call_ok(
        &client,
        "list_directory",
        json!({"root": "docs", "details": true}),
    )
    .await;
    let d = structured(&detailed);
    assert_eq!(d["entries"][0][0], "README.md");
    assert_eq!(d["entries"][0][1], 16);
    assert!(d["entries"][0][2].as_str().unwrap().ends_with('Z'));
    assert_eq!(d["entries"][13][0], "sub/");
    assert_eq!(d["entries"][13][1], Value::Null, "no size for a directory");
    let readme_line = text(&detailed).lines().nth(1).unwrap().to_string();
    assert!(readme_line.starts_with("- 16 20"), "{readme_line}");
    assert!(readme_line.ends_with("Z README.md"), "{readme_line}");
    assert_eq!(listing(&detailed), entries);
    let t = text(&r);
    for hidden in [".env", "id_rsa", ".git", "node_modules"] {
        assert!(!t.contains(hidden), "{hidden} listed: {t}");
        assert!(!s.to_string().contains(hidden), "{hidden} in structured");
    }

    let deep = call(
        &client,
        "list_directory",
        json!({"root": "docs", "path": "sub", "depth": 3}),
    )
    .await;
    assert_eq!(structured(&deep)["path"], "sub");
    assert_eq!(
        listed_paths(&deep),
        ["b.txt", "deep", "deep/a.txt"],
        "no sub/.env"
    );
    assert_eq!(text(&deep), "'sub': 3 entries\nb.txt\ndeep/\ndeep/a.txt\n");

    let too_deep = call(
        &client,
        "list_directory",
        json!({"root": "docs", "depth": 11}),
    )
    .await;
    assert_refused(&too_deep, "'depth' must be between 1 and 10");
    let file = call(
        &client,
        "list_directory",
        json!({"root": "docs", "path": "README.md"}),
    )
    .await;
    assert_refused(&file, "is not a directory");
    let denied_dir = call(
        &client,
        "list_directory",
        json!({"root": "docs", "path": ".git"}),
    )
    .await;
    assert_refused(&denied_dir, "matches deny pattern '.git'");
    let out = call(
        &client,
        "list_directory",
        json!({"root": "docs", "path": "linkdir"}),
    )
    .await;
    assert_refused(&out, "path escapes the root");
    assert_no_host_path(&env, &[&r, &deep, &too_deep, &file, &denied_dir, &out]);
    client.cancel().await.unwrap();
}

/// A read-only root `many` over `many/`, listings cut at 25 entries.
fn many_cut_at_25(env: &Env) -> std::path::PathBuf {
    env.config(
        "max_list_entries = 25\n[[roots]]\nname = \"many\"\npath = \"many\"\nrole = \"reference\"\n",
    )
}

#[tokio::test]
async fn large_listings_are_truncated_and_say_so() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("many/dir{i:02}/file.txt"), "x");
    }
    let config = many_cut_at_25(&env);
    let client = start(&config).await;
    let r = call(
        &client,
        "list_directory",
        json!({"root": "many", "depth": 2}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["truncated"], true);
    assert_eq!(s["next_cursor"], "25");
    assert_eq!(s["entries"].as_array().unwrap().len(), 25);
    // Breadth first: the 25 kept are all top-level directories.
    assert!(listing(&r).iter().all(|e| e.kind == "directory"));
    assert!(
        s["note"]
            .as_str()
            .unwrap()
            .contains("listing cut at 25 entries")
    );
    assert!(
        text(&r).contains("listing cut at 25 entries (nearest levels first); for the next ones call again with cursor: \"25\""),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cut_listing_pages_with_a_cursor_to_the_whole_set() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("many/dir{i:02}/file{i}.txt"), "x");
        env.write(&format!("many/dir{i:02}/sub/inner.txt"), "x");
    }
    env.write("many/.gitignore", "dir0*/sub/\n");
    let config = many_cut_at_25(&env);
    let client = start(&config).await;
    // 1 + 30 directories + 30 files + 30 subdirectories (10 ignored, not
    // listed inside) + 20 inner files = 111 entries, in 5 pages of 25.
    for details in [false, true] {
        let args = json!({"root": "many", "depth": 3, "details": details});
        let (pages, n) = all_pages(&client, "list_directory", args.clone()).await;
        assert_eq!(n, 5, "{details}");
        let mut paged: Vec<Listed> = pages.iter().flat_map(listing).collect();
        let count = paged.len();
        paged.sort();
        paged.dedup();
        assert_eq!(paged.len(), count, "no entry twice");
        // The whole set, as one call with room for it lists it.
        let mut whole = Vec::new();
        for i in 0..30 {
            let ignored = i < 10;
            whole.push(Listed {
                path: format!("dir{i:02}"),
                kind: "directory".into(),
                ignored: false,
            });
            whole.push(Listed {
                path: format!("dir{i:02}/file{i}.txt"),
                kind: "file".into(),
                ignored: false,
            });
            whole.push(Listed {
                path: format!("dir{i:02}/sub"),
                kind: "directory".into(),
                ignored,
            });
            if !ignored {
                whole.push(Listed {
                    path: format!("dir{i:02}/sub/inner.txt"),
                    kind: "file".into(),
                    ignored: false,
                });
            }
        }
        whole.push(Listed {
            path: ".gitignore".into(),
            kind: "file".into(),
            ignored: false,
        });
        whole.sort();
        assert_eq!(paged, whole, "{details}");
        // A later page's text says where it starts; a cut one, first thing,
        // that its count is not the directory's; the last one is not cut.
        let cut = ", cut: the cursor in the note below gives the next ones";
        let header = |page: &rmcp::model::CallToolResult| {
            text(page).lines().next().unwrap_or_default().to_string()
        };
        assert!(
            header(&pages[0]).starts_with(&format!("'.': 25 entries{cut}")),
            "{}",
            text(&pages[0])
        );
        assert!(
            header(&pages[1]).starts_with(&format!("'.': 25 entries from cursor \"25\"{cut}")),
            "{}",
            text(&pages[1])
        );
        let last = pages.last().unwrap();
        assert!(!header(last).contains(cut), "{}", text(last));
    }

    // A cursor past the end gives an empty page that says so, no cursor.
    let past = call_ok(
        &client,
        "list_directory",
        json!({"root": "many", "cursor": "1000"}),
    )
    .await;
    assert_eq!(text(&past), "'.': no entries from cursor \"1000\"");
    assert_eq!(structured(&past), &json!({"path": ".", "entries": []}));

    // A malformed cursor is refused, naming the rule; the name it echoes is
    // shown by the naming rule.
    for bad in [
        "x",
        "-1",
        "25+",
        "1.5",
        "25 ",
        "\u{202e}25",
        "99999999999999999999999",
    ] {
        for (tool, args) in [
            ("list_directory", json!({"root": "many", "cursor": bad})),
            (
                "search_files",
                json!({"root": "many", "pattern": "*", "cursor": bad}),
            ),
        ] {
            let r = call(&client, tool, args).await;
            assert_refused(
                &r,
                "'cursor' must be the next_cursor of an earlier result of this tool",
            );
            assert!(!text(&r).contains('\u{202e}'), "{}", text(&r));
            assert_no_host_path(&env, &[&r]);
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_listing_of_1000_files_costs_about_twice_its_names() {
    let env = Env::new();
    let mut names = 0;
    for i in 1..=1000 {
        let name = format!("file_{i}.txt");
        names += name.len();
        env.write(&format!("big/d1000/{name}"), "x");
    }
    let config = env.config("[[roots]]\nname = \"big\"\npath = \"big\"\nrole = \"reference\"\n");
    let client = start(&config).await;
    let r = call_ok(
        &client,
        "list_directory",
        json!({"root": "big", "path": "d1000"}),
    )
    .await;
    assert_eq!(listing(&r).len(), 1000);
    // Each name twice: a text line (the name and an escaped line feed) and
    // a JSON string (the name, quotes and a comma): 5 bytes of format per
    // entry, and a little for the first line and the keys. (Before issue
    // 16 this reply was 168 bytes an entry; the Node server's is 42.)
    let bytes = serde_json::to_string(&r).unwrap().len();
    let bound = 2 * names + 5 * 1000 + 300;
    assert!(bytes <= bound, "{bytes} bytes > {bound}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_file_info_reports_kinds() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let file = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "notes.txt"}),
    )
    .await;
    let s = structured(&file);
    assert_eq!(s["type"], "file");
    assert_eq!(s["size"], 71);
    assert_eq!(s.get("is_symlink"), None, "false: left out");
    assert_eq!(s["links"], 1);
    assert!(s["modified"].as_str().unwrap().ends_with('Z'));
    let dir = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "sub"}),
    )
    .await;
    assert_eq!(structured(&dir)["type"], "directory");
    assert_eq!(structured(&dir)["size"], Value::Null);
    let root = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "."}),
    )
    .await;
    assert_eq!(structured(&root)["type"], "directory");
    assert_eq!(structured(&root)["path"], ".");
    let link = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "link_in"}),
    )
    .await;
    assert_eq!(structured(&link)["type"], "file");
    assert_eq!(structured(&link)["is_symlink"], true);
    let out = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "link_out"}),
    )
    .await;
    assert_refused(&out, "path escapes the root");
    let alias = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "alias"}),
    )
    .await;
    assert_refused(&alias, "matches deny pattern '.env'");
    assert_no_host_path(&env, &[&file, &dir, &root, &link, &out, &alias]);
    client.cancel().await.unwrap();
}

/// `hash: true`: the SHA-256 of the whole file, past `max_read_bytes`
/// (4 KiB on this root) and across many host reads, through the policing
/// filesystem: a symlink inside is hashed as its target, a denied name is
/// refused by the deny list, a directory or a FIFO by the tool, and a file
/// too large to hash in the call's time is refused saying so.
#[tokio::test]
async fn get_file_info_hashes_a_whole_file_when_asked() {
    use sha2::{Digest, Sha256};
    let (env, config) = fixture();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    env.write("docs/big.bin", &big);
    let hex = |bytes: &[u8]| -> String {
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let client = start(&config).await;
    let info = |path: &str| {
        call(
            &client,
            "get_file_info",
            json!({"root": "docs", "path": path, "hash": true}),
        )
    };
    let r = info("big.bin").await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(structured(&r)["sha256"], hex(&big));
    assert!(
        text(&r).ends_with(&format!(", sha256 {}", hex(&big))),
        "{}",
        text(&r)
    );
    let r = info("empty.txt").await;
    assert_eq!(structured(&r)["sha256"], hex(b""));
    let r = info("link_in").await;
    assert_eq!(structured(&r)["sha256"], hex(b"# Title\n\nHello.\n"));
    // Not asked: not computed.
    let r = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "big.bin"}),
    )
    .await;
    assert_eq!(structured(&r).get("sha256"), None);
    let dir = info("sub").await;
    assert!(
        is_error(&dir) && text(&dir).contains("'hash' applies to files; 'sub' is a directory"),
        "{}",
        text(&dir)
    );
    let fifo = info("pipe").await;
    assert!(
        is_error(&fifo) && text(&fifo).contains("'hash' applies to files"),
        "{}",
        text(&fifo)
    );
    assert_refused(&info("alias").await, "matches deny pattern '.env'");
    assert_refused(&info(".env").await, "matches deny pattern '.env'");
    assert_refused(&info("link_out").await, "path escapes the root");
    client.cancel().await.unwrap();

    // A call's time bounds the hash: 256 MiB (sparse, read as zeros) in a
    // 200 ms call stops near the limit with an error saying why.
    let huge = env.path("docs/huge.bin");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let short = env.config(
        r#"
        tool_timeout_ms = 200
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let client = start(&short).await;
    let r = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "huge.bin", "hash": true}),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("hashing stopped near the time limit (200 ms)")
            && text(&r).contains("too large to hash in one call"),
        "{}",
        text(&r)
    );
    // The server goes on.
    let r = call(
        &client,
        "get_file_info",
        json!({"root": "docs", "path": "README.md", "hash": true}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_tools_are_protocol_errors() {
    let (_env, config) = fixture();
    let client = start(&config).await;
    let err = try_call(&client, "write_file", serde_json::Map::new())
        .await
        .unwrap_err();
    assert!(
        err.contains("-32602") || err.contains("unknown tool"),
        "{err}"
    );
    // The session goes on.
    let r = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn both_protocol_eras_are_served() {
    let (_env, config) = fixture();
    for lifecycle in [rmcp::service::ClientLifecycleMode::Initialize, discover()] {
        let client = start_with(&config, &[], lifecycle).await;
        let names: Vec<String> = tools(&client)
            .await
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert!(names.contains(&"read_file".to_string()));
        let r = call(
            &client,
            "read_file",
            json!({"root": "other", "path": "readme.txt"}),
        )
        .await;
        assert_eq!(text(&r), "other root\n");
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn concurrent_calls_are_all_served() {
    let (_env, config) = fixture();
    let client = std::sync::Arc::new(start(&config).await);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let path = if i % 2 == 0 { "README.md" } else { "notes.txt" };
            let r = call(&client, "read_file", json!({"root": "docs", "path": path})).await;
            assert!(!is_error(&r));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A denied name meets its rule however it is spelled: in another case, in
/// NFD (as macOS writes names) where the pattern was typed in NFC, and the
/// other way round, requested or reached through a symlink, in a read, a
/// listing, a tree, a search and a batch; macOS's `.DS_Store` and `._*`
/// files are denied built in.
#[tokio::test]
async fn a_denied_name_spelled_in_nfd_or_another_case_meets_the_same_rule() {
    let env = Env::new();
    env.write("docs/ok.txt", "TOKEN ok\n")
        .write(
            "docs/cafe\u{301}-secrets/plan.txt",
            "TOKEN CANARY-NFD-DIR\n",
        )
        .write("docs/CAFÉ-SECRETS.txt", "TOKEN CANARY-UPPER\n")
        .write("docs/Geheimnis-\u{c4}.txt", "TOKEN CANARY-NFC\n")
        .write("docs/.DS_Store", "TOKEN CANARY-DSSTORE\n")
        .write("docs/sub/._ok.txt", "TOKEN CANARY-APPLEDOUBLE\n")
        .symlink("cafe\u{301}-secrets/plan.txt", "docs/alias.txt");
    let config = env.config(
        "[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         deny = [\"café-secrets*\", \"geheimnis-a\u{308}*\"]\n",
    );
    let before = env.snapshot();
    let client = start(&config).await;
    for (path, pattern) in [
        ("cafe\u{301}-secrets/plan.txt", "café-secrets*"),
        ("café-secrets/plan.txt", "café-secrets*"),
        ("CAFÉ-SECRETS.txt", "café-secrets*"),
        ("alias.txt", "café-secrets*"),
        ("Geheimnis-\u{c4}.txt", "geheimnis-a\u{308}*"),
        ("geheimnis-a\u{308}.txt", "geheimnis-a\u{308}*"),
        (".DS_Store", ".DS_Store"),
        ("sub/._ok.txt", "._*"),
    ] {
        let r = call(&client, "read_file", json!({"root": "docs", "path": path})).await;
        assert_refused(
            &r,
            &format!("refused by rule 'deny': matches deny pattern '{pattern}'"),
        );
        assert!(!text(&r).contains("CANARY"), "{path}: {}", text(&r));
    }
    let shown = [
        call_ok(
            &client,
            "list_directory",
            json!({"root": "docs", "depth": 3}),
        )
        .await,
        call_ok(
            &client,
            "list_directory",
            json!({"root": "docs", "tree": true}),
        )
        .await,
        call_ok(
            &client,
            "search_files",
            json!({"root": "docs", "pattern": "**", "contains": "TOKEN"}),
        )
        .await,
    ];
    for r in &shown {
        let all = format!("{} {}", text(r), structured(r));
        assert!(all.contains("ok.txt"), "{all}");
        for hidden in [
            "secrets",
            "SECRETS",
            "Geheimnis",
            "DS_Store",
            "._ok",
            "CANARY",
        ] {
            assert!(!all.contains(hidden), "{hidden} in {all}");
        }
    }
    let batch = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "paths": ["ok.txt", "café-secrets/plan.txt", ".ds_store"]}),
    )
    .await;
    assert!(!text(&batch).contains("CANARY"), "{}", text(&batch));
    assert_eq!(
        text(&batch).matches("refused by rule 'deny'").count(),
        2,
        "{}",
        text(&batch)
    );
    assert_eq!(env.snapshot(), before);
}
