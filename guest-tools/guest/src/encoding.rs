//! Text in the common encodings: read decoded, written back as it was.
//!
//! A file's [`Format`] is its encoding and whether it starts with a byte
//! order mark. [`detect`] decides it from the bytes, in this order: a BOM
//! (UTF-8, UTF-16LE, UTF-16BE); UTF-16 without one, by its pattern of NUL
//! bytes (every other byte zero, on the same side, and the units decoding
//! to text: paired surrogates, no control characters but whitespace);
//! valid UTF-8; UTF-8 with a few stray bytes (more valid multi-byte
//! characters than invalid runs: decoded with U+FFFD, as before); then
//! `chardetng`, Firefox's detector, which names one of the legacy encodings
//! of the Web (windows-1252 and its kin, ISO-8859-x, Shift_JIS, EUC-JP,
//! ISO-2022-JP, GBK, Big5, EUC-KR, KOI8, IBM866...). Encodings are
//! `encoding_rs`'s, the WHATWG Encoding Standard's: there ISO-8859-1 is
//! windows-1252, its superset, which maps every byte to a character and
//! back, so a Latin-1 file round trips byte for byte under that name.
//!
//! Writing back ([`encode`]) uses the exact encoding and BOM. A character
//! the encoding cannot hold is never replaced: [`Unencodable`] names it and
//! its line and column, and the caller writes nothing. A decoding that is
//! not exact (bytes invalid in the encoding, or a character with two byte
//! forms, as some Shift_JIS ones have) is found by [`Decoded::round_trips`],
//! and a tool that writes refuses it rather than change bytes the call did
//! not touch.
//!
//! Line endings ([`Eol`]) are detected on the decoded text, where a `\n` is
//! a line break in every encoding.

use std::borrow::Cow;
use std::fmt;

use encoding_rs::{EncoderResult, Encoding, UTF_8, UTF_16BE, UTF_16LE};
use schemars::JsonSchema;
use serde::Serialize;

use crate::content::utf16_by_pattern;

/// How a file's text is stored.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Format {
    pub encoding: &'static Encoding,
    /// Whether the file starts with a byte order mark.
    pub bom: bool,
}

impl Format {
    /// UTF-8 without a BOM: what a result leaves unsaid.
    pub const UTF8: Format = Format {
        encoding: UTF_8,
        bom: false,
    };

    /// The WHATWG name: `UTF-8`, `UTF-16LE`, `windows-1252`, `Shift_JIS`...
    pub fn name(self) -> &'static str {
        self.encoding.name()
    }

    pub fn is_utf8(self) -> bool {
        self.encoding == UTF_8
    }

    pub fn is_utf16(self) -> bool {
        self.encoding == UTF_16LE || self.encoding == UTF_16BE
    }

    /// The name, and "with BOM" when it has one: how a note says it.
    pub fn describe(self) -> String {
        if self.bom {
            format!("{} with BOM", self.name())
        } else {
            self.name().to_string()
        }
    }

    /// The BOM's bytes in this encoding, or none.
    fn bom_bytes(self) -> &'static [u8] {
        match (self.bom, self.encoding) {
            (false, _) => b"",
            (true, e) if e == UTF_16LE => b"\xFF\xFE",
            (true, e) if e == UTF_16BE => b"\xFE\xFF",
            (true, _) => b"\xEF\xBB\xBF",
        }
    }

    /// The encoding a call names (a WHATWG label, any case: `utf-8`,
    /// `UTF-16LE`, `latin1`, `cp1252`, `shift_jis`, `gbk`...). UTF-16 is
    /// written with a BOM, so it is recognised when read back; UTF-8
    /// without one. Labels with no encoder (`replacement`) are refused.
    pub fn for_label(label: &str) -> Result<Format, String> {
        let encoding = Encoding::for_label(label.trim().as_bytes())
            .filter(|e| *e != encoding_rs::REPLACEMENT)
            .ok_or_else(|| {
                format!(
                    "unknown encoding '{}': name one of the WHATWG Encoding Standard's labels, \
                     such as UTF-8, UTF-16LE, UTF-16BE, windows-1252, ISO-8859-15, Shift_JIS, \
                     EUC-JP, GBK, Big5, EUC-KR, KOI8-R",
                    crate::shown(label)
                )
            })?;
        let bom = encoding == UTF_16LE || encoding == UTF_16BE;
        Ok(Format { encoding, bom })
    }
}

/// The format of a file starting with `bytes`; `complete` when they are
/// the whole file (otherwise a character cut at their end is no error).
pub fn detect(bytes: &[u8], complete: bool) -> Format {
    if let Some((encoding, _)) = Encoding::for_bom(bytes) {
        return Format {
            encoding,
            bom: true,
        };
    }
    if let Some(encoding) = utf16_by_pattern(bytes, complete) {
        return Format {
            encoding,
            bom: false,
        };
    }
    if is_utf8(bytes, complete) || mostly_utf8(bytes) {
        return Format::UTF8;
    }
    let mut detector = chardetng::EncodingDetector::new();
    detector.feed(bytes, complete);
    Format {
        encoding: detector.guess(None, false),
        bom: false,
    }
}

/// Whether `bytes` are valid UTF-8, a character cut at the end allowed
/// unless they are the whole file.
pub fn is_utf8(bytes: &[u8], complete: bool) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => !complete && e.error_len().is_none(),
    }
}

/// UTF-8 with a few stray bytes: more valid multi-byte characters than
/// invalid runs. A legacy single- or double-byte text seldom forms valid
/// UTF-8 sequences, so it has far fewer.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (mut wide, mut bad) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        wide += chunk.valid().chars().filter(|c| !c.is_ascii()).count();
        bad += usize::from(!chunk.invalid().is_empty());
    }
    wide > bad
}

/// A file's bytes as text.
pub struct Decoded {
    pub text: String,
    pub format: Format,
    /// Some bytes are not valid in the encoding: shown as U+FFFD.
    pub malformed: bool,
}

impl Decoded {
    /// Whether encoding the text again gives `bytes` exactly: what a tool
    /// that writes the text back needs. Where it does not, the first byte
    /// that would change (an offset in `bytes`).
    pub fn round_trips(&self, bytes: &[u8]) -> Result<(), usize> {
        if self.malformed {
            return Err(first_difference(
                &decode_error_free_prefix(bytes, self.format),
                bytes,
            ));
        }
        match encode(&self.text, self.format) {
            Ok(back) if back == bytes => Ok(()),
            Ok(back) => Err(first_difference(&back, bytes)),
            Err(_) => Err(0),
        }
    }
}

/// The bytes up to the first one invalid in `format`, for the offset of a
/// refusal.
fn decode_error_free_prefix(bytes: &[u8], format: Format) -> Vec<u8> {
    let mut decoder = format.encoding.new_decoder_without_bom_handling();
    let mut out = String::with_capacity(bytes.len() * 3 + 16);
    let start = format.bom_bytes().len().min(bytes.len());
    let (result, read) =
        decoder.decode_to_string_without_replacement(&bytes[start..], &mut out, true);
    match result {
        encoding_rs::DecoderResult::Malformed(bad, extra) => {
            bytes[..start + read - usize::from(bad) - usize::from(extra)].to_vec()
        }
        _ => bytes.to_vec(),
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// A whole file's bytes, its format detected, decoded.
pub fn decode(bytes: &[u8]) -> Decoded {
    let format = detect(bytes, true);
    let (text, malformed) = decode_as(bytes, format);
    Decoded {
        text,
        format,
        malformed,
    }
}

/// A whole file's bytes (or its first ones, `complete` false), decoded as
/// [`decode`] does, UTF-8 without a copy: what a read does with them.
pub fn decode_owned(bytes: Vec<u8>, complete: bool) -> Decoded {
    if Encoding::for_bom(&bytes).is_some() || utf16_by_pattern(&bytes, complete).is_some() {
        let format = detect(&bytes, complete);
        let (text, malformed) = decode_as(&bytes, format);
        return Decoded {
            text,
            format,
            malformed,
        };
    }
    match String::from_utf8(bytes) {
        Ok(text) => Decoded {
            text,
            format: Format::UTF8,
            malformed: false,
        },
        Err(e) => {
            let bytes = e.into_bytes();
            let format = detect(&bytes, complete);
            let (text, malformed) = decode_as(&bytes, format);
            Decoded {
                text,
                format,
                malformed,
            }
        }
    }
}

/// [`decode_as`] taking the bytes: UTF-8 without a BOM is not copied.
pub fn decode_vec(bytes: Vec<u8>, format: Format) -> (String, bool) {
    if format != Format::UTF8 {
        return decode_as(&bytes, format);
    }
    match String::from_utf8(bytes) {
        Ok(text) => (text, false),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
    }
}

/// `bytes` decoded in `format`'s encoding, a leading BOM left out; and
/// whether some bytes were invalid (shown as U+FFFD).
pub fn decode_as(bytes: &[u8], format: Format) -> (String, bool) {
    let bom = format.bom_bytes();
    let body = if !bom.is_empty() && bytes.starts_with(bom) {
        &bytes[bom.len()..]
    } else {
        bytes
    };
    let (text, malformed) = format.encoding.decode_without_bom_handling(body);
    (text.into_owned(), malformed)
}

/// A character an encoding cannot hold, where the text has it.
#[derive(Debug, PartialEq, Eq)]
pub struct Unencodable {
    pub ch: char,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub encoding: &'static str,
}

impl Unencodable {
    fn at(text: &str, offset: usize, ch: char, encoding: &'static Encoding) -> Unencodable {
        let before = &text[..offset.min(text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Unencodable {
            ch,
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            encoding: encoding.name(),
        }
    }
}

impl fmt::Display for Unencodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' (U+{:04X}, line {}, column {}) cannot be written in {}",
            self.ch.escape_debug(),
            u32::from(self.ch),
            self.line,
            self.column,
            self.encoding
        )
    }
}

/// `text` in `format`: its encoding, after its BOM if it has one. A
/// character the encoding cannot hold is an error, never replaced.
pub fn encode(text: &str, format: Format) -> Result<Vec<u8>, Unencodable> {
    let mut out = Vec::with_capacity(text.len() + 3);
    out.extend_from_slice(format.bom_bytes());
    let encoding = format.encoding;
    if encoding == UTF_8 {
        out.extend_from_slice(text.as_bytes());
        return Ok(out);
    }
    // encoding_rs decodes UTF-16 but writes no UTF-16 (the Web never
    // does); every character has a UTF-16 form.
    if format.is_utf16() {
        out.reserve(text.len() * 2);
        let le = encoding == UTF_16LE;
        for u in text.encode_utf16() {
            out.extend_from_slice(&if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        return Ok(out);
    }
    let mut encoder = encoding.new_encoder();
    let mut buffer = vec![0u8; 16 * 1024];
    let mut done = 0;
    loop {
        let (result, read, written) =
            encoder.encode_from_utf8_without_replacement(&text[done..], &mut buffer, true);
        out.extend_from_slice(&buffer[..written]);
        done += read;
        match result {
            EncoderResult::InputEmpty => return Ok(out),
            EncoderResult::OutputFull => {}
            EncoderResult::Unmappable(ch) => {
                return Err(Unencodable::at(text, done - ch.len_utf8(), ch, encoding));
            }
        }
    }
}

/// A text's line endings. (Its variants carry plain comments: a doc
/// comment would make each a subschema of its own in result schemas.)
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Eol {
    Lf,
    Crlf,
    // Lone CRs (classic Mac OS).
    Cr,
    // More than one kind.
    Mixed,
}

impl Eol {
    /// The style of `text`, or none without a line break.
    pub fn of(text: &str) -> Option<Eol> {
        let bytes = text.as_bytes();
        let crlf = memchr::memmem::find_iter(bytes, b"\r\n").count();
        let lf = memchr::memchr_iter(b'\n', bytes).count() - crlf;
        let cr = memchr::memchr_iter(b'\r', bytes).count() - crlf;
        match (lf > 0, crlf > 0, cr > 0) {
            (false, false, false) => None,
            (true, false, false) => Some(Eol::Lf),
            (false, true, false) => Some(Eol::Crlf),
            (false, false, true) => Some(Eol::Cr),
            _ => Some(Eol::Mixed),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Eol::Lf => "lf",
            Eol::Crlf => "crlf",
            Eol::Cr => "cr",
            Eol::Mixed => "mixed",
        }
    }

    /// `text` with its line breaks written this way: for LF and CRLF, each
    /// `\n` and `\r\n` becomes the style's; lone CRs and mixed styles
    /// change nothing (there is no one way to write them).
    pub fn apply(self, text: &str) -> Cow<'_, str> {
        match self {
            Eol::Lf if text.contains("\r\n") => Cow::Owned(text.replace("\r\n", "\n")),
            Eol::Crlf if Eol::of(text).is_some_and(|e| e != Eol::Crlf) => {
                Cow::Owned(text.replace("\r\n", "\n").replace('\n', "\r\n"))
            }
            _ => Cow::Borrowed(text),
        }
    }
}

#[cfg(test)]
mod tests;
