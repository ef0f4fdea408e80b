//! The result as text for the model.

use loomfs_guest::{human_bytes, shown};

use super::{Args, Found};

/// The result as text for the model: one match per line. Paths and
/// previews are shown by the naming rule: a preview is a line of a file,
/// and a CR or a U+2028 in it would break it into lines that look like
/// matches. The pattern and the needle are echoed by it too.
pub(super) fn render(found: &Found, rel: &str, args: &Args) -> String {
    if found.matches.is_empty() {
        let what = match (&args.contains, args.regex) {
            (Some(c), true) => format!(" matching the regular expression '{}'", shown(c)),
            (Some(c), false) => format!(" containing '{}'", shown(c)),
            (None, _) => String::new(),
        };
        return format!(
            "no file under '{}' matches '{}'{what} ({} files examined, {} scanned)",
            shown(rel),
            shown(&args.pattern),
            found.examined_files,
            human_bytes(found.scanned_bytes)
        );
    }
    let mut out = String::new();
    // With context, as `rg -C` prints it: `path:line: text` for a match,
    // `path-line- text` around it, `--` between ranges that do not touch.
    let with_context = args.context.unwrap_or(0) > 0;
    // The text and line the last match's lines reach.
    let mut shown_up_to: Option<(u64, u64)> = None;
    for m in &found.matches {
        // An archive member as `archive!/member`, as a jar URL names it.
        let path = match &m.member {
            Some(member) => format!("{}!/{}", shown(&m.path), shown(member)),
            None => shown(&m.path).into_owned(),
        };
        match (m.line, &m.preview) {
            (Some(line), Some(preview)) => {
                let first = line - m.before.len() as u64;
                if with_context && shown_up_to.is_some_and(|up| up != (m.text, first - 1)) {
                    out.push_str("--\n");
                }
                for (n, text) in (first..).zip(&m.before) {
                    out.push_str(&format!("{path}-{n}- {}\n", shown(text)));
                }
                let encoding = m.encoding.map_or(String::new(), |e| format!(" ({e})"));
                out.push_str(&format!("{path}:{line}{encoding}: {}\n", shown(preview)));
                for (n, text) in (line + 1..).zip(&m.after) {
                    out.push_str(&format!("{path}-{n}- {}\n", shown(text)));
                }
                shown_up_to = Some((m.text, line + m.after.len() as u64));
            }
            _ => {
                out.push_str(&path);
                out.push('\n');
            }
        }
    }
    out
}
