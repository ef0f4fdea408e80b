//! Which document a file is, by its bytes: a name can lie, and a `.docx`
//! is a zip that is read as a document, not listed as an archive.

use std::io::{Cursor, Read};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pdf,
    Docx,
    Pptx,
    Odt,
    Epub,
    Xlsx,
    Xls,
    Ods,
}

impl Format {
    /// How text names it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Pdf => "PDF",
            Format::Docx => "DOCX",
            Format::Pptx => "PPTX",
            Format::Odt => "ODT",
            Format::Epub => "EPUB",
            Format::Xlsx => "XLSX",
            Format::Xls => "XLS",
            Format::Ods => "ODS",
        }
    }

    /// As the structured result names it: `pdf`, `docx`...
    pub fn key(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Pptx => "pptx",
            Format::Odt => "odt",
            Format::Epub => "epub",
            Format::Xlsx => "xlsx",
            Format::Xls => "xls",
            Format::Ods => "ods",
        }
    }
}

/// The compound file (OLE2) signature of an `.xls`.
const OLE2: [u8; 8] = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];

/// Whether a file starting with `head` may be a document or an archive,
/// by its signature alone (which of them is [`format`]'s and
/// [`crate::archive::packing`]'s to say, on the whole file).
pub fn signature(head: &[u8]) -> bool {
    head[..head.len().min(1024)]
        .windows(5)
        .any(|w| w == b"%PDF-")
        || head.starts_with(&OLE2)
        || crate::archive::packing(head).is_some()
}

/// The format of `bytes`, `None` for anything else.
pub fn format(bytes: &[u8]) -> Option<Format> {
    // A PDF's header may follow up to 1 KiB of other bytes (readers accept it).
    let head = &bytes[..bytes.len().min(1024)];
    if head.windows(5).any(|w| w == b"%PDF-") {
        return Some(Format::Pdf);
    }
    // A compound file is an XLS when it holds a workbook stream (a legacy
    // .doc or .ppt holds others): its name, UTF-16, in the directory.
    if bytes.starts_with(&OLE2) {
        let utf16 = |name: &str| {
            name.encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<_>>()
        };
        let (workbook, book) = (utf16("Workbook"), utf16("Book\0"));
        let holds = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
        return (holds(&workbook) || holds(&book)).then_some(Format::Xls);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return zipped(bytes);
    }
    None
}

/// An OpenDocument or EPUB names itself in its `mimetype` member; an
/// Office Open XML file by the part its kind starts from.
fn zipped(bytes: &[u8]) -> Option<Format> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).ok()?;
    if let Ok(member) = zip.by_name("mimetype") {
        let mut mime = String::new();
        member.take(100).read_to_string(&mut mime).ok()?;
        return match mime.trim() {
            "application/vnd.oasis.opendocument.text" => Some(Format::Odt),
            "application/vnd.oasis.opendocument.spreadsheet" => Some(Format::Ods),
            "application/epub+zip" => Some(Format::Epub),
            _ => None,
        };
    }
    let has = |name: &str| zip.index_for_name(name).is_some();
    if !has("[Content_Types].xml") {
        return None;
    }
    [
        ("word/document.xml", Format::Docx),
        ("ppt/presentation.xml", Format::Pptx),
        ("xl/workbook.xml", Format::Xlsx),
    ]
    .into_iter()
    .find_map(|(part, format)| has(part).then_some(format))
}
