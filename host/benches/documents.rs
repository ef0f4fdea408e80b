//! `read_document` through the runtime (a fresh instance per call, the
//! document read through the policing filesystem, the parsers in the
//! sandbox) against a native run of the same crates on the same bytes:
//! the text of a 100-page PDF (lopdf) and of a 10,000-row XLSX
//! (calamine). Both documents are made here: the PDF by lopdf, Helvetica
//! text in compressed content streams; the XLSX as Excel writes one
//! (shared strings, numbers), zipped.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench documents`; the figures and
//! their ratio are in docs/benchmarks.md.

mod common;

use std::io::{Cursor, Write as _};
use std::time::Duration;

use calamine::{Reader, Xlsx};
use criterion::{Criterion, criterion_group, criterion_main};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

/// 100 pages of 40 lines of prose each.
fn pdf() -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let mut kids = Vec::new();
    for page in 0..100 {
        let mut operations = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 10.into()]),
            Operation::new("TL", vec![14.into()]),
            Operation::new("Td", vec![56.into(), 780.into()]),
        ];
        for line in 0..40 {
            let text = format!(
                "Page {page}, line {line}: the quick brown fox jumps over the lazy dog again."
            );
            operations.push(Operation::new("Tj", vec![Object::string_literal(text)]));
            operations.push(Operation::new("T*", vec![]));
        }
        operations.push(Operation::new("ET", vec![]));
        let content = Content { operations }.encode().unwrap();
        let mut stream = Stream::new(dictionary! {}, content);
        stream.compress().unwrap();
        let contents = doc.add_object(stream);
        kids.push(Object::from(doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => contents,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 842.into()],
        })));
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => 100, "Resources" => resources,
        }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// One sheet of 10,000 rows: a name (a shared string), a count and a price.
fn xlsx() -> Vec<u8> {
    let mut rows = String::new();
    for r in 1..=10_000 {
        rows.push_str(&format!(
            r#"<row r="{r}"><c r="A{r}" t="s"><v>{}</v></c><c r="B{r}"><v>{r}</v></c><c r="C{r}"><v>{}.25</v></c></row>"#,
            r % 100,
            r % 977
        ));
    }
    let strings: String = (0..100)
        .map(|i| format!("<si><t>item {i}</t></si>"))
        .collect();
    let parts = [
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>"#.to_string(),
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#.to_string(),
        ),
        (
            "xl/workbook.xml",
            r#"<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Items" sheetId="1" r:id="rId1"/></sheets></workbook>"#.to_string(),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>"#.to_string(),
        ),
        (
            "xl/sharedStrings.xml",
            format!(r#"<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="100" uniqueCount="100">{strings}</sst>"#),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(r#"<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>"#),
        ),
    ];
    let mut out = Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in parts {
        zip.start_file(name, options).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
    out.into_inner()
}

/// The native run: the same crates, the text of every page.
fn native_pdf(bytes: &[u8]) -> usize {
    let doc = Document::load_mem(bytes).unwrap();
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    doc.extract_text(&pages).unwrap().len()
}

/// The native run: every sheet's rows as tab-separated cells.
fn native_xlsx(bytes: &[u8]) -> usize {
    let mut book = Xlsx::new(Cursor::new(bytes)).unwrap();
    let mut text = String::new();
    for name in book.sheet_names() {
        for row in book.worksheet_range(&name).unwrap().rows() {
            let cells: Vec<String> = row.iter().map(|c| c.to_string()).collect();
            text.push_str(&cells.join("\t"));
            text.push('\n');
        }
    }
    text.len()
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let (pdf, xlsx) = (pdf(), xlsx());
    std::fs::write(dir.join("book.pdf"), &pdf).unwrap();
    std::fs::write(dir.join("items.xlsx"), &xlsx).unwrap();
    let root = common::reference_root(dir, 16 << 20);
    let tools = common::Components::load(&["read_document"], 64 << 20);
    let call = |path: &str| {
        let text = tools.call("read_document", &root, path);
        assert!(text[0].len() > 100_000, "{}", text[1]);
    };
    let mut group = c.benchmark_group("documents");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("pdf_100_pages/loom_fs", |b| b.iter(|| call("book.pdf")));
    group.bench_function("pdf_100_pages/native", |b| b.iter(|| native_pdf(&pdf)));
    group.bench_function("xlsx_10k_rows/loom_fs", |b| b.iter(|| call("items.xlsx")));
    group.bench_function("xlsx_10k_rows/native", |b| b.iter(|| native_xlsx(&xlsx)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
