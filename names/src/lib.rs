//! How a name is shown in text that a model or a person reads.
//!
//! A file name is data chosen by whoever put the file there: a line feed in
//! it would forge a line of a listing, U+202E (right-to-left override) would
//! reorder what a client's UI shows, an escape sequence would drive a
//! terminal. So every text loom-fs writes (listings, search results and
//! their previews, file info, success and error messages, notes) shows a
//! name through [`shown`], the one rule, which the host and the built-in
//! guest tools share through this crate:
//!
//! - A name holding none of the characters of [`is_escaped`] is shown as it
//!   is, backslashes and all: `back\slash.txt`.
//! - Any other name is shown as a **JSON string literal**, in double quotes,
//!   each such character written as a JSON escape: `"evil\nfile"`,
//!   `"rtl\u202etxt.exe"`. A model that writes this literal as the value of
//!   a path argument sends the real name; no server decodes anything.
//! - A name that itself starts and ends with `"` is quoted too
//!   (`"\"quoted\""`), so that a name shown as it is never reads as a JSON
//!   literal: [`is_quoted`] tells the two forms apart, and the rule is
//!   reversible (read a quoted form as JSON, anything else as it is).
//!
//! The rule never cuts a name. It applies to whole root-relative paths too
//! (`"sub/evil\nfile"`), and to a search preview, which is file content
//! shown on one line. Structured results keep the exact names: only text is
//! escaped. Look-alike names (homoglyphs, mixed scripts) are valid names
//! shown as they are: out of scope.

use std::borrow::Cow;

/// Said beside any text that shows a quoted name: how to act on it.
pub const QUOTED_NOTE: &str = "note: a name (or line) shown in double quotes is a JSON string \
     literal: its backslash escapes stand for characters that are never shown raw (line \
     breaks, control, bidi and invisible format characters). To act on such a name, pass the \
     exact `path` from the structured result, or write the literal itself as the JSON value \
     of the path argument (\"a\\nb\" names a, a line feed, b); a name shown without double \
     quotes is exactly as shown.";

/// Whether `c` is never shown raw in a name: control characters (C0, DEL,
/// C1), the line and paragraph separators (U+2028, U+2029), and the format
/// characters (Unicode category Cf), which hold the bidi controls (U+061C,
/// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and the other invisible
/// ones (U+200B–U+200D, U+FEFF, U+00AD, tag characters, …).
pub fn is_escaped(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}' || is_format(c)
}

/// Whether `c` is a bidirectional control: it reorders the text around it.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// Unicode general category Cf (format), Unicode 16.0: 21 ranges, small
/// enough to carry here rather than a table crate in every guest. The test
/// `format_table_is_category_cf` checks it, character by character, against
/// the Unicode data of `unicode-general-category`.
const FORMAT: [(char, char); 21] = [
    ('\u{00ad}', '\u{00ad}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061c}', '\u{061c}'),
    ('\u{06dd}', '\u{06dd}'),
    ('\u{070f}', '\u{070f}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08e2}', '\u{08e2}'),
    ('\u{180e}', '\u{180e}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{fff9}', '\u{fffb}'),
    ('\u{110bd}', '\u{110bd}'),
    ('\u{110cd}', '\u{110cd}'),
    ('\u{13430}', '\u{1343f}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    ('\u{e0001}', '\u{e0001}'),
    ('\u{e0020}', '\u{e007f}'),
];

fn is_format(c: char) -> bool {
    // Most names are ASCII: below U+00AD nothing is a format character.
    c >= '\u{00ad}'
        && FORMAT
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
}

/// Whether `name` must be shown as a JSON literal: it holds a character of
/// [`is_escaped`], or it would read as one (it starts and ends with `"`).
pub fn needs_quotes(name: &str) -> bool {
    // Printable ASCII holds nothing escaped: most names are told by bytes.
    let printable = name.bytes().all(|b| matches!(b, b' '..=b'~'));
    (!printable && name.chars().any(is_escaped)) || looks_quoted(name)
}

/// Whether `shown` (a form [`shown`] returned) is a quoted one, to be read
/// as a JSON string; otherwise it is the name exactly.
pub fn is_quoted(shown: &str) -> bool {
    looks_quoted(shown)
}

fn looks_quoted(s: &str) -> bool {
    s.len() >= 2 && s.starts_with('"') && s.ends_with('"')
}

/// `name` as text shows it: as it is, or as a JSON string literal (see the
/// module). Never cut, never holding a character of [`is_escaped`].
pub fn shown(name: &str) -> Cow<'_, str> {
    if !needs_quotes(name) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if is_escaped(c) => push_unicode_escape(&mut out, c),
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// Writes `c` as a JSON `\uXXXX` escape (lowercase hex; a UTF-16 surrogate
/// pair beyond the BMP, as JSON requires): valid in any JSON string.
pub fn push_unicode_escape(out: &mut String, c: char) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{unit:04x}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `needs_quotes` takes for granted of printable ASCII.
    #[test]
    fn printable_ascii_is_never_escaped() {
        for c in ' '..='~' {
            assert!(!is_escaped(c), "{c:?}");
        }
        for c in ['\u{7f}', '\u{1f}', '\0'] {
            assert!(is_escaped(c) && needs_quotes(&format!("a{c}")), "{c:?}");
        }
    }

    #[test]
    fn plain_names_are_shown_as_they_are() {
        for name in [
            "a.txt",
            "sub/dir/é 日本.md",
            "back\\slash.txt",
            "rtl\\u202etxt.exe",
            "\"half",
            "half\"",
            "\"",
            "it's \"mid\" quoted",
            "",
        ] {
            assert!(
                matches!(shown(name), Cow::Borrowed(n) if n == name),
                "{name}"
            );
            assert!(!is_quoted(&shown(name)), "{name}");
        }
    }

    #[test]
    fn escaped_names_are_json_literals() {
        let cases = [
            ("evil\nfile", r#""evil\nfile""#),
            ("rtl\u{202e}txt.exe", r#""rtl\u202etxt.exe""#),
            ("\u{1b}[31mred", r#""\u001b[31mred""#),
            ("tab\there", r#""tab\there""#),
            ("cr\r\u{8}\u{c}", r#""cr\r\b\f""#),
            ("del\u{7f} c1\u{85}", r#""del\u007f c1\u0085""#),
            ("ls\u{2028}ps\u{2029}", r#""ls\u2028ps\u2029""#),
            ("zw\u{200b}\u{feff}\u{ad}", r#""zw\u200b\ufeff\u00ad""#),
            ("tag\u{e0041}", r#""tag\udb40\udc41""#),
            ("back\\slash\n", r#""back\\slash\n""#),
            ("q\"uote\n", r#""q\"uote\n""#),
            ("\"quoted\"", r#""\"quoted\"""#),
            ("\"\"", r#""\"\"""#),
        ];
        for (name, expected) in cases {
            assert_eq!(shown(name), expected, "{name:?}");
            assert!(is_quoted(&shown(name)), "{name:?}");
        }
    }

    #[test]
    fn no_escaped_character_survives() {
        // Every escaped character, alone and between others.
        let all: Vec<char> = (0..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|&c| is_escaped(c))
            .collect();
        for &c in &all {
            let name = format!("a{c}b");
            let s = shown(&name);
            assert!(!s.chars().any(is_escaped), "{c:?} -> {s}");
            assert!(is_quoted(&s));
        }
        let every: String = all.iter().collect();
        assert!(!shown(&every).chars().any(is_escaped));
    }

    #[test]
    fn bidi_controls_are_format_characters() {
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            if is_bidi_control(c) {
                assert!(is_format(c) && is_escaped(c), "{c:?}");
            }
        }
    }

    #[test]
    fn format_table_is_category_cf() {
        use unicode_general_category::{GeneralCategory, get_general_category};
        assert!(FORMAT.windows(2).all(|w| w[0].1 < w[1].0), "sorted");
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let cf = get_general_category(c) == GeneralCategory::Format;
            assert_eq!(is_format(c), cf, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn separators_and_controls_are_escaped() {
        use unicode_general_category::{GeneralCategory as G, get_general_category};
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let expected = matches!(
                get_general_category(c),
                G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator
            );
            assert_eq!(is_escaped(c), expected, "U+{:04X}", c as u32);
        }
    }
}
