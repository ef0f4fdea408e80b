//! Reading a text file by lines under a byte cap, what `read_file` and
//! `read_multiple_files` share: the lines come back as raw bytes, line
//! endings kept, with the line numbers they span, then decoded
//! ([`Taken::decode`]). The cap counts the file's bytes, never the decoded
//! text's.
//!
//! In every encoding loom-fs reads but UTF-16, a line break is the byte
//! `\n` and no other character holds that byte (double-byte encodings use
//! trail bytes from 0x40 up), so lines are cut on bytes and decoded after.
//! A UTF-16 file is read whole when it fits under the cap, or by its first
//! (a range) or last (a tail) cap's worth of bytes, decoded, then cut into
//! lines ([`utf16_lines`], [`utf16_tail`]).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use crate::encoding::{Format, decode_as, decode_vec};

/// How many leading bytes decide a file's encoding when it is read by
/// range (a whole read looks at all of it).
pub const DETECT_BYTES: usize = 64 * 1024;

/// Lines taken from the file, as raw bytes with their line endings kept.
pub struct Taken {
    pub bytes: Vec<u8>,
    pub start_line: u64,
    pub end_line: u64,
    pub total_lines: Option<u64>,
    /// Set when the byte cap cut the range short.
    pub capped: bool,
    /// Set when the file grew past the cap during a whole read.
    pub grew: bool,
}

/// Lines `offset` (1-based) to `offset + limit - 1` (to the end without
/// `limit`), at most `max` bytes of them: a line that would pass `max` is
/// not taken, and `capped` says so.
pub fn read_lines(file: File, offset: u64, limit: Option<u64>, max: u64) -> io::Result<Taken> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut bytes = Vec::new();
    // Lines consumed so far, skipped or taken.
    let mut number = 0u64;
    let mut end_line = 0u64;
    let mut capped = false;
    let mut at_eof = false;
    loop {
        if limit.is_some_and(|l| number >= offset - 1 + l) {
            at_eof = reader.fill_buf()?.is_empty();
            break;
        }
        if number + 1 < offset {
            // Skipped lines are consumed in buffer-sized pieces, so one huge
            // line before the range costs no memory.
            if skip_line(&mut reader)? == 0 {
                at_eof = true;
                break;
            }
            number += 1;
            continue;
        }
        let budget = max - bytes.len() as u64;
        line.clear();
        let n = (&mut reader)
            .take(budget + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            at_eof = true;
            break;
        }
        if n as u64 > budget {
            capped = true;
            break;
        }
        number += 1;
        bytes.extend_from_slice(&line);
        end_line = number;
    }
    Ok(Taken {
        start_line: if end_line == 0 { 0 } else { offset },
        end_line,
        total_lines: at_eof.then_some(number),
        bytes,
        capped,
        grew: false,
    })
}

/// Consumes one line without keeping it; returns the bytes consumed.
fn skip_line(reader: &mut BufReader<File>) -> io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(consumed + i + 1);
            }
            None => {
                let len = buf.len();
                reader.consume(len);
                consumed += len;
            }
        }
    }
}

/// Number of lines: newline-terminated ones, plus a last unterminated one.
pub fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"))
}

/// The first [`DETECT_BYTES`] of a file, which decide text or binary
/// (their first 4 KiB) and the encoding.
pub fn read_head(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(DETECT_BYTES);
    file.by_ref()
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// Lines taken from a file and decoded.
pub struct TextLines {
    pub text: String,
    pub format: Format,
    /// Some bytes were invalid in the encoding (shown as U+FFFD).
    pub malformed: bool,
    /// The file's bytes these lines are.
    pub file_bytes: u64,
    pub start_line: u64,
    pub end_line: u64,
    pub total_lines: Option<u64>,
    /// Set when the byte cap cut the range short.
    pub capped: bool,
    /// Set when the file grew past the cap during a whole read.
    pub grew: bool,
}

impl Taken {
    /// The lines decoded in `format` (a BOM at their start left out).
    pub fn decode(self, format: Format) -> TextLines {
        let file_bytes = self.bytes.len() as u64;
        let (text, malformed) = decode_vec(self.bytes, format);
        TextLines {
            text,
            format,
            malformed,
            file_bytes,
            start_line: self.start_line,
            end_line: self.end_line,
            total_lines: self.total_lines,
            capped: self.capped,
            grew: self.grew,
        }
    }
}

/// Up to `max` bytes of `file` from `start` (rounded up to a whole UTF-16
/// unit), decoded; and whether they reach its end.
fn utf16_text(
    file: &mut File,
    start: u64,
    format: Format,
    max: u64,
) -> io::Result<(String, bool, bool)> {
    let start = start + (start & 1);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.by_ref().take(max + 1).read_to_end(&mut bytes)?;
    let complete = bytes.len() as u64 <= max;
    bytes.truncate(max.min(bytes.len() as u64) as usize & !1);
    let (text, malformed) = decode_as(&bytes, format);
    Ok((text, malformed, complete))
}

/// The bytes `text` takes in UTF-16.
fn utf16_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64 * 2
}

/// Lines `offset` (1-based) to `offset + limit - 1` of a UTF-16 file, from
/// its first `max` bytes: a range that reaches past them is `capped`.
pub fn utf16_lines(
    mut file: File,
    format: Format,
    offset: u64,
    limit: Option<u64>,
    max: u64,
) -> io::Result<TextLines> {
    let (mut text, malformed, complete) = utf16_text(&mut file, 0, format, max)?;
    if !complete {
        // The last line read may be cut: only whole ones count.
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len() as u64;
    let first = (offset - 1).min(total);
    let end = limit.map_or(total, |l| first.saturating_add(l)).min(total);
    let taken = lines[first as usize..end as usize].concat();
    let wanted_end = limit.map_or(u64::MAX, |l| (offset - 1).saturating_add(l));
    Ok(TextLines {
        file_bytes: utf16_len(&taken) + if first == 0 && format.bom { 2 } else { 0 },
        start_line: if end > first { offset } else { 0 },
        end_line: if end > first { end } else { 0 },
        total_lines: complete.then_some(total),
        capped: !complete && wanted_end > total,
        grew: false,
        text: taken,
        format,
        malformed,
    })
}

/// The last `n` lines of a UTF-16 file of `size` bytes, from its last `max`
/// bytes: line numbers are known only when they hold the whole file.
pub fn utf16_tail(
    mut file: File,
    size: u64,
    format: Format,
    n: u64,
    max: u64,
) -> io::Result<TextLines> {
    let start = size.saturating_sub(max);
    let (mut text, malformed, _) = utf16_text(&mut file, start, format, max)?;
    let whole = start == 0;
    if !whole {
        // The first line read may be cut: only whole ones count.
        text.drain(..text.find('\n').map_or(text.len(), |i| i + 1));
    }
    let total = count_lines(text.as_bytes());
    let taken = text.split_off(tail_start(text.as_bytes(), n));
    let count = count_lines(taken.as_bytes());
    Ok(TextLines {
        file_bytes: utf16_len(&taken),
        start_line: if whole && count > 0 {
            total - count + 1
        } else {
            0
        },
        end_line: if whole { total } else { 0 },
        total_lines: whole.then_some(total),
        capped: !whole && count < n,
        grew: false,
        text: taken,
        format,
        malformed,
    })
}

/// Byte offset where the last `n` lines of `bytes` begin.
pub fn tail_start(bytes: &[u8], n: u64) -> usize {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, &b) in body.iter().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::encode;

    /// A UTF-16LE file with a BOM holding `text`, opened for reading.
    fn utf16_file(name: &str, text: &str) -> (File, u64, Format) {
        let format = Format::for_label("UTF-16LE").unwrap();
        let bytes = encode(text, format).unwrap();
        let path = std::env::temp_dir().join(format!("loomfs-lines-{}-{name}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        (file, bytes.len() as u64, format)
    }

    const TEXT: &str = "one\r\ntwo ✓\r\nthree\r\nfour\r\n";

    #[test]
    fn utf16_ranges_are_cut_on_decoded_lines() {
        let (file, _, format) = utf16_file("range", TEXT);
        let lines = utf16_lines(file, format, 2, Some(2), 1 << 20).unwrap();
        assert_eq!(lines.text, "two ✓\r\nthree\r\n");
        assert_eq!((lines.start_line, lines.end_line), (2, 3));
        assert_eq!(lines.total_lines, Some(4));
        assert_eq!(lines.file_bytes, 28);
        assert!(!lines.capped);
        // A cap inside line 3: lines 1-2 only, and the range is cut.
        let (file, _, format) = utf16_file("capped", TEXT);
        let lines = utf16_lines(file, format, 1, Some(3), 30).unwrap();
        assert_eq!(lines.text, "one\r\ntwo ✓\r\n");
        assert!(lines.capped);
        assert_eq!(lines.total_lines, None);
    }

    #[test]
    fn utf16_tails_keep_whole_lines() {
        let (file, size, format) = utf16_file("tail", TEXT);
        let lines = utf16_tail(file, size, format, 2, 1 << 20).unwrap();
        assert_eq!(lines.text, "three\r\nfour\r\n");
        assert_eq!((lines.start_line, lines.end_line), (3, 4));
        // From the last 20 bytes (an odd start rounded to a unit): the line
        // cut at their start is dropped, numbers unknown.
        let (file, size, format) = utf16_file("tail-capped", TEXT);
        let lines = utf16_tail(file, size, format, 3, 21).unwrap();
        assert_eq!(lines.text, "four\r\n");
        assert_eq!(lines.start_line, 0);
        assert!(lines.capped);
    }
}
