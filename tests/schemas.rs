//! End to end: every tool's advertised schemas against what it really takes
//! and gives. The real binary lists its tools; each one is called with
//! sample arguments (each checked first against the tool's `inputSchema`),
//! and every `structuredContent` it answers is checked against its
//! `outputSchema`, with a JSON Schema validator that knows nothing of how
//! the schemas were made.

mod common;

use std::collections::BTreeSet;

use boon::{Compiler, SchemaIndex, Schemas};
use common::*;
use serde_json::{Value, json};

/// A PNG signature and header: read back as image content.
const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// A document real producers made (tests/fixtures/documents).
fn fixture(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/documents");
    std::fs::read(dir.join(name)).unwrap()
}

/// Successful calls, in order (later ones use what earlier ones made),
/// covering every tool and the optional arguments that change the shape
/// of a result.
fn calls() -> Vec<(&'static str, Value)> {
    vec![
        ("list_roots", json!({})),
        ("read_file", json!({"root": "docs", "path": "notes.txt"})),
        (
            "read_file",
            json!({"root": "docs", "path": "notes.txt", "offset": 2, "limit": 2}),
        ),
        (
            "read_file",
            json!({"root": "docs", "path": "notes.txt", "tail": 1}),
        ),
        ("read_file", json!({"root": "docs", "path": "image.png"})),
        (
            "read_file",
            json!({"root": "docs", "paths": ["notes.txt", "missing.txt", ".env"]}),
        ),
        ("read_file", json!({"root": "docs", "path": "image.png"})),
        (
            "read_file",
            json!({"root": "docs", "paths": ["notes.txt"], "offset": 2, "limit": 1}),
        ),
        ("list_directory", json!({"root": "docs"})),
        (
            "list_directory",
            json!({"root": "ws", "path": ".", "depth": 3, "ignored": "include"}),
        ),
        (
            "list_directory",
            json!({"root": "ws", "path": ".", "depth": 3, "ignored": "include",
                   "details": true, "cursor": "1"}),
        ),
        ("list_directory", json!({"root": "docs", "tree": true})),
        (
            "list_directory",
            json!({"root": "ws", "path": ".", "depth": 2, "exclude": ["*.txt"], "tree": true}),
        ),
        (
            "list_directory",
            json!({"root": "ws", "depth": 2, "sort_by": "size"}),
        ),
        (
            "get_file_info",
            json!({"root": "docs", "path": "notes.txt"}),
        ),
        ("get_file_info", json!({"root": "docs", "path": "."})),
        (
            "read_document",
            json!({"root": "docs", "path": "sheet.ods"}),
        ),
        (
            "read_document",
            json!({"root": "docs", "path": "report.docx", "offset": 2, "limit": 2}),
        ),
        (
            "read_document",
            json!({"root": "docs", "path": "sheet.ods", "tail": 1}),
        ),
        ("search_files", json!({"root": "ws", "pattern": "*.txt"})),
        (
            "search_files",
            json!({"root": "ws", "pattern": "*", "max_results": 1, "cursor": "1"}),
        ),
        (
            "search_files",
            json!({"root": "docs", "pattern": "**/*", "path": ".", "contains": "^line [12]$",
                   "regex": true, "max_results": 5, "ignored": "include"}),
        ),
        (
            "search_files",
            json!({"root": "docs", "pattern": "*", "contains": "Variety", "context": 1,
                   "documents": true}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new/a.txt", "content": "one\ntwo\n"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new/a.txt", "content": "three\n", "mode": "append"}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "new/a.txt",
                   "edits": [{"old_text": "two", "new_text": "2"}], "dry_run": true}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "new/a.txt",
                   "edits": [{"old_text": "two", "new_text": "2"}]}),
        ),
        (
            "apply_patch",
            json!({"root": "ws", "dry_run": true, "patch": "*** Begin Patch\n\
                   *** Update File: new/a.txt\n@@\n one\n-2\n+two\n\
                   *** Add File: patched/b.txt\n+b\n*** End Patch\n"}),
        ),
        (
            "apply_patch",
            json!({"root": "ws", "patch": "--- a/new/a.txt\n+++ b/new/a.txt\n\
                   @@ -1,2 +1,2 @@\n one\n-2\n+two\n\
                   --- /dev/null\n+++ b/patched/b.txt\n@@ -0,0 +1 @@\n+b\n"}),
        ),
        (
            "create_directory",
            json!({"root": "ws", "path": "made/deep"}),
        ),
        (
            "copy_file",
            json!({"root": "docs", "source": "notes.txt", "destination": "copied.txt",
                   "destination_root": "ws"}),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "new", "destination": "new-copy"}),
        ),
        (
            "move_file",
            json!({"root": "ws", "source": "copied.txt", "destination": "new/a.txt",
                   "overwrite": true}),
        ),
        ("delete_file", json!({"root": "ws", "path": "new-copy"})),
        // `docs` is a repository (see the test).
        ("git", json!({"command": "log", "root": "docs"})),
        (
            "git",
            json!({"command": "log", "root": "docs", "path": "notes.txt", "rev": "HEAD", "max_count": 5,
                   "since": "2020-01-01", "author": "Ada", "grep": "first"}),
        ),
        (
            "git",
            json!({"command": "show", "root": "docs", "rev": "HEAD"}),
        ),
        (
            "git",
            json!({"command": "show", "root": "docs", "rev": "HEAD", "path": "notes.txt", "offset": 2, "limit": 2}),
        ),
        (
            "git",
            json!({"command": "diff", "root": "docs", "rev": "HEAD"}),
        ),
        (
            "git",
            json!({"command": "diff", "root": "docs", "rev": "HEAD", "to": "HEAD", "path": "."}),
        ),
        (
            "git",
            json!({"command": "blame", "root": "docs", "path": "notes.txt", "rev": "HEAD", "offset": 1, "limit": 2}),
        ),
        ("git", json!({"command": "status", "root": "docs"})),
    ]
}

/// A tool's two schemas, compiled (each checked against its meta-schema).
struct Checked {
    schemas: Schemas,
    input: SchemaIndex,
    output: Option<SchemaIndex>,
}

fn compile(tool: &rmcp::model::Tool) -> Checked {
    let mut schemas = Schemas::new();
    let mut compiler = Compiler::new();
    let mut add = |part: &str, schema: Value| {
        let url = format!("urn:loomfs:{}:{part}", tool.name);
        compiler.add_resource(&url, schema).unwrap();
        compiler
            .compile(&url, &mut schemas)
            .unwrap_or_else(|e| panic!("{}: {part} schema: {e:#}", tool.name))
    };
    let input = add("input", Value::Object((*tool.input_schema).clone()));
    let output = tool
        .output_schema
        .as_ref()
        .map(|s| add("output", Value::Object((**s).clone())));
    Checked {
        schemas,
        input,
        output,
    }
}

#[tokio::test]
async fn every_tool_takes_and_gives_what_its_schemas_say() {
    let env = Env::new();
    env.write(
        "docs/notes.txt",
        (1..=4).map(|i| format!("line {i}\n")).collect::<String>(),
    )
    .write("docs/image.png", PNG)
    .write("docs/sheet.ods", fixture("sheet.ods"))
    .write("docs/report.docx", fixture("report.docx"))
    .write("ws/.gitignore", "build/\n")
    .write("ws/build/out.txt", "built\n")
    .write("ws/a.txt", "a\n")
    .symlink("a.txt", "ws/link");
    let docs = env.path("docs");
    git(&docs, &["init", "-q", "-b", "main"]);
    git(&docs, &["add", "-A"]);
    git(&docs, &["commit", "-q", "-m", "first"]);
    let client = start(&env.config(WS_AND_DOCS)).await;

    let listed = tools(&client).await;
    let mut called = BTreeSet::new();
    for (name, args) in calls() {
        let tool = listed
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is not listed"));
        let checked = compile(tool);
        if let Err(e) = checked.schemas.validate(&args, checked.input) {
            panic!("{name}: {args} is refused by its input schema: {e}");
        }
        let result = call(&client, name, args.clone()).await;
        assert!(!is_error(&result), "{name} {args}: {}", text(&result));
        let output = checked.output.expect("every tool has an output schema");
        let structured = structured(&result);
        if let Err(e) = checked.schemas.validate(structured, output) {
            panic!(
                "{name} {args}: its structuredContent {structured} is refused by its output schema: {e}"
            );
        }
        called.insert(name);
    }
    let all: BTreeSet<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(called, all, "every listed tool is called");
}

#[tokio::test]
async fn an_unknown_argument_is_refused_by_schema_and_tool() {
    let env = Env::new();
    env.write("docs/notes.txt", "a\n").mkdir("ws");
    let client = start(&env.config(WS_AND_DOCS)).await;
    let listed = tools(&client).await;
    let tool = listed.iter().find(|t| t.name == "read_file").unwrap();
    let checked = compile(tool);
    let args = json!({"root": "docs", "path": "notes.txt", "offest": 2});
    assert!(checked.schemas.validate(&args, checked.input).is_err());
    assert_refused(
        &call(&client, "read_file", args).await,
        "unknown field `offest`",
    );
}

/// What clients hand the model of a tool: its name, description and input
/// schema, as compact JSON.
fn model_visible(tool: &rmcp::model::Tool) -> usize {
    json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    })
    .to_string()
    .len()
}

/// Roots and paths named as models get them wrong: each tool's root field
/// lists its roots, each path is said to be relative to one, line ranges
/// are said to be 1-based, `contains` to search contents, `old_text` to
/// match exactly once. And the whole surface stays within the reference
/// server's (docs/tools.md, "The tool surface").
#[tokio::test]
async fn each_tool_says_what_models_get_wrong_within_the_budget() {
    let env = Env::new();
    env.write("docs/notes.txt", "a\n").write("ws/a.txt", "a\n");
    let ws = env.path("ws");
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    let client = start(&env.config(WS_AND_DOCS)).await;
    let listed = tools(&client).await;
    let described = |t: &rmcp::model::Tool, field: &str| {
        t.input_schema["properties"][field]["description"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
    };
    let find = |name: &str| {
        listed
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is listed"))
    };
    let path_fields = ["path", "paths", "source", "destination"];
    for tool in listed.iter().filter(|t| t.name != "list_roots") {
        let properties = tool.input_schema["properties"].as_object().unwrap();
        let roots = &properties["root"]["enum"];
        assert!(
            roots == &json!(["ws", "docs"]) || roots == &json!(["ws"]),
            "{}: root {roots}",
            tool.name
        );
        for field in path_fields.iter().filter(|f| properties.contains_key(**f)) {
            assert!(
                described(tool, field).contains("relative to"),
                "{}: '{field}' does not say what it is relative to",
                tool.name
            );
        }
        if properties.contains_key("offset") {
            assert!(
                described(tool, "offset").contains("1-based"),
                "{}: offset",
                tool.name
            );
        }
    }
    let search = find("search_files");
    assert!(described(search, "contains").contains("contents"));
    let edit = find("edit_file");
    assert!(
        edit.description
            .as_deref()
            .unwrap()
            .contains("must match exactly once")
    );
    let list_roots = find("list_roots").description.as_deref().unwrap();
    assert!(list_roots.contains("a path relative to it"), "{list_roots}");

    // The budget: the 2026.8.31 reference server's 7,972 model-visible
    // bytes, and the whole tools/list at most twice its visible part.
    let visible: usize = listed.iter().map(model_visible).sum();
    let whole = serde_json::to_string(&json!({ "tools": listed }))
        .unwrap()
        .len();
    assert!(visible <= 7_972, "{visible} model-visible bytes");
    assert!(
        whole <= 2 * visible,
        "{whole} bytes against {visible} visible"
    );
}
