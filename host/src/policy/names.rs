//! How names, and other text the project does not choose, appear in what
//! the model and an operator read.
//!
//! The rule for a name is [`shown`]: a name holding a control character
//! (C0, DEL, C1), U+2028/U+2029 or a format character (category Cf: bidi
//! controls, zero-width characters, …) is shown as a JSON string literal,
//! `"evil\nfile"`; any other as it is. It lives in the `loomfs-names` crate
//! because the built-in guest tools, which write most of the text, show
//! names by the same rule; this module is the host's one way to it. The
//! host's own messages (refusals, lock waits) show paths through it, the
//! audit log writes the same characters as `\uXXXX` escapes, and `trash
//! list` shows paths by it.
//!
//! Text a third-party component returns is not the project's: its names
//! cannot be found in it, so [`neutralised`] only takes out what would act
//! on a reader (terminal controls, line and paragraph separators, bidi
//! reordering), keeping tabs and line feeds.

use std::borrow::Cow;

pub use loomfs_names::{
    QUOTED_NOTE, is_bidi_control, is_escaped, is_quoted, push_unicode_escape, shown,
};

use super::MAX_PATH_BYTES;

/// How much of a string that cannot be a name is shown (characters).
const CLIP_CHARS: usize = 200;

/// A string the model sent where a root or a path was expected, as a
/// message shows it: by the rule, whole when it could be a path at all
/// (a name is never cut), else its first characters and `…` (no path is
/// longer than [`MAX_PATH_BYTES`], and the model has the rest).
pub fn shown_arg(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_PATH_BYTES {
        shown(s)
    } else {
        Cow::Owned(shown_clipped(s))
    }
}

/// A string the model sent that is not a name (a tool name, a method, an
/// ID): by the rule, at most its first 200 characters, `…` after a cut.
pub fn shown_clipped(s: &str) -> String {
    match s.char_indices().nth(CLIP_CHARS) {
        Some((cut, _)) => format!("{}…", shown(&s[..cut])),
        None => shown(s).into_owned(),
    }
}

/// `message`, with [`QUOTED_NOTE`] on a line of its own when one of the
/// names it shows (`names`, forms [`shown`] returned) is quoted: a text
/// that shows a quoted name says how to act on it.
pub fn with_quoted_note(message: String, names: &[&str]) -> String {
    if names.iter().any(|n| is_quoted(n)) {
        format!("{message}\n{QUOTED_NOTE}")
    } else {
        message
    }
}

/// Whether a third-party text keeps `c` raw: not a control character
/// other than tab and line feed (an ESC starts a terminal sequence; a CR
/// or a C1 control moves or redraws), not a line or paragraph separator,
/// not a bidi control.
fn is_unsafe_in_text(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n')
        || c == '\u{2028}'
        || c == '\u{2029}'
        || is_bidi_control(c)
}

/// Text a third-party component returned, as the client gets it: every
/// character [`is_unsafe_in_text`] written as a `\uXXXX` escape (`ESC [31m`
/// becomes the inert `\u001b[31m`), everything else as it is. Not a name
/// rule: the text is not a name, and is not meant to round-trip.
pub fn neutralised(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_in_text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe_in_text(c) {
            push_unicode_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The classes the rule escapes, from the Unicode data rather than from
    /// the rule's own table: controls, format characters, separators.
    fn in_escaped_class(c: char) -> bool {
        use unicode_general_category::{GeneralCategory as G, get_general_category};
        matches!(
            get_general_category(c),
            G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator
        )
    }

    /// What a model or a client does with a shown form: a quoted one is a
    /// JSON string (read here by serde_json, as any JSON reader would), any
    /// other is the name itself.
    fn read_back(shown: &str) -> String {
        if is_quoted(shown) {
            serde_json::from_str(shown).expect("a quoted form is a JSON string")
        } else {
            shown.to_string()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Arbitrary Unicode: every character class, and names built from
        /// the characters the rule is about (quotes, backslashes, escapes
        /// spelt out, separators, bidi, controls) mixed with any others.
        #[test]
        fn a_shown_name_is_clean_and_reads_back_exactly(
            name in prop_oneof![
                any::<String>(),
                proptest::collection::vec(
                    prop_oneof![
                        any::<char>(),
                        prop::sample::select(vec![
                            '"', '\\', 'u', 'n', '0', '2', 'e', '/', '\n', '\r', '\t',
                            '\u{0}', '\u{1b}', '\u{7f}', '\u{85}', '\u{9b}', '\u{ad}',
                            '\u{61c}', '\u{200b}', '\u{200d}', '\u{200e}', '\u{2028}',
                            '\u{2029}', '\u{202e}', '\u{2066}', '\u{feff}', '\u{e0001}',
                            '\u{e007f}', '\u{1d173}',
                        ]),
                    ],
                    0..24,
                )
                .prop_map(|cs| cs.into_iter().collect::<String>()),
            ]
        ) {
            let s = shown(&name);
            prop_assert!(!s.chars().any(in_escaped_class), "{s}");
            prop_assert_eq!(read_back(&s), name.clone());
            // Never cut: a shown form holds at least the name's characters
            // that are not escaped.
            prop_assert!(
                s.chars().count() >= name.chars().filter(|c| !in_escaped_class(*c)).count()
            );
            // A form shown as it is was no literal to begin with.
            prop_assert_eq!(is_quoted(&s), loomfs_names::needs_quotes(&name));
        }

        #[test]
        fn neutralised_text_keeps_nothing_that_acts_on_a_reader(text in any::<String>()) {
            let n = neutralised(&text);
            prop_assert!(!n.chars().any(is_unsafe_in_text), "{n}");
            // Its lines are the text's own.
            prop_assert_eq!(n.matches('\n').count(), text.matches('\n').count());
        }
    }

    #[test]
    fn the_forged_line_the_bidi_name_and_a_literal_backslash_differ() {
        let forged = "evil\nfile          9 B  2026-01-01T00:00:00Z  fake-entry.txt";
        assert_eq!(
            shown(forged),
            r#""evil\nfile          9 B  2026-01-01T00:00:00Z  fake-entry.txt""#
        );
        assert_eq!(shown("rtl\u{202e}txt.exe"), r#""rtl\u202etxt.exe""#);
        // The same letters with a real backslash: shown as they are, not
        // quoted, so the two never look alike.
        assert_eq!(shown(r"rtl\u202etxt.exe"), r"rtl\u202etxt.exe");
        assert_eq!(read_back(r#""rtl\u202etxt.exe""#), "rtl\u{202e}txt.exe");
    }

    #[test]
    fn arguments_are_shown_whole_unless_no_path_is_that_long() {
        let path = "d/".repeat(MAX_PATH_BYTES / 2) + "x";
        assert_eq!(path.len(), MAX_PATH_BYTES);
        assert_eq!(shown_arg(&path), path);
        let long = format!("{path}\n");
        assert_eq!(shown_arg(&long), format!("{}…", &path[..CLIP_CHARS]));
        assert_eq!(shown_clipped("a\u{202e}b"), r#""a\u202eb""#);
        let many = "\u{1b}".repeat(500);
        let clipped = shown_clipped(&many);
        assert_eq!(clipped, format!("\"{}\"…", r"\u001b".repeat(CLIP_CHARS)));
    }

    #[test]
    fn a_message_showing_a_quoted_name_carries_the_note() {
        let plain = shown("a.txt");
        let quoted = shown("a\nb");
        assert_eq!(with_quoted_note("m".into(), &[&plain]), "m");
        assert_eq!(
            with_quoted_note("m".into(), &[&plain, &quoted]),
            format!("m\n{QUOTED_NOTE}")
        );
    }

    #[test]
    fn third_party_text_keeps_tabs_and_line_feeds_only() {
        assert_eq!(neutralised("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            neutralised("\u{1b}[31mred\u{1b}[0m rtl\u{202e}txt\r\u{2028}\u{9b}2J\u{7f}"),
            r"\u001b[31mred\u001b[0m rtl\u202etxt\u000d\u2028\u009b2J\u007f"
        );
        // Invisible characters that are not bidi controls are left: free
        // text uses them (a zero-width joiner inside an emoji).
        assert_eq!(neutralised("👩\u{200d}💻"), "👩\u{200d}💻");
    }
}
