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

use crate::content::SNIFF_BYTES;

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

/// Whether the head of a file is UTF-16 text (by BOM or by pattern): what
/// keeps it from being called binary for its NUL bytes. A BOM'd head
/// holding a U+0000 unit is not: text has none.
pub fn is_utf16(head: &[u8]) -> bool {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    match Encoding::for_bom(head) {
        Some((e, n)) if e != UTF_8 => !units(&head[n..], e == UTF_16LE).any(|u| u == 0),
        Some(_) => false,
        None => utf16_by_pattern(head, false).is_some(),
    }
}

/// The code units of `bytes` (an odd last byte left out).
fn units(bytes: &[u8], le: bool) -> impl Iterator<Item = u16> + '_ {
    bytes.chunks_exact(2).map(move |u| {
        let pair = [u[0], u[1]];
        if le {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }
    })
}

/// UTF-16 without a BOM, told by its NUL bytes in the first
/// [`SNIFF_BYTES`]: at least half the units have a zero byte, all on the
/// same side, none is U+0000, and the units are text (paired surrogates,
/// no control character but tab, line breaks and form feed). A binary file
/// of 16-bit numbers fails the last test: small numbers are controls.
fn utf16_by_pattern(bytes: &[u8], complete: bool) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES) & !1];
    if head.len() < 4 || (complete && bytes.len() % 2 == 1) {
        return None;
    }
    let (mut high_zero, mut low_zero) = (0usize, 0usize);
    for u in head.chunks_exact(2) {
        match (u[0], u[1]) {
            (0, 0) => return None,
            (_, 0) => high_zero += 1,
            (0, _) => low_zero += 1,
            _ => {}
        }
    }
    let count = head.len() / 2;
    let le = if high_zero * 2 >= count && low_zero == 0 {
        true
    } else if low_zero * 2 >= count && high_zero == 0 {
        false
    } else {
        return None;
    };
    let cut = head.len() < bytes.len();
    let mut pending_high = false;
    for u in units(head, le) {
        match u {
            0xD800..=0xDBFF if !pending_high => pending_high = true,
            0xDC00..=0xDFFF if pending_high => pending_high = false,
            0xD800..=0xDFFF => return None,
            _ if pending_high => return None,
            0x09 | 0x0A | 0x0C | 0x0D => {}
            0..0x20 | 0x7F => return None,
            _ => {}
        }
    }
    // A high surrogate may end a head cut in the middle of a pair.
    if pending_high && !cut {
        return None;
    }
    Some(if le { UTF_16LE } else { UTF_16BE })
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
mod tests {
    use super::*;

    fn legacy(text: &str, name: &str) -> Vec<u8> {
        let encoding = Encoding::for_label(name.as_bytes()).unwrap();
        let (bytes, _, unmappable) = encoding.encode(text);
        assert!(!unmappable, "{text} in {name}");
        bytes.into_owned()
    }

    fn utf16(text: &str, le: bool, bom: bool) -> Vec<u8> {
        let format = Format {
            encoding: if le { UTF_16LE } else { UTF_16BE },
            bom,
        };
        encode(text, format).unwrap()
    }

    const FRENCH: &str = "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en \
        canoë au delà des îles, près du mälström où brûlent les novæ.\r\nÇa coûte 12 €.\r\n";
    const JAPANESE: &str = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。\
        何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。\n";
    const CHINESE: &str = "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。寒来暑往，秋收冬藏。\
        闰余成岁，律吕调阳。云腾致雨，露结为霜。金生丽水，玉出昆冈。\n";

    #[test]
    fn boms_decide_first() {
        let mut utf8 = b"\xEF\xBB\xBF".to_vec();
        utf8.extend_from_slice("héllo\n".as_bytes());
        let d = decode(&utf8);
        assert_eq!((d.format.name(), d.format.bom), ("UTF-8", true));
        assert_eq!(d.text, "héllo\n");
        for le in [true, false] {
            let bytes = utf16(JAPANESE, le, true);
            let d = decode(&bytes);
            assert_eq!(d.format.name(), if le { "UTF-16LE" } else { "UTF-16BE" });
            assert!(d.format.bom);
            assert_eq!(d.text, JAPANESE);
            assert!(is_utf16(&bytes));
        }
    }

    #[test]
    fn utf16_without_bom_is_told_by_its_nul_pattern() {
        for le in [true, false] {
            let bytes = utf16("plain ascii text\r\nline two\r\n", le, false);
            let format = detect(&bytes, true);
            assert_eq!(format.name(), if le { "UTF-16LE" } else { "UTF-16BE" });
            assert!(!format.bom);
            assert!(is_utf16(&bytes));
        }
        // 16-bit numbers are not text: small ones are control characters.
        let numbers: Vec<u8> = (1u16..200).flat_map(|n| n.to_le_bytes()).collect();
        assert!(!is_utf16(&numbers));
        // Nor is a lone surrogate.
        let mut lone = utf16("abcd", true, false);
        lone.extend_from_slice(&0xD800u16.to_le_bytes());
        lone.extend_from_slice(&utf16("efgh", true, false));
        assert!(!is_utf16(&lone));
        // Nor a U+0000 unit, even after a BOM.
        assert!(!is_utf16(b"\xFF\xFEa\0\0\0b\0"));
    }

    #[test]
    fn utf8_then_legacy_encodings_by_statistics() {
        assert_eq!(detect("naïve ✓\n".as_bytes(), true), Format::UTF8);
        assert_eq!(detect(b"plain ascii\n", true), Format::UTF8);
        // A head cut in the middle of a character is still UTF-8.
        let text = "ééé".as_bytes();
        assert_eq!(detect(&text[..3], false), Format::UTF8);
        assert_ne!(detect(&text[..3], true), Format::UTF8);
        for (text, label, name) in [
            (FRENCH, "windows-1252", "windows-1252"),
            (
                FRENCH.replace('€', "E").as_str(),
                "iso-8859-1",
                "windows-1252",
            ),
            (JAPANESE, "shift_jis", "Shift_JIS"),
            (CHINESE, "gbk", "GBK"),
        ] {
            let bytes = legacy(text, label);
            let d = decode(&bytes);
            assert_eq!(d.format.name(), name, "{label}");
            assert_eq!(d.text, text, "{label}");
            assert!(!d.malformed);
            assert_eq!(d.round_trips(&bytes), Ok(()), "{label}");
            assert_eq!(encode(&d.text, d.format).unwrap(), bytes, "{label}");
        }
    }

    #[test]
    fn owned_decoding_agrees_with_borrowed() {
        let mut stray = "déjà vu, café\n".as_bytes().to_vec();
        stray.push(0xE9);
        for bytes in [
            "plain ✓\n".as_bytes().to_vec(),
            stray,
            legacy(FRENCH, "windows-1252"),
            legacy(JAPANESE, "shift_jis"),
            utf16(JAPANESE, true, true),
            utf16("no bom\n", false, false),
            b"\xEF\xBB\xBFbom\n".to_vec(),
        ] {
            let (a, b) = (decode(&bytes), decode_owned(bytes.clone(), true));
            assert_eq!(
                (&a.text, a.format, a.malformed),
                (&b.text, b.format, b.malformed)
            );
            assert_eq!(
                decode_vec(bytes.clone(), a.format),
                decode_as(&bytes, a.format)
            );
        }
    }

    #[test]
    fn a_utf8_file_with_a_stray_byte_stays_utf8() {
        let mut bytes = "déjà vu, café crème\n".as_bytes().to_vec();
        bytes.push(0xE9);
        bytes.push(b'\n');
        let d = decode(&bytes);
        assert_eq!(d.format, Format::UTF8);
        assert!(d.malformed);
        assert!(d.text.contains('\u{FFFD}'));
        // Not written back: the stray byte would be lost.
        assert_eq!(d.round_trips(&bytes), Err(bytes.len() - 2));
    }

    #[test]
    fn every_byte_round_trips_through_windows_1252() {
        let bytes: Vec<u8> = (1u8..=255).filter(|&b| b != b'\n').collect();
        let format = Format::for_label("latin1").unwrap();
        let (text, malformed) = decode_as(&bytes, format);
        assert!(!malformed);
        assert_eq!(encode(&text, format).unwrap(), bytes);
    }

    #[test]
    fn an_unmappable_character_is_refused_with_its_place() {
        let format = Format::for_label("windows-1252").unwrap();
        let err = encode("déjà\nvu ✓ ok\n", format).unwrap_err();
        assert_eq!(
            err,
            Unencodable {
                ch: '✓',
                line: 2,
                column: 4,
                encoding: "windows-1252"
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("'✓' (U+2713, line 2, column 4)"),
            "{message}"
        );
        // Far into a long text (past one output buffer), still exact.
        let long = format!("{}\nabc😀", "é".repeat(40_000));
        let err = encode(&long, format).unwrap_err();
        assert_eq!((err.ch, err.line, err.column), ('😀', 2, 4));
        let sjis = Format::for_label("Shift_JIS").unwrap();
        assert_eq!(encode("猫é", sjis).unwrap_err().column, 2);
    }

    #[test]
    fn utf16_and_utf8_hold_every_character() {
        let text = "✓ 😀 é 猫\n";
        for label in ["utf-16le", "utf-16be", "utf-8"] {
            let format = Format::for_label(label).unwrap();
            let bytes = encode(text, format).unwrap();
            assert_eq!(detect(&bytes, true), format, "{label}");
            assert_eq!(decode_as(&bytes, format).0, text);
        }
        assert!(Format::for_label("utf-16le").unwrap().bom);
        assert!(!Format::for_label("utf-8").unwrap().bom);
        assert!(Format::for_label("replacement").is_err());
        let err = Format::for_label("klingon").unwrap_err();
        assert!(err.contains("unknown encoding 'klingon'"), "{err}");
    }

    #[test]
    fn line_endings() {
        assert_eq!(Eol::of("a\nb\n"), Some(Eol::Lf));
        assert_eq!(Eol::of("a\r\nb\r\n"), Some(Eol::Crlf));
        assert_eq!(Eol::of("a\rb\r"), Some(Eol::Cr));
        assert_eq!(Eol::of("a\r\nb\n"), Some(Eol::Mixed));
        assert_eq!(Eol::of("ab"), None);
        assert_eq!(Eol::Crlf.apply("a\nb\r\nc\n"), "a\r\nb\r\nc\r\n");
        assert_eq!(Eol::Lf.apply("a\r\nb\n"), "a\nb\n");
        assert_eq!(Eol::Mixed.apply("a\nb"), "a\nb");
        assert!(matches!(Eol::Crlf.apply("a\r\n"), Cow::Borrowed(_)));
    }
}
