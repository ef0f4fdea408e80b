//! A PDF's text layer, page by page. `lopdf` parses the file (objects,
//! filters, an empty user password's decryption, each font's encoding and
//! `ToUnicode` map); the text is laid out here from the page's operators:
//! a new line where the baseline moves, a space where the pen jumps ahead
//! on one line or a `TJ` kerning gap is a word's width. Text in form
//! XObjects and annotations is not read.

use std::collections::BTreeMap;

use lopdf::content::Content;
use lopdf::{Document, Encoding, Error, LoadOptions, Object};

use crate::text::Extracted;

/// The most one stream (an object stream, a page's content, a font's
/// `ToUnicode` map) may inflate to: past it, it is a decompression bomb,
/// refused by this rule before the call's memory cap is reached.
const MAX_STREAM_BYTES: usize = 64 << 20;

/// A `TJ` gap wider than this (thousandths of the font size) is a space.
const WORD_GAP: f32 = 200.0;

pub fn extract(bytes: &[u8]) -> Result<Extracted, String> {
    let options = LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        ..LoadOptions::default()
    };
    let doc = Document::load_mem_with_options(bytes, options).map_err(|e| match e {
        Error::InvalidPassword => needs_password(),
        e => described(&e),
    })?;
    // An empty user password was tried (and decrypted the file) on load.
    if doc.is_encrypted() && !doc.was_encrypted() {
        return Err(needs_password());
    }
    let mut pages = Vec::new();
    let mut bare = Vec::new();
    for (number, id) in doc.get_pages() {
        let text = page_text(&doc, id).map_err(|e| format!("page {number}: {}", described(&e)))?;
        if text.trim().is_empty() {
            bare.push(number.to_string());
        }
        pages.push((None, text));
    }
    let mut extracted = Extracted::parts("page", pages);
    extracted.note = match bare.len() {
        0 => None,
        n if n == extracted.units as usize => Some(
            "it has no text layer: its pages are images (a scan?), which this tool does not \
             read"
                .into(),
        ),
        _ => Some(format!(
            "page{} {} ha{} no text (images only?)",
            if bare.len() == 1 { "" } else { "s" },
            bare.join(", "),
            if bare.len() == 1 { "s" } else { "ve" }
        )),
    };
    Ok(extracted)
}

fn needs_password() -> String {
    "it is encrypted and needs a password, which this tool does not take".into()
}

/// lopdf's errors, said without its advice to file issues with it.
fn described(e: &Error) -> String {
    match e {
        Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. }) => format!(
            "a stream inflates past {} MiB (a decompression bomb?)",
            MAX_STREAM_BYTES >> 20
        ),
        Error::Unimplemented(what) => format!("it uses what the PDF reader lacks ({what})"),
        e => format!("it does not parse as a PDF ({e})"),
    }
}

/// A 2-D affine matrix `[a b c d e f]`, as PDF writes them.
type Matrix = [f32; 6];

const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

fn times(m: &Matrix, n: &Matrix) -> Matrix {
    [
        m[0] * n[0] + m[1] * n[2],
        m[0] * n[1] + m[1] * n[3],
        m[2] * n[0] + m[3] * n[2],
        m[2] * n[1] + m[3] * n[3],
        m[4] * n[0] + m[5] * n[2] + n[4],
        m[4] * n[1] + m[5] * n[3] + n[5],
    ]
}

fn number(o: Option<&Object>) -> f32 {
    match o {
        Some(Object::Integer(i)) => *i as f32,
        Some(Object::Real(r)) => *r,
        _ => 0.0,
    }
}

/// The pen as the page's operators move it, and the text laid out so far.
struct Pen<'m, 'd> {
    out: String,
    ctm: Matrix,
    saved: Vec<Matrix>,
    /// The text matrix and the start of its line.
    tm: Matrix,
    line: Matrix,
    leading: f32,
    size: f32,
    encoding: Option<&'m Encoding<'d>>,
    /// Where the last text shown ends (estimated) and its baseline, on the
    /// page.
    last: Option<(f32, f32)>,
}

fn page_text(doc: &Document, id: lopdf::ObjectId) -> lopdf::Result<String> {
    let mut encodings: BTreeMap<Vec<u8>, Encoding> = BTreeMap::new();
    for (name, font) in doc.get_page_fonts(id)? {
        encodings.insert(
            name,
            font.get_font_encoding_with_limit(doc, MAX_STREAM_BYTES)?,
        );
    }
    let content = Content::decode(&doc.get_page_content_with_limit(id, MAX_STREAM_BYTES)?)?;
    let mut pen = Pen {
        out: String::new(),
        ctm: IDENTITY,
        saved: Vec::new(),
        tm: IDENTITY,
        line: IDENTITY,
        leading: 0.0,
        size: 0.0,
        encoding: None,
        last: None,
    };
    for op in &content.operations {
        let arg = |i: usize| number(op.operands.get(i));
        match op.operator.as_str() {
            "q" => pen.saved.push(pen.ctm),
            "Q" => pen.ctm = pen.saved.pop().unwrap_or(IDENTITY),
            "cm" => {
                let m = [arg(0), arg(1), arg(2), arg(3), arg(4), arg(5)];
                pen.ctm = times(&m, &pen.ctm);
            }
            "BT" => (pen.tm, pen.line) = (IDENTITY, IDENTITY),
            "Tf" => {
                pen.encoding = op
                    .operands
                    .first()
                    .and_then(|o| o.as_name().ok())
                    .and_then(|n| encodings.get(n));
                pen.size = arg(1);
            }
            "TL" => pen.leading = arg(0),
            "Td" => pen.next_line(arg(0), arg(1)),
            "TD" => {
                pen.leading = -arg(1);
                pen.next_line(arg(0), arg(1));
            }
            "Tm" => {
                pen.line = [arg(0), arg(1), arg(2), arg(3), arg(4), arg(5)];
                pen.tm = pen.line;
            }
            "T*" => pen.next_line(0.0, -pen.leading),
            "Tj" => pen.show(op.operands.first()),
            "'" => {
                pen.next_line(0.0, -pen.leading);
                pen.show(op.operands.first());
            }
            "\"" => {
                pen.next_line(0.0, -pen.leading);
                pen.show(op.operands.get(2));
            }
            "TJ" => {
                let Some(Object::Array(items)) = op.operands.first() else {
                    continue;
                };
                for item in items {
                    match item {
                        Object::String(..) => pen.show(Some(item)),
                        gap if -number(Some(gap)) > WORD_GAP => pen.space(),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(pen.out)
}

impl Pen<'_, '_> {
    fn next_line(&mut self, tx: f32, ty: f32) {
        self.line = times(&[1.0, 0.0, 0.0, 1.0, tx, ty], &self.line);
        self.tm = self.line;
    }

    /// The font size on the page (the text and current matrices scale it).
    fn page_size(&self) -> f32 {
        let m = times(&self.tm, &self.ctm);
        (self.size * m[3].hypot(m[2])).abs().max(1.0)
    }

    fn space(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
    }

    fn show(&mut self, operand: Option<&Object>) {
        let (Some(Object::String(bytes, _)), Some(encoding)) = (operand, self.encoding) else {
            return;
        };
        let mut shown = String::new();
        if encoding.write_to_string(bytes, &mut shown).is_err() || shown.is_empty() {
            return;
        }
        let text = unligated(&shown);
        let m = times(&self.tm, &self.ctm);
        let (x, y) = (m[4], m[5]);
        let size = self.page_size();
        match self.last {
            // Up past the line before: the top of a new column or block.
            Some((_, last_y)) if y - last_y > size * 2.0 => {
                let breaks = self.out.chars().rev().take_while(|c| *c == '\n').count();
                for _ in breaks..2 {
                    self.out.push('\n');
                }
            }
            Some((_, last_y)) if (y - last_y).abs() > size * 0.5 => {
                if !self.out.ends_with('\n') {
                    self.out.push('\n');
                }
            }
            Some((end, _)) if x > end + size * 0.15 || x < end - size * 4.0 => self.space(),
            _ => {}
        }
        // Without the glyphs' widths, a character is taken as half an em:
        // enough to tell a word's gap from the next letter.
        let advance = text.chars().count() as f32 * self.size * 0.5;
        self.tm = times(&[1.0, 0.0, 0.0, 1.0, advance, 0.0], &self.tm);
        let end = times(&self.tm, &self.ctm)[4];
        self.out.push_str(&text);
        self.last = Some((end, y));
    }
}

/// Ligature glyphs (`ﬁ`, from a font's glyph names) as their letters, so
/// the text reads and searches as it was written.
fn unligated(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| ('\u{fb00}'..='\u{fb06}').contains(&c)) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            c => out.push(c),
        }
    }
    out.into()
}
