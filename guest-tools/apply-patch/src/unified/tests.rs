//! The unified diff parser's unit tests.

use super::*;
use crate::patch::parse;

fn v(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

#[test]
fn a_git_diff_of_several_files() {
    let changes = parse(
        "Fix the greeting\n\
             \n\
             diff --git a/src/app.py b/src/app.py\n\
             index 83db48f..bf269f4 100644\n\
             --- a/src/app.py\n\
             +++ b/src/app.py\n\
             @@ -1,3 +1,3 @@ def greet():\n\
             \x20def greet():\n\
             -    print(\"Hi\")\n\
             +    print(\"Hello\")\n\
             \x20    return\n\
             @@ -10,2 +10,3 @@\n\
             \x20x = 1\n\
             +y = 2\n\
             \x20z = 3\n\
             diff --git a/new.txt b/new.txt\n\
             new file mode 100644\n\
             --- /dev/null\n\
             +++ b/new.txt\n\
             @@ -0,0 +1,2 @@\n\
             +one\n\
             +two\n\
             \\ No newline at end of file\n\
             diff --git a/gone.txt b/gone.txt\n\
             deleted file mode 100644\n\
             --- a/gone.txt\n\
             +++ /dev/null\n\
             @@ -1 +0,0 @@\n\
             -bye\n\
             diff --git a/old name.txt b/new name.txt\n\
             similarity index 100%\n\
             rename from old name.txt\n\
             rename to new name.txt\n\
             diff --git a/empty b/empty\n\
             new file mode 100644\n\
             index 0000000..e69de29\n",
    )
    .unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        ["src/app.py", "new.txt", "gone.txt", "old name.txt", "empty"]
    );
    let Action::Update {
        move_to: None,
        hunks,
    } = &changes[0].action
    else {
        panic!("an update expected");
    };
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].header, "@@ -1,3 +1,3 @@ def greet():");
    assert_eq!(hunks[0].old_start, Some(1));
    assert!(hunks[0].context.is_empty());
    assert_eq!(hunks[1].old, v(&["x = 1", "z = 3"]));
    assert_eq!(hunks[1].new, v(&["x = 1", "y = 2", "z = 3"]));
    assert_eq!(hunks[1].line, 12);
    assert_eq!(
        changes[1].action,
        Action::Add {
            content: "one\ntwo".into()
        }
    );
    let Action::Delete { hunks } = &changes[2].action else {
        panic!("a delete expected");
    };
    assert_eq!(hunks[0].old, v(&["bye"]));
    assert_eq!(
        changes[3].action,
        Action::Update {
            move_to: Some("new name.txt".into()),
            hunks: vec![]
        }
    );
    assert_eq!(
        changes[4].action,
        Action::Add {
            content: String::new()
        }
    );
}

#[test]
fn plain_diff_u_names_and_prefixes() {
    // `diff -u` with times; no prefixes to drop.
    let changes = parse(
        "--- src/a.c\t2024-05-01 10:00:00.000000000 +0200\n\
             +++ src/a.c\t2024-05-02 10:00:00.000000000 +0200\n\
             @@ -1 +1 @@\n\
             -a\n\
             +b\n",
    )
    .unwrap();
    assert_eq!(changes[0].path, "src/a.c");
    // A prefix is dropped only when both sides have theirs.
    let changes = parse("--- a/x\n+++ a/x\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
    assert_eq!(changes[0].path, "a/x");
    // Git's quoting.
    let changes =
            parse("--- \"a/caf\\303\\251 \\\"1\\\".txt\"\n+++ \"b/caf\\303\\251 \\\"1\\\".txt\"\n@@ -1 +1 @@\n-a\n+b\n")
                .unwrap();
    assert_eq!(changes[0].path, "café \"1\".txt");
    assert_eq!(
        git_names("a/x y b/x y"),
        Some(("a/x y".into(), "b/x y".into()))
    );
}

#[test]
fn counts_tell_a_removed_dashes_line_from_a_header() {
    let changes = parse(
        "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+++ new comment\n x\n\
             --- a/r.sql\n+++ b/r.sql\n@@ -1 +1 @@\n-a\n+b\n",
    )
    .unwrap();
    assert_eq!(changes.len(), 2);
    let Action::Update { hunks, .. } = &changes[0].action else {
        panic!("an update expected");
    };
    assert_eq!(hunks[0].old, v(&["-- old comment", "x"]));
    assert_eq!(hunks[0].new, v(&["++ new comment", "x"]));
}

#[test]
fn lenient_hunks_and_crlf() {
    // Wrong counts, '@@' without numbers, an empty line as an empty
    // context line, trailing blank lines, CRLF.
    let changes = parse(
        "--- a/f\r\n+++ b/f\r\n@@ -1,1 +1,1 @@\r\n a\r\n\r\n-b\r\n+c\r\n@@\r\n-d\r\n+e\r\n\r\n\r\n",
    )
    .unwrap();
    let Action::Update { hunks, .. } = &changes[0].action else {
        panic!("an update expected");
    };
    assert_eq!(hunks[0].old, v(&["a", "", "b"]));
    assert_eq!(
        (hunks[1].old_start, hunks[1].new.clone()),
        (None, v(&["e"]))
    );
    let changes = parse("--- /dev/null\r\n+++ b/n\r\n@@ -0,0 +1,2 @@\r\n+x\r\n+y\r\n").unwrap();
    assert_eq!(
        changes[0].action,
        Action::Add {
            content: "x\r\ny\r\n".into()
        }
    );
}

#[test]
fn malformed_diffs_name_their_line() {
    let cases = [
        (
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\nstray text\n",
            6,
            "'stray text' is not part of a unified diff",
        ),
        (
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n",
            3,
            "the hunk '@@ -1 +1 @@' has no line",
        ),
        ("--- a/f\n+++ b/f\n", 1, "'f' has no hunk and no rename"),
        (
            "diff --git a/x b/x\nGIT binary patch\nliteral 5\n",
            2,
            "a binary patch",
        ),
        (
            "--- /dev/null\n+++ b/n\n@@ -1 +1 @@\n-a\n+b\n",
            3,
            "a hunk of a new file (from /dev/null) has old lines",
        ),
        (
            "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n",
            1,
            "'../x' climbs",
        ),
    ];
    for (patch, line, start) in cases {
        let e = parse(patch).unwrap_err();
        assert_eq!(e.line, line, "{patch:?}: {e}");
        assert!(e.message.starts_with(start), "{patch:?}: {e}");
    }
}
