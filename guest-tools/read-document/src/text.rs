//! The text extracted from a document, and the lines of it a call asks for.

use loomfs_guest::ToolError;

/// A document's text: its lines, with the markers of its parts
/// (`--- page 2 ---`), how many parts it has, and what a reader should know
/// (a PDF with no text layer).
pub struct Extracted {
    pub text: String,
    /// What the text is divided into (`page`), none for a word
    /// processor's file, which has no pages until a program lays it out.
    pub unit: Option<&'static str>,
    pub units: u64,
    pub note: Option<String>,
}

impl Extracted {
    /// Text whose parts are `parts`, each under its marker (`--- page N ---`,
    /// or `--- sheet <name> ---` when it has a name).
    pub fn parts(unit: &'static str, parts: Vec<(Option<String>, String)>) -> Extracted {
        let mut text = String::new();
        let units = parts.len() as u64;
        for (i, (name, body)) in parts.into_iter().enumerate() {
            match name {
                Some(name) => text.push_str(&format!("--- {unit} {name} ---\n")),
                None => text.push_str(&format!("--- {unit} {} ---\n", i + 1)),
            }
            let body = body.trim_end_matches(['\n', ' ']);
            if !body.is_empty() {
                text.push_str(body);
                text.push('\n');
            }
        }
        Extracted {
            text,
            unit: Some(unit),
            units,
            note: None,
        }
    }

    /// Text in one piece: a word processor's, or a text file's.
    pub fn whole(text: String) -> Extracted {
        let note = text
            .trim()
            .is_empty()
            .then(|| "it holds no text".to_string());
        Extracted {
            text,
            unit: None,
            units: 0,
            note,
        }
    }
}

/// Which lines of the text a call asks for.
#[derive(Clone, Copy, Debug)]
pub enum Range {
    /// From line `offset` (1-based), at most `limit` lines.
    Lines { offset: u64, limit: Option<u64> },
    /// The last `n` lines.
    Tail(u64),
}

impl Range {
    pub fn new(
        offset: Option<u64>,
        limit: Option<u64>,
        tail: Option<u64>,
    ) -> Result<Range, ToolError> {
        let positive = |name: &str, n: Option<u64>| match n {
            Some(0) => Err(ToolError::InvalidArguments(format!(
                "'{name}' counts lines and must be at least 1"
            ))),
            _ => Ok(()),
        };
        positive("offset", offset)?;
        positive("limit", limit)?;
        positive("tail", tail)?;
        match (offset, limit, tail) {
            (_, _, None) => Ok(Range::Lines {
                offset: offset.unwrap_or(1),
                limit,
            }),
            (None, None, Some(n)) => Ok(Range::Tail(n)),
            _ => Err(ToolError::InvalidArguments(
                "'tail' takes the last lines: give it without 'offset' and 'limit'".into(),
            )),
        }
    }

    /// The lines of `text` asked for, cut to at most `max` bytes at a line
    /// break (a first line longer than that is cut at a character).
    pub fn take(self, text: &str, max: u64) -> Taken {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let total = lines.len() as u64;
        let (first, last) = match self {
            Range::Lines { offset, limit } => {
                let last = limit.map_or(total, |n| offset.saturating_sub(1).saturating_add(n));
                (offset, last.min(total))
            }
            Range::Tail(n) => (total.saturating_sub(n) + 1, total),
        };
        let mut content = String::new();
        let mut end = first.saturating_sub(1);
        let mut truncated = false;
        for line in lines.iter().take(last as usize).skip(end as usize) {
            if (content.len() + line.len()) as u64 > max {
                truncated = true;
                if content.is_empty() {
                    let mut cut = max as usize;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    content.push_str(&line[..cut]);
                    end += 1;
                }
                break;
            }
            content.push_str(line);
            end += 1;
        }
        let start = if end >= first { first } else { 0 };
        Taken {
            content,
            start,
            end: if start == 0 { 0 } else { end },
            total,
            truncated,
        }
    }
}

/// Lines taken from a text.
pub struct Taken {
    pub content: String,
    /// First line given, 1-based; 0 when none.
    pub start: u64,
    /// Last line given; 0 when none.
    pub end: u64,
    pub total: u64,
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "one\ntwo\nthree\nfour\n";

    #[test]
    fn ranges_count_lines_from_one_and_tail_from_the_end() {
        let t = Range::new(Some(2), Some(2), None).unwrap().take(TEXT, 100);
        assert_eq!(
            (t.content.as_str(), t.start, t.end, t.total),
            ("two\nthree\n", 2, 3, 4)
        );
        let t = Range::new(None, None, Some(1)).unwrap().take(TEXT, 100);
        assert_eq!((t.content.as_str(), t.start, t.end), ("four\n", 4, 4));
        let t = Range::new(None, None, Some(9)).unwrap().take(TEXT, 100);
        assert_eq!((t.start, t.end, t.content.len()), (1, 4, TEXT.len()));
        let t = Range::new(Some(9), None, None).unwrap().take(TEXT, 100);
        assert_eq!((t.start, t.end, t.content.as_str()), (0, 0, ""));
    }

    #[test]
    fn the_byte_cap_cuts_at_a_line_break_or_inside_a_long_first_line() {
        let t = Range::new(None, None, None).unwrap().take(TEXT, 9);
        assert_eq!(
            (t.content.as_str(), t.end, t.truncated),
            ("one\ntwo\n", 2, true)
        );
        let t = Range::new(None, None, None).unwrap().take("ééé\n", 3);
        assert_eq!((t.content.as_str(), t.end, t.truncated), ("é", 1, true));
    }

    #[test]
    fn tail_with_offset_and_zero_counts_are_refused() {
        assert!(Range::new(Some(1), None, Some(1)).is_err());
        assert!(Range::new(Some(0), None, None).is_err());
        assert!(Range::new(None, None, Some(0)).is_err());
    }
}
