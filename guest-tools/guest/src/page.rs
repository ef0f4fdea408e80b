//! Paging a walk: a result cut short carries a cursor, and a call that
//! passes it back goes on from there.
//!
//! The walk's order is fixed (breadth-first, sorted per directory: see
//! [`crate::walk`]), so a position in it says where a page ended: the
//! [`Entry::index`] of the first entry not done, and, for a tool that gives
//! several results per entry (the lines a search finds in a file), how many
//! of that entry's results earlier pages gave. The cursor is that position
//! as text, `"1000"` or `"1000+2"`, opaque to the model. A later page walks
//! the tree again and passes the entries before the position without
//! looking at them, pruning as the tool does so the walk takes the same
//! path. Nothing is kept between calls: if the tree changes in between, a
//! page may skip or repeat entries.

use std::fmt;

use crate::ToolError;
use crate::walk::{Entry, Flow};

/// A position in a walk (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Entries of the walk passed before this page.
    pub entry: u64,
    /// Results of the entry at `entry` that earlier pages gave.
    pub taken: u64,
}

impl Cursor {
    /// The `cursor` argument of a call: the start when absent; a text that
    /// no result of a tool gives is refused, naming the rule.
    pub fn parse(text: Option<&str>) -> Result<Cursor, ToolError> {
        let Some(text) = text else {
            return Ok(Cursor::default());
        };
        let number = |s: &str| {
            (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let (entry, taken) = text.split_once('+').unwrap_or((text, "0"));
        match (number(entry), number(taken)) {
            (Some(entry), Some(taken)) => Ok(Cursor { entry, taken }),
            // Not echoed: it may be anything, of any length.
            _ => Err(ToolError::InvalidArguments(
                "'cursor' must be the next_cursor of an earlier result of this tool, \
                 unchanged (like \"1000\" or \"1000+2\")"
                    .into(),
            )),
        }
    }

    /// Where a page that stops at `entry`, having given `taken` of its
    /// results, leaves off.
    pub fn at(entry: &Entry, taken: u64) -> Cursor {
        Cursor {
            entry: entry.index,
            taken,
        }
    }

    /// For an entry an earlier page passed, the walk's way on from it
    /// (pruned when the tool prunes it, `prune`); `None` for an entry of
    /// this page.
    pub fn passed(&self, entry: &Entry, prune: bool) -> Option<Flow> {
        (entry.index < self.entry).then_some(if prune { Flow::Prune } else { Flow::Continue })
    }

    /// Results of `entry` earlier pages gave.
    pub fn taken(&self, entry: &Entry) -> u64 {
        if entry.index == self.entry {
            self.taken
        } else {
            0
        }
    }

    /// The text a result gives, or `None` when a page stopping at `self`
    /// would not have moved past `start`: a cursor never sends a caller
    /// round the same page again.
    pub fn next_after(self, start: Cursor) -> Option<String> {
        (self != start).then(|| self.to_string())
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.taken {
            0 => write!(f, "{}", self.entry),
            n => write!(f, "{}+{n}", self.entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_writes() {
        for cursor in [
            Cursor::default(),
            Cursor {
                entry: 1000,
                taken: 0,
            },
            Cursor { entry: 7, taken: 3 },
            Cursor {
                entry: u64::MAX,
                taken: u64::MAX,
            },
        ] {
            let text = cursor.to_string();
            assert!(
                matches!(Cursor::parse(Some(&text)), Ok(c) if c == cursor),
                "{text}"
            );
        }
        assert!(matches!(Cursor::parse(None), Ok(c) if c == Cursor::default()));
    }

    #[test]
    fn a_malformed_cursor_is_refused_naming_the_rule() {
        for text in [
            "",
            "+",
            "1+",
            "+1",
            "-1",
            "1.5",
            " 1",
            "1 ",
            "1+2+3",
            "x",
            "18446744073709551616",
            "1\n2",
            "\u{202e}1",
        ] {
            match Cursor::parse(Some(text)) {
                Err(ToolError::InvalidArguments(m)) => {
                    assert!(m.starts_with("'cursor' must be the next_cursor"), "{m}");
                    assert!(!m.contains('\n') && !m.contains('\u{202e}'), "{m}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        // Never echoed: the message stays short.
        let long = "9".repeat(1 << 20);
        assert!(matches!(
            Cursor::parse(Some(&long)),
            Err(ToolError::InvalidArguments(m)) if m.len() < 200
        ));
    }

    #[test]
    fn a_cursor_that_does_not_move_is_not_given() {
        let start = Cursor { entry: 5, taken: 1 };
        assert_eq!(start.next_after(start), None);
        let on = Cursor { entry: 5, taken: 2 };
        assert_eq!(on.next_after(start).as_deref(), Some("5+2"));
    }
}
