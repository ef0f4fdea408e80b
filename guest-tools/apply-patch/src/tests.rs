//! `apply_patch`'s unit tests: its descriptor, and patches applied to files.

use loomfs_guest::Tool;
use loomfs_guest::encoding::decode;
use loomfs_guest::tool::describe;
use serde_json::{Value, json};

use super::*;

/// What every client puts in front of its model: the name, the
/// description and the input schema.
#[test]
fn the_model_visible_part_is_small() {
    let d = describe::<ApplyPatch>();
    let schema: Value = serde_json::from_str(&d.input_schema).unwrap();
    let visible = json!({
        "name": d.name,
        "description": d.description,
        "inputSchema": schema,
    })
    .to_string();
    assert!(visible.len() <= 450, "{} bytes: {visible}", visible.len());
    println!("{} bytes: {visible}", visible.len());
}

#[test]
fn the_root_alone_is_resolved_for_deleting() {
    // A patch may delete files: the whole root is resolved for the
    // strongest operation the patch format has.
    let about = ApplyPatch::about();
    assert_eq!(about.permission, Permission::Delete);
    assert_eq!(about.path_arguments.len(), 1);
    let p = &about.path_arguments[0];
    assert_eq!((p.root_field.as_str(), p.path_field.as_str()), ("root", ""));
    assert_eq!(p.permission, Permission::Delete);
}

/// The file's bytes after the patch's one update.
fn patched(bytes: &[u8], patch: &str) -> Result<Vec<u8>, ToolError> {
    let decoded = decode(bytes);
    assert!(decoded.round_trips(bytes).is_ok());
    let before = Text {
        text: decoded.text,
        format: decoded.format,
    };
    let changes = patch::parse(patch).unwrap();
    let Action::Update { hunks, .. } = &changes[0].action else {
        panic!("an update expected");
    };
    updated(&before, hunks, "f.txt").map(|(_, bytes)| bytes)
}

#[test]
fn encodings_boms_and_crlf_are_kept() {
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n-caf\u{e9}\n+th\u{e9}\n*** End Patch";
    // windows-1252, CRLF.
    assert_eq!(
        patched(b"caf\xe9\r\nend\r\n", patch).ok(),
        Some(b"th\xe9\r\nend\r\n".to_vec())
    );
    // UTF-8 with a BOM.
    assert_eq!(
        patched("\u{feff}caf\u{e9}\n".as_bytes(), patch).ok(),
        Some("\u{feff}th\u{e9}\n".as_bytes().to_vec())
    );
    // UTF-16LE with its BOM.
    let utf16 = |s: &str| -> Vec<u8> {
        [0xFF, 0xFE]
            .into_iter()
            .chain(s.encode_utf16().flat_map(u16::to_le_bytes))
            .collect()
    };
    assert_eq!(
        patched(&utf16("caf\u{e9}\r\n"), patch).ok(),
        Some(utf16("th\u{e9}\r\n"))
    );
}

#[test]
fn a_character_the_encoding_cannot_hold_is_refused() {
    let patch =
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-caf\u{e9}\n+caf\u{2603}\n*** End Patch";
    let Err(ToolError::Refused(m)) = patched(b"caf\xe9\n", patch) else {
        panic!("a refusal expected");
    };
    assert!(m.starts_with("'\u{2603}' (U+2603, line 1, column 4) cannot be written in windows-1252, the encoding of 'f.txt'"), "{m}");
}

#[test]
fn a_hunk_that_does_not_apply_refuses_naming_file_and_hunk() {
    let patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
    let Err(ToolError::Refused(m)) = patched(b"a\nx\n", patch) else {
        panic!("a refusal expected");
    };
    assert!(
        m.starts_with(
            "'f.txt': hunk 1 (@@ -1,2 +1,2 @@), at patch line 3: its old lines were not found"
        ),
        "{m}"
    );
    assert!(m.contains("The closest region is lines 1-2"), "{m}");
}

#[test]
fn a_failure_part_way_says_what_was_written() {
    let e = already(
        ToolError::Io("'b': no space left on the disk (ENOSPC)".into()),
        &["deleted 'a' (+0 -3)".into()],
    );
    let ToolError::Io(m) = e else {
        panic!("the same kind expected");
    };
    assert_eq!(
        m,
        "'b': no space left on the disk (ENOSPC)\nThe patch was applied in part: before this, \
             it deleted 'a' (+0 -3). Nothing else was written."
    );
}

#[test]
fn counts_are_lines() {
    assert_eq!(counts("a\nb\nc\n", "a\nB\nc\nd\n"), (2, 1));
    assert_eq!(counts("", "x\n"), (1, 0));
}
