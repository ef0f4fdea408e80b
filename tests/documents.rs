//! End to end: `read_document` through the real binary over stdio, on
//! documents real producers made (`tests/fixtures/documents`, its README
//! says how), with line ranges, the document and read limits, refusals,
//! the deny list and bombs.

mod common;

use std::io::Write as _;
use std::path::PathBuf;

use common::*;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/documents")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

fn expected(name: &str) -> String {
    String::from_utf8(fixture(&format!("expected/{name}.txt"))).unwrap()
}

const DOCUMENTS: &[&str] = &[
    "cid.pdf",
    "writer.pdf",
    "two-column.pdf",
    "encrypted-empty.pdf",
    "encrypted-empty-aes.pdf",
    "image-only.pdf",
    "password.pdf",
    "report.docx",
    "report.odt",
    "report.epub",
    "slides.pptx",
    "sheet.xlsx",
    "sheet.xls",
    "sheet.ods",
];

/// A `docs` root holding every fixture (and a copy of one under a name the
/// deny list hides, one behind a symlink out of the root), and a `small`
/// root whose document and read limits are tiny.
fn tree() -> (Env, PathBuf) {
    let env = Env::new();
    for name in DOCUMENTS {
        env.write(&format!("docs/{name}"), fixture(name));
        env.write(&format!("small/{name}"), fixture(name));
    }
    env.write("docs/.env", fixture("cid.pdf"))
        .write("docs/notes.txt", "plain text\n")
        .write("docs/blob.bin", b"\x7fELF\0\0\0binary")
        .write("outside/secret.pdf", fixture("writer.pdf"))
        .symlink("../outside/secret.pdf", "docs/link_out.pdf")
        .fifo("docs/pipe.pdf")
        .mkdir("docs/folder.docx");
    let config = env.config(
        r#"
        audit_log = "audit.log"

        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"

        [[roots]]
        name = "small"
        path = "small"
        role = "reference"
        max_document_bytes = 10000
        max_read_bytes = 40
        "#,
    );
    (env, config)
}

#[tokio::test]
async fn each_document_reads_as_its_text_with_its_format_and_parts() {
    let (env, config) = tree();
    let client = start(&config).await;
    let parts = [
        ("cid.pdf", "pdf", Some(2)),
        ("writer.pdf", "pdf", Some(2)),
        ("two-column.pdf", "pdf", Some(1)),
        ("encrypted-empty.pdf", "pdf", Some(1)),
        ("encrypted-empty-aes.pdf", "pdf", Some(1)),
        ("report.docx", "docx", None),
        ("report.odt", "odt", None),
        ("report.epub", "epub", Some(1)),
        ("slides.pptx", "pptx", Some(2)),
        ("sheet.xlsx", "xlsx", Some(2)),
        ("sheet.xls", "xls", Some(2)),
        ("sheet.ods", "ods", Some(2)),
    ];
    for (name, format, count) in parts {
        let r = call_ok(
            &client,
            "read_document",
            json!({"root": "docs", "path": name}),
        )
        .await;
        let s = structured(&r);
        assert_eq!(s["content"], json!(expected(name)), "{name}");
        assert_eq!(s["format"], json!(format), "{name}");
        assert_eq!(s["parts"], json!(count), "{name}");
        assert_eq!(s["truncated"], Value::Null, "{name}");
        assert!(
            text(&r).starts_with(&expected(name)),
            "{name}: {}",
            text(&r)
        );
    }
    client.cancel().await.unwrap();
    // Every call is in the audit log, by tool and path.
    let log = audit(&env);
    assert!(
        log.iter().any(|l| l["tool"] == "read_document"
            && l["path"] == "cid.pdf"
            && l["decision"] == "allow"),
        "{log:?}"
    );
}

#[tokio::test]
async fn line_ranges_count_lines_of_the_text() {
    let (_env, config) = tree();
    let client = start(&config).await;
    let text_of = |name: &str| expected(name);
    let lines = |name: &str, from: usize, to: usize| -> String {
        text_of(name)
            .split_inclusive('\n')
            .skip(from - 1)
            .take(to - from + 1)
            .collect()
    };
    let r = call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "cid.pdf", "offset": 5, "limit": 2}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["content"], json!(lines("cid.pdf", 5, 6)));
    assert_eq!(
        (s["start_line"].clone(), s["end_line"].clone()),
        (json!(5), json!(6))
    );
    assert_eq!(s["total_lines"], json!(8));
    let r = call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "sheet.ods", "tail": 3}),
    )
    .await;
    assert_eq!(structured(&r)["content"], json!(lines("sheet.ods", 6, 8)));
    // tail with offset, and a count of 0, are refused by rule.
    for args in [
        json!({"root": "docs", "path": "cid.pdf", "tail": 1, "offset": 2}),
        json!({"root": "docs", "path": "cid.pdf", "limit": 0}),
    ] {
        let r = call(&client, "read_document", args).await;
        assert!(is_error(&r), "{}", text(&r));
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_scan_and_a_locked_pdf_are_answered_as_such() {
    let (_env, config) = tree();
    let client = start(&config).await;
    let r = call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "image-only.pdf"}),
    )
    .await;
    assert!(
        structured(&r)["note"]
            .as_str()
            .unwrap()
            .contains("no text layer"),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "read_document",
        json!({"root": "docs", "path": "password.pdf"}),
    )
    .await;
    assert_refused(&r, "needs a password");
    assert!(!text(&r).contains("tangerine"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_document_and_read_limits_hold_and_say_which_bit() {
    let (_env, config) = tree();
    let client = start(&config).await;
    // Over max_document_bytes (10,000): refused before a byte is parsed.
    let r = call(
        &client,
        "read_document",
        json!({"root": "small", "path": "cid.pdf"}),
    )
    .await;
    assert_refused(&r, "max_document_bytes");
    // Under it, the text is cut at max_read_bytes (40) on a line break,
    // and the answer says where to go on.
    let r = call_ok(
        &client,
        "read_document",
        json!({"root": "small", "path": "sheet.xlsx"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true));
    let content = s["content"].as_str().unwrap();
    assert!(content.len() <= 40 && expected("sheet.xlsx").starts_with(content));
    let next = s["end_line"].as_u64().unwrap() + 1;
    assert!(text(&r).contains(&format!("offset {next}")), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn what_is_not_a_readable_document_is_refused_by_rule() {
    let (env, config) = tree();
    let client = start(&config).await;
    let refused = [
        ("notes.txt", "use read_file"),
        ("blob.bin", "not a document"),
        (".env", "rule 'deny'"),
        ("link_out.pdf", "rule 'confinement'"),
        ("pipe.pdf", "fifo (special file)"),
        ("folder.docx", "is a directory"),
        ("missing.pdf", "does not exist"),
        ("../outside/secret.pdf", "rule 'confinement'"),
    ];
    for (path, needle) in refused {
        let r = call(
            &client,
            "read_document",
            json!({"root": "docs", "path": path}),
        )
        .await;
        assert_refused(&r, needle);
        // Nothing of the denied or outside documents' text comes back.
        assert!(!text(&r).contains("Zürich"), "{path}: {}", text(&r));
        assert_no_host_path(&env, &[&r]);
    }
    client.cancel().await.unwrap();
}

/// A zip member, stored deflated: `name` holding `content`.
fn zip_with(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (name, content) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(content).unwrap();
    }
    zip.finish().unwrap();
    out.into_inner()
}

/// A one-page PDF whose content stream inflates to `inflated` bytes of
/// spaces (a few hundred KiB on disk), offsets computed.
fn pdf_bomb(inflated: usize) -> Vec<u8> {
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..inflated >> 20 {
        deflate.write_all(&chunk).unwrap();
    }
    let stream = deflate.finish().unwrap();
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    let mut object = |pdf: &mut Vec<u8>, body: &[u8]| {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", offsets.len()).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    };
    object(&mut pdf, b"<< /Type /Catalog /Pages 2 0 R >>");
    object(&mut pdf, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>");
    object(
        &mut pdf,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    );
    let mut content = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    content.extend_from_slice(&stream);
    content.extend_from_slice(b"\nendstream");
    object(&mut pdf, &content);
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for at in &offsets {
        pdf.extend_from_slice(format!("{at:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

#[tokio::test]
async fn decompression_bombs_are_refused_naming_the_limit_and_the_server_lives() {
    let env = Env::new();
    let zeros = vec![b'a'; 100 << 20];
    let mut document = b"<w:document><w:body><w:p><w:r><w:t>".to_vec();
    document.extend_from_slice(&zeros);
    let docx = zip_with(&[
        ("[Content_Types].xml", b"<Types/>"),
        ("word/document.xml", &document),
    ]);
    env.write("docs/bomb.docx", &docx)
        .write("docs/bomb.pdf", pdf_bomb(100 << 20))
        .write("docs/report.docx", fixture("report.docx"));
    assert!(docx.len() < 1 << 20 && env.path("docs/bomb.pdf").metadata().unwrap().len() < 1 << 20);
    let config = env.config(
        r#"
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    for path in ["bomb.docx", "bomb.pdf"] {
        let r = call(
            &client,
            "read_document",
            json!({"root": "docs", "path": path}),
        )
        .await;
        assert_refused(&r, "64 MiB (a decompression bomb?)");
    }
    // A search through them counts them unread and goes on.
    let r = call_ok(
        &client,
        "search_files",
        json!({"root": "docs", "pattern": "*", "contains": "orchard", "documents": true}),
    )
    .await;
    let at = line_of("report.docx", "orchard");
    assert_eq!(found(&r), [("report.docx".into(), None, at)]);
    assert!(
        text(&r).contains("2 files could not be read"),
        "{}",
        text(&r)
    );
    // The server still answers.
    call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "report.docx"}),
    )
    .await;
    client.cancel().await.unwrap();
}

/// A tar of `members` (names written raw, so `..` and `/` go in).
fn tar_with(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in members {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        builder.append(&header, *content).unwrap();
    }
    builder.into_inner().unwrap()
}

/// Members of every archive below: what may be shown, what the deny list
/// hides, what would leave the archive, and a document.
fn members() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("README.md", b"# Release\nline two\nline three\n".to_vec()),
        ("docs/sheet.xlsx", fixture("sheet.xlsx")),
        (".env", b"CANARY-ARCHIVE-ENV\n".to_vec()),
        ("keys/id_rsa", b"CANARY-ARCHIVE-KEY\n".to_vec()),
        ("../escape.txt", b"CANARY-ARCHIVE-UP\n".to_vec()),
        ("/etc/absolute.txt", b"CANARY-ARCHIVE-ABS\n".to_vec()),
    ]
}

/// `docs/release.zip`, `.tar.gz`, `.tzst` and `.tar`, each of `members`.
fn write_releases(env: &Env, members: &[(&str, Vec<u8>)]) {
    let list: Vec<(&str, &[u8])> = members.iter().map(|(n, c)| (*n, c.as_slice())).collect();
    let tar = tar_with(&list);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    let zst =
        ruzstd::encoding::compress_to_vec(&tar[..], ruzstd::encoding::CompressionLevel::Fastest);
    env.write("docs/release.zip", zip_with(&list))
        .write("docs/release.tar.gz", gz.finish().unwrap())
        .write("docs/release.tzst", zst)
        .write("docs/release.tar", &tar);
}

#[tokio::test]
async fn archives_list_and_read_members_the_deny_list_hides_some() {
    let env = Env::new();
    write_releases(&env, &members());
    let config = env.config(
        r#"
        audit_log = "audit.log"

        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    for (archive, format) in [
        ("release.zip", "zip"),
        ("release.tar.gz", "tar.gz"),
        ("release.tzst", "tar.zst"),
        ("release.tar", "tar"),
    ] {
        let r = call_ok(
            &client,
            "read_document",
            json!({"root": "docs", "path": archive}),
        )
        .await;
        let s = structured(&r);
        assert_eq!(s["format"], json!(format), "{archive}");
        let names: Vec<&str> = s["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["README.md", "docs/sheet.xlsx"], "{archive}");
        assert!(
            text(&r).contains("2 members") && text(&r).contains("'member-path'"),
            "{}",
            text(&r)
        );
        // A text member by lines, a document member as its text.
        let r = call_ok(
            &client,
            "read_document",
            json!({"root": "docs", "path": archive, "member": "README.md", "offset": 2, "limit": 1}),
        )
        .await;
        assert_eq!(structured(&r)["content"], json!("line two\n"), "{archive}");
        let r = call_ok(
            &client,
            "read_document",
            json!({"root": "docs", "path": archive, "member": "./docs/sheet.xlsx"}),
        )
        .await;
        assert_eq!(
            structured(&r)["content"],
            json!(expected("sheet.xlsx")),
            "{archive}"
        );
        // Hidden members are not there; escaping names are refused by rule.
        for member in [".env", "keys/id_rsa", "keys/../.env"] {
            let r = call(
                &client,
                "read_document",
                json!({"root": "docs", "path": archive, "member": member}),
            )
            .await;
            assert!(is_error(&r), "{archive} {member}");
            assert!(!text(&r).contains("CANARY"), "{}", text(&r));
        }
        for member in ["../escape.txt", "/etc/absolute.txt"] {
            let r = call(
                &client,
                "read_document",
                json!({"root": "docs", "path": archive, "member": member}),
            )
            .await;
            assert_refused(&r, "rule 'member-path'");
            assert!(!text(&r).contains("CANARY"));
        }
    }
    client.cancel().await.unwrap();
    let log = audit(&env);
    assert!(
        log.iter().any(|l| l["tool"] == "read_document"
            && l["path"] == "release.zip"
            && l["member"] == "README.md"),
        "the audit line names the member"
    );
}

/// `(path, member, line)` of each match of a search result.
fn found(r: &CallToolResult) -> Vec<(String, Option<String>, u64)> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_string(),
                m["member"].as_str().map(str::to_string),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The 1-based line of `expected(name)` holding `needle`.
fn line_of(name: &str, needle: &str) -> u64 {
    let at = expected(name).lines().position(|l| l.contains(needle));
    at.unwrap() as u64 + 1
}

#[tokio::test]
async fn search_with_documents_reads_their_text_and_members_the_deny_list_hides_some() {
    let env = Env::new();
    let mut owned = members();
    owned.push((
        "inner.zip",
        zip_with(&[("deep.txt", b"CANARY-ARCHIVE-NESTED\n")]),
    ));
    write_releases(&env, &owned);
    env.write("docs/notes.txt", "Cherry pie\n")
        .write(
            "docs/quote.md",
            "A PDF starts with %PDF-1.7, its signature.\n",
        )
        .write(
            "docs/twice.tar",
            tar_with(&[
                ("dup.txt", b"a\nb\nc\nd\ne\nf\ng\nh\ni\ntwice here\n"),
                ("dup.txt", b"x\ny\ntwice again\n"),
            ]),
        );
    for name in ["cid.pdf", "password.pdf", "report.docx", "sheet.xlsx"] {
        env.write(&format!("docs/{name}"), fixture(name));
    }
    let config = env.config(
        r#"
        audit_log = "audit.log"

        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    let search = |contains: &str, documents: bool| json!({"root": "docs", "pattern": "**", "contains": contains, "documents": documents});

    // Documents and members at the lines read_document gives them.
    let r = call_ok(&client, "search_files", search("Cherry", true)).await;
    let cherry = line_of("sheet.xlsx", "Cherry");
    let member = Some("docs/sheet.xlsx".to_string());
    assert_eq!(
        found(&r),
        [
            ("notes.txt".into(), None, 1),
            ("release.tar".into(), member.clone(), cherry),
            ("release.tar.gz".into(), member.clone(), cherry),
            ("release.tzst".into(), member.clone(), cherry),
            ("release.zip".into(), member, cherry),
            ("sheet.xlsx".into(), None, cherry),
        ]
    );
    assert!(
        text(&r).contains(&format!("\nrelease.zip!/docs/sheet.xlsx:{cherry}: ")),
        "{}",
        text(&r)
    );
    // The PDF that needs a password is said to be unread.
    assert!(
        text(&r).contains("1 files could not be read"),
        "{}",
        text(&r)
    );
    // Without `documents`, they are binary files, not searched.
    let r = call_ok(&client, "search_files", search("Cherry", false)).await;
    assert_eq!(found(&r), [("notes.txt".into(), None, 1)]);
    assert!(structured(&r)["skipped_binary"].as_u64().unwrap() >= 5);

    // A PDF's text, non-ASCII; a DOCX's with context, as read_document numbers it.
    let r = call_ok(&client, "search_files", search("Zürich", true)).await;
    assert_eq!(
        found(&r),
        [("cid.pdf".into(), None, line_of("cid.pdf", "Zürich"))]
    );
    let mut args = search("quinces", true);
    args["context"] = json!(1);
    let r = call_ok(&client, "search_files", args).await;
    let at = line_of("report.docx", "quinces");
    assert_eq!(found(&r), [("report.docx".into(), None, at)]);
    let lines: Vec<String> = expected("report.docx").lines().map(String::from).collect();
    let m = &structured(&r)["matches"][0];
    assert_eq!(m["before"], json!([lines[at as usize - 2]]));
    assert_eq!(m["after"], json!([lines[at as usize]]));

    // Hidden members, escaping names and a nested archive are never searched.
    let r = call_ok(&client, "search_files", search("CANARY", true)).await;
    assert_eq!(found(&r), []);
    let mut args = search("CANARY", true);
    args["regex"] = json!(true);
    args["contains"] = json!("CANARY-[A-Z]+");
    let r = call_ok(&client, "search_files", args).await;
    assert_eq!(found(&r), [], "{}", text(&r));
    // Two members of one name are two texts: their lines are not one run.
    let r = call_ok(
        &client,
        "search_files",
        json!({"root": "docs", "pattern": "twice.tar", "contains": "twice",
               "context": 1, "documents": true}),
    )
    .await;
    let dup = Some("dup.txt".to_string());
    assert_eq!(
        found(&r),
        [
            ("twice.tar".into(), dup.clone(), 10),
            ("twice.tar".into(), dup, 3)
        ]
    );
    let m = &structured(&r)["matches"];
    assert_eq!(
        (&m[0]["before"], &m[1]["before"]),
        (&json!(["i"]), &json!(["y"]))
    );
    assert!(text(&r).contains("twice here\n--\n"), "{}", text(&r));
    // A text that only quotes a signature is searched as text.
    let r = call_ok(&client, "search_files", search("signature", true)).await;
    assert_eq!(found(&r), [("quote.md".into(), None, 1)]);

    // A read_document call is never a search, whatever it asks.
    let r = call(
        &client,
        "read_document",
        json!({"root": "docs", "path": "sheet.xlsx", "pattern": "**", "contains": "Cherry",
               "documents": true}),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("unknown field"), "{}", text(&r));

    // Documents are searched for a text, as context is.
    let r = call(
        &client,
        "search_files",
        json!({"root": "docs", "pattern": "*", "documents": true}),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("'documents' applies to 'contains'"),
        "{}",
        text(&r)
    );

    client.cancel().await.unwrap();
    let log = audit(&env);
    let searches: Vec<&Value> = log.iter().filter(|l| l["tool"] == "search_files").collect();
    assert_eq!(searches.len(), 9, "{log:?}");
    assert!(searches.iter().all(|l| l["decision"] == "allow"), "{log:?}");
}

/// A zip whose one member `name` is `size` bytes of text lines, `needle`
/// on the last: a few KiB on disk.
fn zip_of_text(name: &str, size: usize, needle: &str) -> Vec<u8> {
    let mut text = "filler line of text\n".repeat(size / 20);
    text.push_str(needle);
    text.push('\n');
    zip_with(&[(name, text.as_bytes())])
}

#[tokio::test]
async fn a_document_search_counts_inflated_bytes_against_the_budget() {
    let env = Env::new();
    env.write("docs/a.zip", zip_of_text("one.txt", 600_000, "needle a"))
        .write("docs/b.zip", zip_of_text("two.txt", 600_000, "needle b"))
        .write(
            "docs/c.zip",
            zip_of_text("three.txt", 1_200_000, "needle c"),
        );
    let config = env.config(
        r#"
        max_search_bytes = 1000000

        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    let mut args =
        json!({"root": "docs", "pattern": "*.zip", "contains": "needle", "documents": true});
    // Each page holds what fits the budget as inflated; a document is
    // searched whole on one page; one over a whole budget is skipped.
    let mut pages = Vec::new();
    loop {
        let r = call_ok(&client, "search_files", args.clone()).await;
        let s = structured(&r);
        pages.push((found(&r), s["truncated"] == json!(true), text(&r)));
        match s["next_cursor"].as_str() {
            Some(next) => args["cursor"] = json!(next),
            None => break,
        }
        assert!(pages.len() < 5, "{pages:?}");
    }
    let at = 30_001;
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert_eq!(pages[0].0, [("a.zip".into(), Some("one.txt".into()), at)]);
    assert!(
        pages[0].1 && pages[0].2.contains("max_search_bytes"),
        "{pages:?}"
    );
    assert_eq!(pages[1].0, [("b.zip".into(), Some("two.txt".into()), at)]);
    assert!(pages[1].1, "{pages:?}");
    assert_eq!(pages[2].0, []);
    assert!(!pages[2].1, "{pages:?}");
    assert!(
        pages[2].2.contains("1 documents were not searched whole"),
        "{pages:?}"
    );
    client.cancel().await.unwrap();
}

/// The server's peak resident set, from /proc.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        << 10
}

#[tokio::test]
async fn archive_bombs_are_refused_and_the_server_stays_small() {
    let env = Env::new();
    // 42.zip's shape: zips of zips, each level 16 copies of the one below.
    let mut level = zip_with(&[("0.txt", &vec![b'0'; 32 << 20])]);
    for depth in 1..=2 {
        let name = format!("{depth}.zip");
        let copies: Vec<(String, Vec<u8>)> = (0..16)
            .map(|i| (format!("{i}-{name}"), level.clone()))
            .collect();
        let refs: Vec<(&str, &[u8])> = copies
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_slice()))
            .collect();
        level = zip_with(&refs);
    }
    let flat = zip_with(&[("huge.txt", &vec![b'x'; 200 << 20])]);
    assert!(level.len() < 4 << 20 && flat.len() < 1 << 20);
    env.write("docs/42.zip", &level)
        .write("docs/flat.zip", &flat);
    let config = env.config(
        r#"
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    let (client, pid) =
        start_with_pid(&config, &[], rmcp::service::ClientLifecycleMode::Initialize).await;
    let r = call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "42.zip"}),
    )
    .await;
    assert_eq!(structured(&r)["members"].as_array().unwrap().len(), 16);
    let r = call(
        &client,
        "read_document",
        json!({"root": "docs", "path": "42.zip", "member": "0-2.zip"}),
    )
    .await;
    assert_refused(&r, "an archive inside an archive is not opened");
    let r = call(
        &client,
        "read_document",
        json!({"root": "docs", "path": "flat.zip", "member": "huge.txt"}),
    )
    .await;
    assert_refused(&r, "64 MiB (a decompression bomb?)");
    // A search opens neither the nest's zips nor the bomb's member.
    let r = call_ok(
        &client,
        "search_files",
        json!({"root": "docs", "pattern": "*.zip", "contains": "0", "documents": true}),
    )
    .await;
    assert_eq!(found(&r), []);
    assert!(
        text(&r).contains("1 files could not be read"),
        "{}",
        text(&r)
    );
    // Alive, and what it took stayed within a guest's memory cap and the
    // server's own (the bomb is 200 MiB inflated, the nest far more).
    call_ok(
        &client,
        "read_document",
        json!({"root": "docs", "path": "flat.zip"}),
    )
    .await;
    let rss = peak_rss(pid);
    assert!(rss < 600 << 20, "peak RSS {} MiB", rss >> 20);
    client.cancel().await.unwrap();
}
