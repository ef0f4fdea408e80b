//! The XML inside a zipped document (DOCX, PPTX, ODT, EPUB): its members
//! read with a bound on what they inflate to, their elements walked, and
//! the text laid out as paragraphs, headings and table rows ([`Flow`]).

use std::borrow::Cow;
use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// The most one member may inflate to: past it, a member is a
/// decompression bomb, refused by this rule before the call's memory cap
/// is reached.
pub const MAX_MEMBER_BYTES: u64 = 64 << 20;

pub type Zip<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

pub fn open(bytes: &[u8]) -> Result<Zip<'_>, String> {
    zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("its zip does not read ({e})"))
}

/// The member `name` as text (`None` where there is none).
pub fn member(zip: &mut Zip, name: &str) -> Result<Option<String>, String> {
    let Some(index) = zip.index_for_name(name) else {
        return Ok(None);
    };
    let member = zip
        .by_index(index)
        .map_err(|e| format!("its member '{name}' does not read ({e})"))?;
    let bytes = bounded(member, MAX_MEMBER_BYTES).map_err(|e| {
        format!(
            "its member '{name}' does not inflate ({})",
            crate::read_error(&e)
        )
    })?;
    if bytes.len() as u64 > MAX_MEMBER_BYTES {
        return Err(format!(
            "its member '{name}' inflates past {} MiB (a decompression bomb?)",
            MAX_MEMBER_BYTES >> 20
        ));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// At most `max + 1` bytes of `reader`, the buffer grown by at most what
/// it holds each time and never past that: doubling a buffer near the
/// bound would ask for twice the bound.
pub fn bounded(reader: impl Read, max: u64) -> std::io::Result<Vec<u8>> {
    let limit = usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1);
    let mut reader = reader.take(limit as u64);
    let mut bytes: Vec<u8> = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if bytes.capacity() - bytes.len() < n {
            let grow = bytes.capacity().max(n).min(limit - bytes.len());
            bytes.try_reserve_exact(grow)?;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// [`member`], which the format requires.
pub fn required(zip: &mut Zip, name: &str) -> Result<String, String> {
    member(zip, name)?.ok_or_else(|| format!("it has no '{name}'"))
}

/// What a walk over an XML text meets.
pub enum Node<'a, 'x> {
    /// An element opens (an empty one opens, then closes).
    Open(&'a BytesStart<'x>),
    /// An element closes: its local name.
    Close(&'a str),
    Text(Cow<'a, str>),
}

/// Calls `f` on each element and text of `xml`, in order.
pub fn walk(xml: &str, mut f: impl FnMut(Node)) -> Result<(), String> {
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => f(Node::Open(&e)),
            Ok(Event::Empty(e)) => {
                f(Node::Open(&e));
                f(Node::Close(e.local_name().as_ref()));
            }
            Ok(Event::End(e)) => f(Node::Close(e.local_name().as_ref())),
            Ok(Event::Text(t)) => f(Node::Text(t.xml10_content())),
            Ok(Event::CData(t)) => f(Node::Text(Cow::Borrowed(&t))),
            Ok(Event::GeneralRef(r)) => {
                if let Some(c) = reference(&r) {
                    f(Node::Text(c.to_string().into()));
                }
            }
            Ok(Event::Eof) => return Ok(()),
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "its XML is malformed at byte {} ({e})",
                    reader.buffer_position()
                ));
            }
        }
    }
}

/// The character an entity reference stands for: XML's own five, a
/// character reference, and the HTML ones XHTML books use most.
fn reference(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "copy" => '©',
        _ => return None,
    })
}

/// An attribute's value by its local name (`w:val` is `val`).
pub fn attribute(e: &BytesStart, local: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.local_name().as_ref() == local)
            .then(|| value(&a))
            .flatten()
    })
}

/// An attribute's value, its references resolved.
pub fn value(a: &quick_xml::events::attributes::Attribute) -> Option<String> {
    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
        .ok()
        .map(Cow::into_owned)
}

/// Text laid out as lines: a paragraph per line, a heading after `#`s, a
/// table row as its cells separated by tabs.
#[derive(Default)]
pub struct Flow {
    pub out: String,
    paragraph: String,
    heading: usize,
    /// Tables open around the text; only the outermost one makes rows.
    tables: usize,
    row: Vec<String>,
    cell: Option<String>,
}

impl Flow {
    pub fn heading(&mut self, level: usize) {
        self.heading = level.min(6);
    }

    pub fn text(&mut self, text: &str) {
        self.paragraph.push_str(text);
    }

    /// Text whose runs of white space are one space (HTML's and ODF's).
    pub fn collapsed(&mut self, text: &str) {
        for (i, word) in text.split(char::is_whitespace).enumerate() {
            let after_space =
                self.paragraph.is_empty() || self.paragraph.ends_with([' ', '\t', '\n']);
            if i > 0 && !after_space {
                self.paragraph.push(' ');
            }
            self.paragraph.push_str(word);
        }
    }

    /// The paragraph ends: a line of its own, or part of its table cell.
    pub fn end_paragraph(&mut self) {
        let text = std::mem::take(&mut self.paragraph);
        let text = text.trim();
        let heading = std::mem::take(&mut self.heading);
        if text.is_empty() {
            return;
        }
        if let Some(cell) = self.cell.as_mut() {
            if !cell.is_empty() {
                cell.push(' ');
            }
            cell.push_str(&text.replace(['\t', '\n'], " "));
            return;
        }
        if heading > 0 {
            self.out.push_str(&"#".repeat(heading));
            self.out.push(' ');
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub fn open_table(&mut self) {
        self.end_paragraph();
        self.tables += 1;
    }

    pub fn close_table(&mut self) {
        self.tables = self.tables.saturating_sub(1);
    }

    pub fn open_cell(&mut self) {
        if self.tables == 1 {
            self.end_paragraph();
            self.cell = Some(String::new());
        }
    }

    pub fn close_cell(&mut self) {
        if self.tables == 1 {
            self.end_paragraph();
            if let Some(cell) = self.cell.take() {
                self.row.push(cell);
            }
        }
    }

    pub fn close_row(&mut self) {
        if self.tables == 1 {
            let row = std::mem::take(&mut self.row);
            if row.iter().any(|c| !c.is_empty()) {
                self.out.push_str(&row.join("\t"));
                self.out.push('\n');
            }
        }
    }

    /// The text, its last paragraph ended.
    pub fn finish(mut self) -> String {
        self.end_paragraph();
        self.out
    }
}
