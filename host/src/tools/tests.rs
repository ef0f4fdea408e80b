use super::admit::kept_estimate;
use super::results::{JSON_VALUE_COST, call_error_text, is_tool_name, json_values, to_result};
use super::*;
use crate::policy::{PathArg, Resolved, resolve};
use crate::runtime::{self, CallError, ToolError};
use std::time::Duration;

/// Structured JSON is counted before it is parsed, and a result of many
/// tiny values is refused by what it would take once parsed.
#[test]
fn structured_results_are_charged_per_value() {
    assert_eq!(
        json_values(r#"{"a": [1, 2, {"b": null}], "c": "x"}"#).unwrap(),
        7
    );
    assert_eq!(json_values("0").unwrap(), 1);
    assert!(json_values(&("[".repeat(200) + &"]".repeat(200))).is_err());
    let output = |structured: String| runtime::Output {
        text: vec!["t".into()],
        structured: Some(structured),
        images: vec![],
    };
    let zeros = format!("[{}0]", "0,".repeat(9_999));
    let (r, _) = to_result("t", output(zeros.clone()), 10_000 * JSON_VALUE_COST, true);
    assert_eq!(r.is_error, Some(true));
    let t = r.content[0].as_text().unwrap().text.clone();
    assert!(t.contains("holds 10001 JSON values"), "{t}");
    let (r, _) = to_result("t", output(zeros), 10_001 * JSON_VALUE_COST, true);
    assert_ne!(r.is_error, Some(true));
}

#[test]
fn tool_names_are_snake_case() {
    for good in ["read_file", "a", "text_stats2", &"x".repeat(64)] {
        assert!(is_tool_name(good), "{good}");
    }
    for bad in ["", "Read", "2x", "_x", "a-b", "a b", "é", &"x".repeat(65)] {
        assert!(!is_tool_name(bad), "{bad}");
    }
}

/// What a built-in tool echoes of the model's input (a glob, a regex, a
/// field name) reaches the model neutralised.
#[test]
fn built_in_errors_echo_no_raw_controls() {
    let echoed = call_error_text(
        "search_files",
        CallError::Tool(ToolError::InvalidArguments(
            "invalid range; '\u{202e}' > '\u{1b}'".into(),
        )),
        true,
        false,
    );
    assert!(
        !echoed.contains('\u{202e}') && !echoed.contains('\u{1b}'),
        "{echoed:?}"
    );
    assert!(
        echoed.starts_with("invalid arguments: invalid range"),
        "{echoed:?}"
    );
}

#[test]
fn limit_errors_name_the_limit_and_no_detail() {
    let call_error_text = |tool, e| call_error_text(tool, e, true, false);
    let timeout = call_error_text("t", CallError::Timeout(Duration::from_millis(1500)));
    assert_eq!(
        timeout,
        "the call took longer than 1500 ms and was stopped (tool_timeout_ms); nothing was changed"
    );
    let memory = call_error_text("t", CallError::Memory(64 << 20));
    assert_eq!(
        memory,
        "the call needed more than 64 MiB of memory and was stopped (tool_memory_bytes); \
         nothing was changed"
    );
    assert_eq!(
        call_error_text("t", CallError::OutputTooLarge(1 << 20)),
        "the tool's result would take more than 1048576 bytes of the server's memory and was \
         refused as it was read (max_output_bytes); nothing was changed; ask for less: a range \
         of lines, a narrower search, a smaller depth"
    );
    let crash = call_error_text("t", CallError::Crashed("wasm trap at /home/me/x".into()));
    assert_eq!(
        crash,
        "the tool failed unexpectedly; the server log has details; nothing was changed"
    );
    assert_eq!(
        call_error_text("t", CallError::Cancelled),
        "the call was cancelled; nothing was changed"
    );
    let invalid = call_error_text(
        "t",
        CallError::Tool(ToolError::InvalidArguments("missing field `path`".into())),
    );
    assert_eq!(invalid, "invalid arguments: missing field `path`");
    let long = "é".repeat(3 * ERROR_CLIP);
    let clipped = call_error_text(
        "t",
        CallError::Tool(ToolError::InvalidArguments(long.clone())),
    );
    assert_eq!(
        clipped.len(),
        "invalid arguments: ".len() + ERROR_CLIP + "…".len()
    );
    assert!(clipped.ends_with("é…"));
    // A built-in's refusal shows whole names: never cut.
    let whole = call_error_text("t", CallError::Tool(ToolError::Refused(long.clone())));
    assert_eq!(whole, long);
}

/// A limit a component's entry set lower than the server's is named as
/// the entry's key, so an operator looks in the right place.
#[test]
fn an_entry_s_own_limit_is_named_as_the_entry_s() {
    let entry = |e| call_error_text("t", e, false, true);
    assert_eq!(
        entry(CallError::Timeout(Duration::from_millis(300))),
        "the call took longer than 300 ms and was stopped (timeout_ms of the tool's \
         [[components]] entry); nothing was changed"
    );
    assert!(
        entry(CallError::Memory(16 << 20))
            .ends_with("(memory_bytes of the tool's [[components]] entry); nothing was changed")
    );
    assert!(
        entry(CallError::OutputTooLarge(1 << 20))
            .contains("(max_output_bytes of the tool's [[components]] entry)")
    );
}

#[test]
fn a_third_party_tool_s_words_are_clipped_and_neutralised() {
    let long = "é".repeat(3 * ERROR_CLIP);
    let clipped = call_error_text("t", CallError::Tool(ToolError::Refused(long)), false, false);
    assert_eq!(clipped.len(), ERROR_CLIP + "…".len());
    let hostile = "\u{1b}[2J\u{202e}gnp.exe\nnext";
    let refused = call_error_text(
        "t",
        CallError::Tool(ToolError::NotFound(hostile.into())),
        false,
        false,
    );
    assert_eq!(refused, r"\u001b[2J\u202egnp.exe".to_string() + "\nnext");
    let output = runtime::Output {
        text: vec![hostile.into()],
        structured: Some(r#"{"name": "\u202e"}"#.into()),
        images: vec![],
    };
    let (theirs, _) = to_result("t", output.clone(), u64::MAX, false);
    assert_eq!(theirs.content[0].as_text().unwrap().text, refused);
    // Structured content keeps the exact text.
    assert_eq!(theirs.structured_content.unwrap()["name"], "\u{202e}");
    let (ours, _) = to_result("t", output, u64::MAX, true);
    assert_eq!(ours.content[0].as_text().unwrap().text, hostile);
}

/// What a call would keep: the file where it writes, the tree where it
/// deletes, nothing for a move's source within its root, nothing in a root
/// without a budget; every root it changes named, with 0 if nothing.
#[test]
fn what_a_call_would_keep_is_told_from_its_places() {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::create_dir_all(dir.join("ws/tree/deep")).unwrap();
    std::fs::write(dir.join("ws/a.txt"), [0; 100]).unwrap();
    std::fs::write(dir.join("ws/tree/b"), [0; 20]).unwrap();
    std::fs::write(dir.join("ws/tree/deep/c"), [0; 3]).unwrap();
    let mut ws = crate::policy::Root::workspace_for_tests("ws", &dir.join("ws"));
    ws.trash_max_bytes = 1 << 20;
    let roots = vec![Arc::new(ws)];
    let arg = |path: &str, op, across_roots| PathArg {
        root_field: "root".into(),
        root_fallback: None,
        path_field: path.into(),
        op,
        across_roots,
        optional: false,
    };
    let estimate = |places: &[(&str, Permission, Option<Permission>)]| {
        let paths: Vec<PathArg> = places
            .iter()
            .map(|(path, op, across)| arg(path, *op, *across))
            .collect();
        let resolved: Vec<Resolved> = places
            .iter()
            .map(|(path, op, _)| resolve(&roots, "ws", path, *op).unwrap())
            .collect();
        kept_estimate(&resolved, &paths)
            .into_iter()
            .map(|(root, bytes)| (root.name.clone(), bytes))
            .collect::<Vec<_>>()
    };
    let ws = |bytes: u64| vec![("ws".to_string(), bytes)];
    use Permission::*;
    assert_eq!(estimate(&[("a.txt", Write, None)]), ws(100));
    assert_eq!(estimate(&[("new.txt", Write, None)]), ws(0));
    assert_eq!(estimate(&[("tree", Write, None)]), ws(0));
    assert_eq!(estimate(&[("tree", Delete, None)]), ws(23));
    assert_eq!(estimate(&[("a.txt", Read, None)]), vec![]);
    // A link is deleted itself; written through, its target counts.
    std::os::unix::fs::symlink("tree", dir.join("ws/to-tree")).unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("ws/to-a")).unwrap();
    assert_eq!(estimate(&[("to-tree", Delete, None)]), ws(0));
    assert_eq!(estimate(&[("to-a", Write, None)]), ws(100));
    // A move of a.txt over tree/b: the source leaves, the destination is kept.
    assert_eq!(
        estimate(&[("a.txt", Write, Some(Delete)), ("tree/b", Write, None)]),
        ws(20)
    );
    // A copy over a.txt: its source is only read.
    assert_eq!(
        estimate(&[("tree/b", Read, None), ("a.txt", Write, None)]),
        ws(100)
    );
}
