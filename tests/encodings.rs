//! End to end: text in the common encodings, with the real binary over
//! stdio. Files in windows-1252, ISO-8859-1, Shift_JIS, GBK, UTF-16LE and
//! UTF-16BE with a BOM, UTF-8 with a BOM and UTF-8 with CRLF are read
//! decoded with their encoding named; an edit changes one line and leaves
//! every other byte of the file as it was; `write_file` keeps an existing
//! file's encoding and writes a new one in the encoding it names; a
//! character the encoding cannot hold is refused, naming it, the file
//! unchanged; `contains` finds words in UTF-16 and legacy files and names
//! the encoding; a real binary is still refused; no host path in any reply.
//!
//! The fixtures are bytes written here: the legacy ones literal (made with
//! another encoder than the server's), UTF-16 by the standard library.

mod common;

use common::*;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

const WORKSPACE: &str = "audit_log = \"audit.log\"\n\
    [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n";

/// The part of each fixture an edit replaces: ASCII in every encoding but
/// UTF-16.
const MARK: &str = "MARK";

/// `text` in UTF-16, with a BOM.
fn utf16(text: &str, le: bool) -> Vec<u8> {
    let mut out = if le {
        vec![0xFF, 0xFE]
    } else {
        vec![0xFE, 0xFF]
    };
    utf16_body(text, le, &mut out);
    out
}

fn utf16_body(text: &str, le: bool, out: &mut Vec<u8>) {
    for u in text.encode_utf16() {
        out.extend_from_slice(&if le { u.to_le_bytes() } else { u.to_be_bytes() });
    }
}

/// `text` in windows-1252 (Latin-1 and the two characters used here from
/// its 0x80-0x9F range).
fn cp1252(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| match c {
            '€' => 0x80,
            'œ' => 0x9C,
            c if (c as u32) < 0x80 || (0xA0..0x100).contains(&(c as u32)) => c as u8,
            c => panic!("{c} is not in this test's windows-1252"),
        })
        .collect()
}

const FRENCH: &str = "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en \
    canoë au delà des îles, près du mälström où brûlent les novæ.\nÇa coûte 12 € ";
const LATIN1: &str = "Là où la forêt est déjà brûlée, le garçon naïf crée des châteaux \
    à l'élégance désuète; ensuite il rêve et s'écrie: où êtes-vous? ";
/// Shift_JIS, made by another encoder: 吾輩は猫である。名前はまだ無い。\n
/// どこで生れたかとんと見当がつかぬ。 (ー is 0x81 0x5B: an ASCII `[` as a
/// trail byte).
const SJIS_BEFORE: &[u8] = b"\x8C\xE1\x94y\x82\xCD\x94L\x82\xC5\x82\xA0\x82\xE9\x81B\x96\xBC\x91O\x82\xCD\x82\xDC\x82\xBE\x96\xB3\x82\xA2\x81B\x0A\x82\xC7\x82\xB1\x82\xC5\x90\xB6\x82\xEA\x82\xBD\x82\xA9\x82\xC6\x82\xF1\x82\xC6\x8C\xA9\x93\x96\x82\xAA\x82\xC2\x82\xA9\x82\xCA\x81B";
const SJIS_AFTER: &[u8] = b"\x0A\x89\xBD\x82\xC5\x82\xE0\x94\x96\x88\xC3\x82\xA2\x82\xB6\x82\xDF\x82\xB6\x82\xDF\x82\xB5\x82\xBD\x8F\x8A\x82\xC5\x83j\x83\x83\x81[\x83j\x83\x83\x81[\x8B\x83\x82\xA2\x82\xC4\x82\xA2\x82\xBD\x8E\x96\x82\xBE\x82\xAF\x82\xCD\x8BL\x89\xAF\x82\xB5\x82\xC4\x82\xA2\x82\xE9\x81B\x0A";
const SJIS_TEXT: (&str, &str) = (
    "吾輩は猫である。名前はまだ無い。\nどこで生れたかとんと見当がつかぬ。",
    "\n何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。\n",
);
/// GBK, made by another encoder.
const GBK_BEFORE: &[u8] = b"\xCC\xEC\xB5\xD8\xD0\xFE\xBB\xC6\xA3\xAC\xD3\xEE\xD6\xE6\xBA\xE9\xBB\xC4\xA1\xA3\xC8\xD5\xD4\xC2\xD3\xAF\xEA\xBE\xA3\xAC\xB3\xBD\xCB\xDE\xC1\xD0\xD5\xC5\xA1\xA3\x0A\xBA\xAE\xC0\xB4\xCA\xEE\xCD\xF9\xA3\xAC\xC7\xEF\xCA\xD5\xB6\xAC\xB2\xD8\xA1\xA3";
const GBK_AFTER: &[u8] = b"\x0A\xC8\xF2\xD3\xE0\xB3\xC9\xCB\xEA\xA3\xAC\xC2\xC9\xC2\xC0\xB5\xF7\xD1\xF4\xA1\xA3\xD4\xC6\xCC\xDA\xD6\xC2\xD3\xEA\xA3\xAC\xC2\xB6\xBD\xE1\xCE\xAA\xCB\xAA\xA1\xA3\xBD\xF0\xC9\xFA\xC0\xF6\xCB\xAE\xA3\xAC\xD3\xF1\xB3\xF6\xC0\xA5\xB8\xD4\xA1\xA3\x0A";
const GBK_TEXT: (&str, &str) = (
    "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。\n寒来暑往，秋收冬藏。",
    "\n闰余成岁，律吕调阳。云腾致雨，露结为霜。金生丽水，玉出昆冈。\n",
);

/// A fixture: the file's bytes around [`MARK`], its text around it, how a
/// read names its format, and an edit's replacement for the mark.
struct Case {
    file: &'static str,
    before: Vec<u8>,
    mark: Vec<u8>,
    after: Vec<u8>,
    text: (String, String),
    /// `encoding` in the result (absent for UTF-8 without BOM).
    encoding: Option<&'static str>,
    bom: bool,
    eol: Option<&'static str>,
    new_text: &'static str,
    new_bytes: Vec<u8>,
}

impl Case {
    fn bytes(&self) -> Vec<u8> {
        [&self.before[..], &self.mark, &self.after].concat()
    }

    fn text(&self) -> String {
        format!("{}{MARK}{}", self.text.0, self.text.1)
    }
}

fn cases() -> Vec<Case> {
    let utf16_case = |file, le: bool, text: (&str, &str), new_text: &'static str| {
        let before = utf16(text.0, le);
        let (mut mark, mut after, mut new_bytes) = (vec![], vec![], vec![]);
        utf16_body(MARK, le, &mut mark);
        utf16_body(text.1, le, &mut after);
        utf16_body(new_text, le, &mut new_bytes);
        Case {
            file,
            before,
            mark,
            after,
            text: (text.0.into(), text.1.into()),
            encoding: Some(if le { "UTF-16LE" } else { "UTF-16BE" }),
            bom: true,
            eol: text.1.contains('\r').then_some("crlf"),
            new_text,
            new_bytes,
        }
    };
    let latin = |file, text: &str, new_text: &'static str| Case {
        file,
        before: cp1252(text),
        mark: MARK.into(),
        after: cp1252("\nfin.\n"),
        text: (text.into(), "\nfin.\n".into()),
        encoding: Some("windows-1252"),
        bom: false,
        eol: None,
        new_text,
        new_bytes: cp1252(new_text),
    };
    let legacy = |file, bytes: (&[u8], &[u8]), text: (&str, &str), name, new: &[u8]| Case {
        file,
        before: bytes.0.to_vec(),
        mark: MARK.into(),
        after: bytes.1.to_vec(),
        text: (text.0.into(), text.1.into()),
        encoding: Some(name),
        bom: false,
        eol: None,
        new_text: "猫",
        new_bytes: new.to_vec(),
    };
    vec![
        latin("cp1252.txt", FRENCH, "déjà €"),
        // ISO-8859-1 is windows-1252 to the WHATWG standard: its superset.
        latin("latin1.txt", LATIN1, "naïveté"),
        legacy(
            "sjis.txt",
            (SJIS_BEFORE, SJIS_AFTER),
            SJIS_TEXT,
            "Shift_JIS",
            b"\x94L",
        ),
        legacy(
            "gbk.txt",
            (GBK_BEFORE, GBK_AFTER),
            GBK_TEXT,
            "GBK",
            b"\xC3\xA8",
        ),
        utf16_case(
            "utf16le.txt",
            true,
            ("Grüße, ", "!\r\nzweite Zeile ✓\r\n"),
            "✓✓",
        ),
        utf16_case("utf16be.txt", false, ("日本語 ", "\n二行目 😀\n"), "猫"),
        Case {
            file: "utf8bom.txt",
            before: [b"\xEF\xBB\xBF".as_slice(), "naïve ".as_bytes()].concat(),
            mark: MARK.into(),
            after: " ✓\nend\n".into(),
            text: ("naïve ".into(), " ✓\nend\n".into()),
            encoding: Some("UTF-8"),
            bom: true,
            eol: None,
            new_text: "é",
            new_bytes: "é".into(),
        },
        Case {
            file: "crlf.txt",
            before: "first line\r\nsecond ".into(),
            mark: MARK.into(),
            after: " line\r\nthird\r\n".into(),
            text: ("first line\r\nsecond ".into(), " line\r\nthird\r\n".into()),
            encoding: None,
            bom: false,
            eol: Some("crlf"),
            new_text: "✓",
            new_bytes: "✓".into(),
        },
    ]
}

fn env_with(cases: &[Case]) -> Env {
    let env = Env::new();
    for case in cases {
        env.write(&format!("ws/{}", case.file), case.bytes());
    }
    env.write(
        "ws/blob.bin",
        b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\x3e\0MARK",
    );
    env
}

fn read(path: &str) -> Value {
    json!({"root": "ws", "path": path})
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"root": "ws", "path": path, "edits": [{"old_text": old, "new_text": new}]})
}

#[tokio::test]
async fn each_encoding_is_read_decoded_and_an_edit_keeps_every_other_byte() {
    let cases = cases();
    let env = env_with(&cases);
    let client = start(&env.config(WORKSPACE)).await;
    let mut replies: Vec<CallToolResult> = Vec::new();
    for case in &cases {
        let r = call_ok(&client, "read_file", read(case.file)).await;
        let s = structured(&r);
        assert_eq!(s["content"], case.text(), "{}", case.file);
        assert_eq!(
            s.get("encoding").and_then(Value::as_str),
            case.encoding,
            "{}",
            case.file
        );
        assert_eq!(s.get("bom").is_some(), case.bom, "{}", case.file);
        assert_eq!(
            s.get("eol").and_then(Value::as_str),
            case.eol,
            "{}",
            case.file
        );
        assert_eq!(s["size"], case.bytes().len(), "{}", case.file);
        // A short note, only for text that is not UTF-8.
        let noted = text(&r).contains("shown decoded; edits and writes keep its encoding");
        assert_eq!(
            noted,
            case.encoding.is_some_and(|e| e != "UTF-8"),
            "{}",
            case.file
        );
        replies.push(r);

        let e = call_ok(&client, "edit_file", edit(case.file, MARK, case.new_text)).await;
        assert_eq!(structured(&e)["applied"], true, "{}", case.file);
        assert_eq!(
            structured(&e).get("encoding").and_then(Value::as_str),
            case.encoding,
            "{}",
            case.file
        );
        let on_disk = std::fs::read(env.path(&format!("ws/{}", case.file))).unwrap();
        let expected = [&case.before[..], &case.new_bytes, &case.after].concat();
        assert_eq!(
            on_disk, expected,
            "{}: every byte but the edit's kept",
            case.file
        );
        replies.push(e);

        // Read back: the new text, decoded the same way.
        let again = call_ok(&client, "read_file", read(case.file)).await;
        let want = format!("{}{}{}", case.text.0, case.new_text, case.text.1);
        assert_eq!(structured(&again)["content"], want, "{}", case.file);
        replies.push(again);
    }
    // A range of a UTF-16 file is cut on its decoded lines.
    let range = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "utf16le.txt", "offset": 2, "limit": 1}),
    )
    .await;
    assert_eq!(structured(&range)["content"], "zweite Zeile ✓\r\n");
    assert_eq!(structured(&range)["start_line"], 2);
    let tail = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "sjis.txt", "tail": 1}),
    )
    .await;
    assert_eq!(structured(&tail)["content"], SJIS_TEXT.1.trim_start());
    assert_eq!(structured(&tail)["encoding"], "Shift_JIS");
    let batch = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "paths": ["gbk.txt", "utf16be.txt"]}),
    )
    .await;
    let files = &structured(&batch)["files"];
    assert_eq!(files[0]["encoding"], "GBK");
    assert_eq!(files[1]["encoding"], "UTF-16BE");
    assert_eq!(files[1]["bom"], true);
    assert_eq!(files[1]["content"], "日本語 猫\n二行目 😀\n");
    replies.extend([range, tail, batch]);
    let refs: Vec<&CallToolResult> = replies.iter().collect();
    assert_no_host_path(&env, &refs);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_character_the_encoding_cannot_hold_is_refused_and_nothing_changes() {
    let cases = cases();
    let env = env_with(&cases);
    let client = start(&env.config(WORKSPACE)).await;
    let path = env.path("ws/cp1252.txt");
    let before = std::fs::read(&path).unwrap();

    let e = call(&client, "edit_file", edit("cp1252.txt", MARK, "done ✓")).await;
    assert_refused(
        &e,
        "'✓' (U+2713, line 2, column 20) cannot be written in windows-1252",
    );
    assert!(text(&e).contains("from edit 1's new_text"), "{}", text(&e));
    assert!(text(&e).contains("nothing was changed"), "{}", text(&e));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // A dry run says so too.
    let dry = json!({"root": "ws", "path": "cp1252.txt", "dry_run": true,
        "edits": [{"old_text": MARK, "new_text": "✓"}]});
    let d = call(&client, "edit_file", dry).await;
    assert_refused(&d, "'✓' (U+2713");

    let w = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "cp1252.txt", "content": "ok\nnot ✓ ok\n"}),
    )
    .await;
    assert_refused(
        &w,
        "'✓' (U+2713, line 2, column 5) cannot be written in windows-1252",
    );
    assert!(text(&w).contains("nothing was written"), "{}", text(&w));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Nothing kept in the trash either: nothing was replaced.
    assert!(env.trash("ws").is_empty());
    assert_no_host_path(&env, &[&e, &d, &w]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn write_file_keeps_an_existing_files_encoding_and_names_a_new_ones() {
    let cases = cases();
    let env = env_with(&cases);
    let client = start(&env.config(WORKSPACE)).await;
    let disk = |rel: &str| std::fs::read(env.path(&format!("ws/{rel}"))).unwrap();
    let write = |path: &str, content: &str| json!({"root": "ws", "path": path, "content": content});

    let r1 = call_ok(&client, "write_file", write("cp1252.txt", "Crème brûlée\n")).await;
    assert_eq!(disk("cp1252.txt"), cp1252("Crème brûlée\n"));
    assert_eq!(structured(&r1)["encoding"], "windows-1252");
    assert!(
        text(&r1).contains("in windows-1252, the file's"),
        "{}",
        text(&r1)
    );

    // UTF-16LE with BOM and CRLF: both kept, the content's LFs as CRLF.
    let r2 = call_ok(&client, "write_file", write("utf16le.txt", "✓ one\ntwo\n")).await;
    assert_eq!(disk("utf16le.txt"), utf16("✓ one\r\ntwo\r\n", true));
    assert_eq!(structured(&r2)["eol"], "crlf");
    assert!(
        text(&r2).contains("line breaks written as CRLF, the file's"),
        "{}",
        text(&r2)
    );

    // UTF-8 with CRLF; then asked for LF.
    call_ok(&client, "write_file", write("crlf.txt", "a\nb\n")).await;
    assert_eq!(disk("crlf.txt"), b"a\r\nb\r\n");
    let lf = json!({"root": "ws", "path": "crlf.txt", "content": "a\r\nb\n", "line_endings": "lf"});
    call_ok(&client, "write_file", lf).await;
    assert_eq!(disk("crlf.txt"), b"a\nb\n");

    // An append writes in the file's encoding, with no second BOM.
    let append =
        json!({"root": "ws", "path": "utf16be.txt", "content": "末尾\n", "mode": "append"});
    call_ok(&client, "write_file", append).await;
    let mut expected = cases[5].bytes();
    utf16_body("末尾\n", false, &mut expected);
    assert_eq!(disk("utf16be.txt"), expected);
    // ... and refuses another one.
    let other = json!({"root": "ws", "path": "utf16be.txt", "content": "x", "mode": "append",
        "encoding": "UTF-8"});
    let refused = call(&client, "write_file", other).await;
    assert!(is_error(&refused));
    assert!(text(&refused).contains("an append writes in the file's encoding"));

    // A new file in the encoding named; UTF-16 with a BOM.
    let new = |path: &str, content: &str, encoding: &str| json!({"root": "ws", "path": path, "content": content, "encoding": encoding});
    let n1 = call_ok(
        &client,
        "write_file",
        new("new-sjis.txt", "猫\n", "Shift_JIS"),
    )
    .await;
    assert_eq!(disk("new-sjis.txt"), b"\x94L\n");
    assert!(structured(&n1)["created"].as_bool().unwrap());
    call_ok(
        &client,
        "write_file",
        new("new-be.txt", "ok ✓\n", "utf-16be"),
    )
    .await;
    assert_eq!(disk("new-be.txt"), utf16("ok ✓\n", false));
    // Read back as written (a text long enough for its encoding to be
    // told: three bytes could be anything).
    let long = format!("{}{MARK}{}", SJIS_TEXT.0, SJIS_TEXT.1);
    call_ok(
        &client,
        "write_file",
        new("new-sjis.txt", &long, "Shift_JIS"),
    )
    .await;
    assert_eq!(disk("new-sjis.txt"), cases[2].bytes());
    let back = call_ok(&client, "read_file", read("new-sjis.txt")).await;
    assert_eq!(structured(&back)["content"], long);
    assert_eq!(structured(&back)["encoding"], "Shift_JIS");
    // Naming an encoding converts an existing file.
    call_ok(
        &client,
        "write_file",
        new("cp1252.txt", "Crème ✓\n", "UTF-8"),
    )
    .await;
    assert_eq!(disk("cp1252.txt"), "Crème ✓\n".as_bytes());
    // Without one, a new file is UTF-8.
    call_ok(&client, "write_file", write("plain.txt", "é\n")).await;
    assert_eq!(disk("plain.txt"), "é\n".as_bytes());

    let bad = call(&client, "write_file", new("x.txt", "x", "klingon")).await;
    assert!(is_error(&bad));
    assert!(
        text(&bad).contains("unknown encoding 'klingon'"),
        "{}",
        text(&bad)
    );
    assert!(std::fs::metadata(env.path("ws/x.txt")).is_err());
    assert_no_host_path(&env, &[&r1, &r2, &refused, &n1, &back, &bad]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn contains_finds_words_in_utf16_and_legacy_files_and_binaries_stay_refused() {
    let cases = cases();
    let env = env_with(&cases);
    let client = start(&env.config(WORKSPACE)).await;
    let search = |contains: &str| json!({"root": "ws", "pattern": "*", "contains": contains});

    let r = call_ok(&client, "search_files", search("Zeile")).await;
    let matches = structured(&r)["matches"].as_array().unwrap().clone();
    assert_eq!(matches.len(), 1, "{matches:?}");
    assert_eq!(matches[0]["path"], "utf16le.txt");
    assert_eq!(matches[0]["line"], 2);
    assert_eq!(matches[0]["preview"], "zweite Zeile ✓");
    assert_eq!(matches[0]["encoding"], "UTF-16LE");
    assert!(
        text(&r).contains("utf16le.txt:2 (UTF-16LE): zweite Zeile ✓"),
        "{}",
        text(&r)
    );
    // UTF-16 text is no binary; the ELF file is.
    assert!(
        structured(&r).get("skipped_binary") == Some(&json!(1)),
        "{}",
        text(&r)
    );

    // The mark is ASCII: found in every file as it is, the encoding named
    // where it is not UTF-8; the binary is skipped.
    let all = call_ok(&client, "search_files", search(MARK)).await;
    let found: Vec<(String, Option<String>)> = structured(&all)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let encoding = m.get("encoding").and_then(Value::as_str).map(String::from);
            (m["path"].as_str().unwrap().to_string(), encoding)
        })
        .collect();
    let mut want: Vec<(String, Option<String>)> = cases
        .iter()
        .map(|c| {
            let encoding = c.encoding.filter(|e| *e != "UTF-8").map(String::from);
            (c.file.to_string(), encoding)
        })
        .collect();
    want.sort();
    assert_eq!(found, want);
    let sjis = structured(&all)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == "sjis.txt")
        .unwrap()
        .clone();
    assert_eq!(sjis["preview"], "どこで生れたかとんと見当がつかぬ。MARK");

    // An ASCII word on an ASCII line is shown as it is, with no encoding:
    // the file's is asked only for a line that is not UTF-8.
    let ascii = call_ok(&client, "search_files", search("fin.")).await;
    let ascii_matches = structured(&ascii)["matches"].as_array().unwrap().clone();
    assert_eq!(ascii_matches.len(), 2, "{ascii_matches:?}");
    for (m, (path, line)) in ascii_matches
        .iter()
        .zip([("cp1252.txt", 3), ("latin1.txt", 2)])
    {
        assert_eq!((&m["path"], &m["line"]), (&json!(path), &json!(line)));
        assert_eq!(m["preview"], "fin.");
        assert!(m.get("encoding").is_none(), "{m}");
    }

    // A non-ASCII word in a windows-1252 file and in a GBK one.
    let fr = call_ok(&client, "search_files", search("crapaüter")).await;
    assert_eq!(structured(&fr)["matches"][0]["path"], "cp1252.txt");
    assert_eq!(structured(&fr)["matches"][0]["encoding"], "windows-1252");
    let zh = call_ok(&client, "search_files", search("秋收冬藏")).await;
    assert_eq!(structured(&zh)["matches"][0]["path"], "gbk.txt");
    assert_eq!(structured(&zh)["matches"][0]["line"], 2);
    let re = json!({"root": "ws", "pattern": "*", "contains": "二行.", "regex": true});
    let re = call_ok(&client, "search_files", re).await;
    assert_eq!(structured(&re)["matches"][0]["path"], "utf16be.txt");

    let blob = call(&client, "read_file", read("blob.bin")).await;
    assert_refused(&blob, "'blob.bin' is a binary file");
    let edit_blob = call(&client, "edit_file", edit("blob.bin", MARK, "x")).await;
    assert_refused(&edit_blob, "binary file");
    assert_no_host_path(&env, &[&r, &all, &ascii, &fr, &zh, &re, &blob, &edit_blob]);
    client.cancel().await.unwrap();
}
