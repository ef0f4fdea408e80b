//! Each fixture of `tests/fixtures/documents` (made by LibreOffice,
//! pdfTeX, LuaLaTeX, Ghostscript and qpdf: see its README) read natively
//! as the component reads it, against the text expected of it.

use std::path::PathBuf;

use crate::{Format, detect, extract};

fn fixture(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/documents");
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn expected(name: &str) -> String {
    String::from_utf8(fixture(&format!("expected/{name}.txt"))).unwrap()
}

#[test]
fn every_fixture_reads_as_its_expected_text() {
    let cases = [
        ("cid.pdf", Format::Pdf, 2),
        ("writer.pdf", Format::Pdf, 2),
        ("two-column.pdf", Format::Pdf, 1),
        ("encrypted-empty.pdf", Format::Pdf, 1),
        ("encrypted-empty-aes.pdf", Format::Pdf, 1),
        ("report.docx", Format::Docx, 0),
        ("report.odt", Format::Odt, 0),
        ("report.epub", Format::Epub, 1),
        ("slides.pptx", Format::Pptx, 2),
        ("sheet.xlsx", Format::Xlsx, 2),
        ("sheet.ods", Format::Ods, 2),
        ("sheet.xls", Format::Xls, 2),
    ];
    let mut wrong = Vec::new();
    for (name, format, units) in cases {
        let bytes = fixture(name);
        assert_eq!(detect::format(&bytes), Some(format), "{name}");
        let got = extract(format, &bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        if got.text != expected(name) || got.units != units || got.note.is_some() {
            wrong.push(format!(
                "{name}: {} units, note {:?}:\n{}",
                got.units, got.note, got.text
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_image_only_pdf_says_it_has_no_text_layer() {
    let got = extract(Format::Pdf, &fixture("image-only.pdf")).unwrap();
    assert_eq!((got.text.as_str(), got.units), ("--- page 1 ---\n", 1));
    assert!(got.note.unwrap().contains("no text layer"));
}

#[test]
fn a_pdf_that_needs_a_password_is_refused_saying_so() {
    let err = extract(Format::Pdf, &fixture("password.pdf"))
        .err()
        .unwrap();
    assert!(err.contains("needs a password"), "{err}");
}

#[test]
fn what_is_not_a_document_is_not_taken_for_one() {
    for bytes in [
        &b"plain text\n"[..],
        b"PK\x03\x04 not a zip",
        b"",
        b"\x89PNG\r\n\x1a\n",
    ] {
        assert_eq!(detect::format(bytes), None);
    }
    // A compound file without a workbook stream (a legacy .doc) is no XLS.
    let mut doc = fixture("sheet.xls");
    for name in ["Workbook", "Book\0"] {
        let utf16: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        while let Some(at) = doc.windows(utf16.len()).position(|w| w == utf16) {
            doc[at] = b'X';
        }
    }
    assert_eq!(detect::format(&doc), None);
}

mod archives {
    use std::io::Write as _;

    use crate::archive::{self, Missing, Packing, member_path};

    const MEMBERS: &[(&str, &[u8])] = &[
        ("a.txt", b"alpha\n"),
        ("dir/b.md", b"# beta\n"),
        ("dir/.env", b"CANARY-ENV\n"),
        ("../evil.txt", b"CANARY-UP\n"),
        ("/abs.txt", b"CANARY-ABS\n"),
    ];

    fn zip() -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.add_directory("dir/", options).unwrap();
        for (name, content) in MEMBERS {
            zip.start_file(*name, options).unwrap();
            zip.write_all(content).unwrap();
        }
        zip.finish().unwrap();
        out.into_inner()
    }

    /// A tar as `tar` writes one, names set raw so `..` and `/` go in.
    fn tar() -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, content) in MEMBERS {
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

    fn packed() -> Vec<(Packing, Vec<u8>)> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar()).unwrap();
        let zst = ruzstd::encoding::compress_to_vec(
            &tar()[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        vec![
            (Packing::Zip, zip()),
            (Packing::Tar, tar()),
            (Packing::TarGz, gz.finish().unwrap()),
            (Packing::TarZst, zst),
        ]
    }

    fn hides(name: &str) -> bool {
        name.split('/').any(|part| part == ".env")
    }

    #[test]
    fn each_packing_lists_its_members_without_hidden_or_escaping_ones() {
        for (packing, bytes) in packed() {
            assert_eq!(archive::packing(&bytes), Some(packing));
            let listing = archive::list(packing, &bytes, &hides, 100).unwrap();
            let names: Vec<&str> = listing.members.iter().map(|m| m.name.as_str()).collect();
            let want: &[&str] = if packing == Packing::Zip {
                &["dir/", "a.txt", "dir/b.md"]
            } else {
                &["a.txt", "dir/b.md"]
            };
            assert_eq!(names, want, "{packing:?}");
            assert_eq!(listing.refused, 2, "{packing:?}");
            let cut = archive::list(packing, &bytes, &hides, 1).unwrap();
            assert!(cut.truncated && cut.members.len() == 1, "{packing:?}");
        }
    }

    #[test]
    fn a_member_reads_and_a_hidden_one_is_not_there() {
        for (packing, bytes) in packed() {
            let read = |name| archive::read(packing, &bytes, name, &hides).unwrap();
            assert!(
                matches!(read("dir/b.md"), Ok(data) if data == b"# beta\n"),
                "{packing:?}"
            );
            assert!(
                matches!(read("dir/.env"), Err(Missing::NotThere)),
                "{packing:?}"
            );
            assert!(
                matches!(read("nope"), Err(Missing::NotThere)),
                "{packing:?}"
            );
        }
    }

    #[test]
    fn each_file_gives_the_members_a_search_may_see_in_order() {
        for (packing, bytes) in packed() {
            let mut seen = Vec::new();
            archive::each_file(packing, &bytes, &hides, &mut |name, data| {
                seen.push((name.to_string(), data));
                true
            })
            .unwrap();
            let want = [
                ("a.txt".to_string(), b"alpha\n".to_vec()),
                ("dir/b.md".to_string(), b"# beta\n".to_vec()),
            ];
            assert_eq!(seen, want, "{packing:?}");
            // Stopped by its callback after the first.
            let mut count = 0;
            archive::each_file(packing, &bytes, &hides, &mut |_, _| {
                count += 1;
                false
            })
            .unwrap();
            assert_eq!(count, 1, "{packing:?}");
        }
    }

    #[test]
    fn member_names_that_leave_the_archive_are_refused() {
        for bad in ["../x", "a/../../x", "/x", "\\x", "C:x", "c:\\x", "a\\..\\x"] {
            assert!(member_path(bad).is_err(), "{bad}");
        }
        assert_eq!(member_path("./a//b/").unwrap(), "a/b");
        assert_eq!(member_path("a\\b").unwrap(), "a/b");
    }
}

mod search {
    use loomfs_search::Documents;

    use super::{expected, fixture};
    use crate::search::{Reader, asked};

    #[test]
    fn a_call_is_a_search_when_it_asks_for_documents() {
        assert!(asked(r#"{"root": "d", "pattern": "*", "documents": true}"#));
        assert!(!asked(r#"{"root": "d", "path": "a.pdf"}"#));
        assert!(!asked(
            r#"{"root": "d", "pattern": "*", "documents": false}"#
        ));
        assert!(!asked("not json"));
    }

    #[test]
    fn a_document_gives_its_text_once_and_a_file_that_is_none_no_text() {
        let mut texts = Vec::new();
        let read = Reader.texts("r", "report.docx", &fixture("report.docx"), &mut |t| {
            texts.push((t.member.map(str::to_string), t.text.to_string()));
            true
        });
        assert_eq!(read, Ok(true));
        assert_eq!(texts, [(None, expected("report.docx"))]);
        // A compound file that is no workbook is not a document after all.
        let mut ole = vec![0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
        ole.resize(4096, 0);
        assert!(Reader.is_document(&ole));
        assert_eq!(Reader.texts("r", "old.doc", &ole, &mut |_| true), Ok(false));
        assert!(!Reader.is_document(b"plain text"));
    }
}
