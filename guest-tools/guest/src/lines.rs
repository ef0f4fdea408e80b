//! Reading a text file by lines under a byte cap, what `read_file` and
//! `read_multiple_files` share: the lines come back as raw bytes, line
//! endings kept, with the line numbers they span.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

use crate::content::SNIFF_BYTES;

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

/// The first [`SNIFF_BYTES`] of a file, which decide text or binary.
pub fn read_head(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    file.by_ref()
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}
