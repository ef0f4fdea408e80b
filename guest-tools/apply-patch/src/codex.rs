//! The patch format Codex-trained models write (OpenAI's
//! `codex-rs/apply-patch`, whose grammar and leniencies this follows):
//!
//! ```text
//! *** Begin Patch
//! *** Add File: PATH          then its lines, each starting with '+'
//! *** Delete File: PATH
//! *** Update File: PATH
//! *** Move to: NEWPATH        optional
//! @@ TEXT                     optional TEXT: a line the hunk is below
//!  context / -removed / +added lines
//! *** End of File             optional: the hunk ends the file
//! *** End Patch
//! ```
//!
//! Lenient as Codex is: blank lines around the patch and between hunks,
//! whitespace around the markers, no line break after `*** End Patch`, a
//! shell heredoc (`<<'EOF'` ... `EOF`) around it, `@@` alone, a first hunk
//! with no `@@` line, an empty line in a hunk taken as an empty context
//! line. Beyond Codex: several `@@ TEXT` lines in a row narrow in turn (its
//! instructions show them; its parser refuses them), a unified `@@ -l,s
//! +l,s @@` header is a bare `@@` whose line is a hint, an empty line
//! inside an added file is an empty line of it, and an Update with a `Move
//! to` and no hunk moves the file as it is. A patch without its `*** End
//! Patch` line is refused, as Codex refuses it: it may have been cut short.

use crate::patch::{
    Action, BEGIN, FileChange, Hunk, Line, ParseError, cut, error, heredoc, relative,
};
use crate::unified::hunk_numbers;
use loomfs_guest::shown;

const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

const HEADERS: &str = "'*** Add File: PATH', '*** Delete File: PATH', '*** Update File: PATH' \
    or '*** End Patch'";

/// The file changes of a Codex patch (see the module).
pub fn parse(all: &[Line]) -> Result<Vec<FileChange>, ParseError> {
    let mut lines: Vec<Line> = trimmed(all).to_vec();
    if lines.len() >= 4
        && heredoc(lines[0].text)
        && lines[lines.len() - 1].text.trim_end().ends_with("EOF")
    {
        lines = trimmed(&lines[1..lines.len() - 1]).to_vec();
    }
    let last = lines.last().map_or(1, |l| l.n);
    if lines.first().is_none_or(|l| l.text.trim() != BEGIN) {
        return Err(error(1, format!("the first line must be '{BEGIN}'")));
    }
    if lines.len() < 2 || lines[lines.len() - 1].text.trim() != END {
        return Err(error(
            last,
            format!(
                "the patch ends without '{END}'; a patch cut short is never applied, so send it \
                 whole"
            ),
        ));
    }
    let body = &lines[1..lines.len() - 1];
    let mut changes = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let text = line.text.trim();
        if text.is_empty() {
            i += 1;
        } else if let Some(path) = text.strip_prefix(ADD) {
            let path = relative(path, line.n)?;
            let (content, next) = added(body, i + 1, &path)?;
            changes.push(FileChange {
                path,
                line: line.n,
                action: Action::Add { content },
            });
            i = next;
        } else if let Some(path) = text.strip_prefix(DELETE) {
            changes.push(FileChange {
                path: relative(path, line.n)?,
                line: line.n,
                action: Action::Delete { hunks: Vec::new() },
            });
            i += 1;
        } else if let Some(path) = text.strip_prefix(UPDATE) {
            let path = relative(path, line.n)?;
            let (action, next) = updated(body, i + 1, &path, line.n)?;
            changes.push(FileChange {
                path,
                line: line.n,
                action,
            });
            i = next;
        } else {
            let found = if text == END {
                format!("'{END}' before the patch's end")
            } else {
                format!("'{}'", shown(cut(line.text)))
            };
            return Err(error(line.n, format!("{found}: expected {HEADERS}")));
        }
    }
    Ok(changes)
}

/// `lines` without blank lines at either end.
fn trimmed<'a, 'b>(lines: &'b [Line<'a>]) -> &'b [Line<'a>] {
    let blank = |l: &Line| l.text.trim().is_empty();
    let start = lines.iter().position(|l| !blank(l)).unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !blank(l))
        .map_or(start, |e| e + 1);
    &lines[start..end]
}

/// An added file's content, from the `+` lines at `from`, and where the
/// next header is. Its line breaks are CRLF if every one of its lines
/// carried CRLF, else LF.
fn added(body: &[Line], from: usize, path: &str) -> Result<(String, usize), ParseError> {
    let mut content: Vec<(&str, bool)> = Vec::new();
    let mut i = from;
    while i < body.len() {
        if let Some(text) = body[i].text.strip_prefix('+') {
            content.push((text, body[i].cr));
            i += 1;
            continue;
        }
        // Blank lines among its '+' lines are empty lines of the file (a
        // model may drop the '+' of an empty line); after its last, they
        // are only space before the next header.
        let blanks = body[i..]
            .iter()
            .take_while(|l| l.text.trim().is_empty())
            .count();
        if blanks > 0
            && body
                .get(i + blanks)
                .is_some_and(|l| l.text.starts_with('+'))
        {
            content.extend(body[i..i + blanks].iter().map(|l| ("", l.cr)));
            i += blanks;
            continue;
        }
        let next = i + blanks;
        if let Some(l) = body.get(next)
            && !l.text.trim_start().starts_with("***")
        {
            return Err(error(
                l.n,
                format!(
                    "'{}' in the added file '{}': each of its lines starts with '+'",
                    shown(cut(l.text)),
                    shown(path)
                ),
            ));
        }
        break;
    }
    let crlf = !content.is_empty() && content.iter().all(|(_, cr)| *cr);
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut text = String::new();
    for (line, _) in content {
        text.push_str(line);
        text.push_str(eol);
    }
    Ok((text, i))
}

/// An Update's optional move and its hunks, from `from`, and where the
/// next header is.
fn updated(
    body: &[Line],
    from: usize,
    path: &str,
    header: usize,
) -> Result<(Action, usize), ParseError> {
    let mut i = from;
    let mut move_to = None;
    if let Some(to) = body.get(i).and_then(|l| l.text.trim().strip_prefix(MOVE)) {
        // A move to where it is: an update.
        move_to = Some(relative(to, body[i].n)?).filter(|to| to != path);
        i += 1;
    }
    let mut hunks = Vec::new();
    loop {
        while body.get(i).is_some_and(|l| l.text.trim().is_empty()) {
            i += 1;
        }
        match body.get(i) {
            None => break,
            Some(l) if l.text.trim() == END_OF_FILE => {
                return Err(error(
                    l.n,
                    format!("'{END_OF_FILE}' ends a hunk, and no hunk of '{path}' is open here"),
                ));
            }
            Some(l) if l.text.trim_start().starts_with("***") => break,
            Some(_) => {}
        }
        let (hunk, next) = hunk(body, i, path, hunks.is_empty())?;
        hunks.push(hunk);
        i = next;
    }
    if hunks.is_empty() && move_to.is_none() {
        return Err(error(
            header,
            format!(
                "'{}' has no hunk: after '*** Update File: PATH' come hunks, each starting with \
                 '@@'",
                shown(path)
            ),
        ));
    }
    Ok((Action::Update { move_to, hunks }, i))
}

/// What a line of a hunk is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Context,
    Removed,
    Added,
    /// An empty line (no ' '): context, unless it ends the hunk.
    Blank,
}

/// The hunk at `from` (its `@@` lines, or for the first hunk of a file
/// its first line), and where the next one starts.
fn hunk(body: &[Line], from: usize, path: &str, first: bool) -> Result<(Hunk, usize), ParseError> {
    let mut hunk = Hunk {
        line: body[from].n,
        ..Hunk::default()
    };
    let mut i = from;
    while let Some(at) = body.get(i).and_then(|l| l.text.trim().strip_prefix("@@")) {
        if !hunk.header.is_empty() {
            hunk.header.push(' ');
        }
        hunk.header.push_str(body[i].text.trim());
        match hunk_numbers(body[i].text.trim()) {
            Some((old_start, _)) => hunk.old_start = Some(old_start),
            None if !at.trim().is_empty() => hunk.context.push(at.trim().to_string()),
            None => {}
        }
        i += 1;
    }
    if hunk.header.is_empty() && !first {
        return Err(error(
            body[from].n,
            format!(
                "'{}' in '{}': a hunk line starts with ' ' (context), '-' (removed) or '+' \
                 (added), a new hunk with '@@'",
                shown(cut(body[from].text)),
                shown(path)
            ),
        ));
    }
    let mut lines: Vec<(Kind, &str)> = Vec::new();
    while let Some(l) = body.get(i) {
        if l.text.trim() == END_OF_FILE {
            hunk.end_of_file = true;
            i += 1;
            break;
        }
        let kind = match l.text.chars().next() {
            None => Kind::Blank,
            Some(' ') => Kind::Context,
            Some('-') => Kind::Removed,
            Some('+') => Kind::Added,
            _ => break,
        };
        lines.push((kind, l.text.get(1..).unwrap_or("")));
        i += 1;
    }
    // Empty lines before the next header are space, not context.
    if !hunk.end_of_file {
        while lines.last().is_some_and(|(k, _)| *k == Kind::Blank) {
            lines.pop();
        }
    }
    if lines.is_empty() {
        let at = body.get(i).map_or(hunk.line, |l| l.n);
        return Err(error(
            at,
            format!(
                "the hunk of '{}' at line {} has no line: each starts with ' ' (context), '-' \
                 (removed) or '+' (added)",
                shown(path),
                hunk.line
            ),
        ));
    }
    for (kind, text) in lines {
        if kind != Kind::Added {
            hunk.old.push(text.to_string());
        }
        if kind != Kind::Removed {
            hunk.new.push(text.to_string());
        }
    }
    Ok((hunk, i))
}

#[cfg(test)]
mod tests {
    use crate::patch::{Action, FileChange, Hunk, parse};

    fn update(changes: &[FileChange]) -> (&Option<String>, &[Hunk]) {
        match &changes[0].action {
            Action::Update { move_to, hunks } => (move_to, hunks),
            other => panic!("an update expected, not {other:?}"),
        }
    }

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn add_delete_update_and_move() {
        let changes = parse(
            "*** Begin Patch\n\
             *** Add File: docs/new.md\n\
             +# Title\n\
             +\n\
             +text\n\
             *** Delete File: old.txt\n\
             *** Update File: src/app.py\n\
             *** Move to: src/main.py\n\
             @@ def greet():\n\
             -print(\"Hi\")\n\
             +print(\"Hello\")\n\
             *** End Patch",
        )
        .unwrap();
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].path, "docs/new.md");
        assert_eq!(
            changes[0].action,
            Action::Add {
                content: "# Title\n\ntext\n".into()
            }
        );
        assert_eq!(changes[1].path, "old.txt");
        assert_eq!(changes[1].line, 6);
        assert_eq!(changes[1].action, Action::Delete { hunks: vec![] });
        let (move_to, hunks) = update(&changes[2..]);
        assert_eq!(move_to.as_deref(), Some("src/main.py"));
        assert_eq!(
            hunks,
            [Hunk {
                line: 9,
                header: "@@ def greet():".into(),
                context: v(&["def greet():"]),
                old: v(&["print(\"Hi\")"]),
                new: v(&["print(\"Hello\")"]),
                ..Hunk::default()
            }]
        );
    }

    #[test]
    fn several_hunks_end_of_file_and_contexts_in_a_row() {
        let changes = parse(
            "*** Begin Patch\n\
             *** Update File: a.py\n\
             @@\n\
             \x20foo\n\
             -bar\n\
             +BAR\n\
             \n\
             @@ class A\n\
             @@   def f(self):\n\
             -    pass\n\
             +    return 1\n\
             @@\n\
             \x20last\n\
             +after\n\
             *** End of File\n\
             *** End Patch\n",
        )
        .unwrap();
        let (_, hunks) = update(&changes);
        assert_eq!(hunks.len(), 3);
        assert_eq!(
            (hunks[0].old.clone(), hunks[0].new.clone()),
            (v(&["foo", "bar"]), v(&["foo", "BAR"]))
        );
        assert_eq!(hunks[1].context, v(&["class A", "def f(self):"]));
        assert_eq!(hunks[1].header, "@@ class A @@   def f(self):");
        assert_eq!(hunks[1].line, 8);
        assert!(hunks[2].end_of_file && !hunks[1].end_of_file);
        assert_eq!(hunks[2].new, v(&["last", "after"]));
    }

    #[test]
    fn codex_leniencies() {
        // Padding, no final break, a heredoc, a first hunk without '@@',
        // an empty line as an empty context line, CRLF lines.
        let changes = parse(
            "\n<<'EOF'\r\n  *** Begin Patch  \r\n*** Update File: a.txt\r\n x\r\n\r\n-y\r\n+z\r\n\
             *** End Patch \r\nEOF",
        )
        .unwrap();
        let (_, hunks) = update(&changes);
        assert_eq!(hunks[0].header, "");
        assert_eq!(hunks[0].old, v(&["x", "", "y"]));
        assert_eq!(hunks[0].new, v(&["x", "", "z"]));
        // A unified header in a Codex patch: a bare '@@' with a hint.
        let changes = parse(
            "*** Begin Patch\n*** Update File: a.txt\n@@ -12,2 +12,2 @@\n a\n-b\n+c\n*** End Patch",
        )
        .unwrap();
        let (_, hunks) = update(&changes);
        assert_eq!((hunks[0].old_start, hunks[0].context.len()), (Some(12), 0));
        // A move alone.
        let changes =
            parse("*** Begin Patch\n*** Update File: a\n*** Move to: b/a\n*** End Patch").unwrap();
        assert_eq!(update(&changes), (&Some("b/a".into()), &[][..]));
        // A move to where it is: an update.
        let changes = parse(
            "*** Begin Patch\n*** Update File: a\n*** Move to: ./a\n@@\n-x\n+y\n*** End Patch",
        )
        .unwrap();
        assert_eq!(update(&changes).0, &None);
    }

    #[test]
    fn crlf_lines_make_a_crlf_file() {
        let changes =
            parse("*** Begin Patch\r\n*** Add File: a.txt\r\n+one\r\n+two\r\n*** End Patch\r\n")
                .unwrap();
        assert_eq!(
            changes[0].action,
            Action::Add {
                content: "one\r\ntwo\r\n".into()
            }
        );
    }

    #[test]
    fn malformed_patches_name_their_line() {
        let cases = [
            (
                "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\ntrailing",
                5,
                "the patch ends without '*** End Patch'",
            ),
            (
                "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n*** Add File: b\n+y",
                6,
                "the patch ends without '*** End Patch'",
            ),
            (
                "*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch",
                4,
                "'y' in the added file 'a': each of its lines starts with '+'",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*** End Patch",
                2,
                "'a' has no hunk",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\nstray\n*** End Patch",
                6,
                "'stray' in 'a': a hunk line starts with ' '",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n@@ f\n*** End Patch",
                3,
                "the hunk of 'a' at line 3 has no line",
            ),
            (
                "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
                2,
                "'*** Frobnicate: a': expected '*** Add File: PATH'",
            ),
            (
                "*** Begin Patch\n*** Add File: /etc/x\n+x\n*** End Patch",
                2,
                "'/etc/x' is absolute",
            ),
        ];
        for (patch, line, start) in cases {
            let e = parse(patch).unwrap_err();
            assert_eq!(e.line, line, "{patch:?}: {e}");
            assert!(e.message.starts_with(start), "{patch:?}: {e}");
        }
    }
}
