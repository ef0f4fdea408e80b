//! The encoding module's unit tests: detection, round trips, refusals.

use super::*;
use crate::content::is_utf16;

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
