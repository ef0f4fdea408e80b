//! The zipped XML documents: DOCX, PPTX, ODT and EPUB, each walked for its
//! paragraphs, headings and tables ([`Flow`]).

use crate::text::Extracted;
use crate::xml::{self, Flow, Node, attribute, required};

/// A Word document's body (`word/document.xml`): headings by their style
/// (`Heading1`, `Title`), tables as rows; tab stops, deleted text and
/// field codes are not text.
pub fn docx(bytes: &[u8]) -> Result<Extracted, String> {
    let mut zip = xml::open(bytes)?;
    let body = required(&mut zip, "word/document.xml")?;
    let mut flow = Flow::default();
    let (mut in_text, mut in_properties) = (false, false);
    xml::walk(&body, |node| match node {
        Node::Open(e) => match e.local_name().as_ref() {
            "t" => in_text = true,
            "pPr" => in_properties = true,
            "tab" if !in_properties => flow.text("\t"),
            "br" | "cr" => flow.text("\n"),
            "pStyle" => flow.heading(attribute(e, "val").map_or(0, |s| heading_level(&s))),
            "tbl" => flow.open_table(),
            "tc" => flow.open_cell(),
            _ => {}
        },
        Node::Close(name) => match name {
            "t" => in_text = false,
            "pPr" => in_properties = false,
            "p" => flow.end_paragraph(),
            "tc" => flow.close_cell(),
            "tr" => flow.close_row(),
            "tbl" => flow.close_table(),
            _ => {}
        },
        Node::Text(t) if in_text => flow.text(&t),
        Node::Text(_) => {}
    })?;
    Ok(Extracted::whole(flow.finish()))
}

/// `Heading2` (any case) is level 2; a `Title` is level 1.
fn heading_level(style: &str) -> usize {
    let lower = style.to_ascii_lowercase();
    if lower == "title" {
        return 1;
    }
    lower
        .strip_prefix("heading")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A presentation's slides in the order it shows them (its slide list, by
/// relationship), each slide's title as a heading.
pub fn pptx(bytes: &[u8]) -> Result<Extracted, String> {
    let mut zip = xml::open(bytes)?;
    let presentation = required(&mut zip, "ppt/presentation.xml")?;
    let relations = required(&mut zip, "ppt/_rels/presentation.xml.rels")?;
    let mut ids = Vec::new();
    xml::walk(&presentation, |node| {
        // `r:id` names the slide's relationship (`id` alone is its number).
        if let Node::Open(e) = node
            && e.local_name().as_ref() == "sldId"
            && let Some(rel) = e
                .attributes()
                .flatten()
                .find(|a| a.key.as_ref().ends_with(":id"))
                .and_then(|a| xml::value(&a))
        {
            ids.push(rel);
        }
    })?;
    let mut targets = Vec::new();
    xml::walk(&relations, |node| {
        if let Node::Open(e) = node
            && e.local_name().as_ref() == "Relationship"
            && let (Some(id), Some(target)) = (attribute(e, "Id"), attribute(e, "Target"))
        {
            targets.push((id, target));
        }
    })?;
    let mut slides = Vec::new();
    for id in ids {
        let Some((_, target)) = targets.iter().find(|(i, _)| *i == id) else {
            continue;
        };
        let name = format!(
            "ppt/{}",
            target.trim_start_matches('/').trim_start_matches("ppt/")
        );
        let slide = required(&mut zip, &name)?;
        slides.push((None, slide_text(&slide)?));
    }
    Ok(Extracted::parts("slide", slides))
}

fn slide_text(slide: &str) -> Result<String, String> {
    let mut flow = Flow::default();
    let (mut in_text, mut title) = (false, false);
    xml::walk(slide, |node| match node {
        Node::Open(e) => match e.local_name().as_ref() {
            "t" => in_text = true,
            "br" => flow.text("\n"),
            "ph" => {
                title = matches!(attribute(e, "type").as_deref(), Some("title" | "ctrTitle"));
            }
            "p" if title => flow.heading(1),
            "tbl" => flow.open_table(),
            "tc" => flow.open_cell(),
            _ => {}
        },
        Node::Close(name) => match name {
            "t" => in_text = false,
            "sp" => title = false,
            "p" => flow.end_paragraph(),
            "tc" => flow.close_cell(),
            "tr" => flow.close_row(),
            "tbl" => flow.close_table(),
            _ => {}
        },
        Node::Text(t) if in_text => flow.text(&t),
        Node::Text(_) => {}
    })?;
    Ok(flow.finish())
}

/// An OpenDocument text's body (`content.xml`): headings by their outline
/// level; tracked deletions and comments are not text.
pub fn odt(bytes: &[u8]) -> Result<Extracted, String> {
    let mut zip = xml::open(bytes)?;
    let content = required(&mut zip, "content.xml")?;
    let mut flow = Flow::default();
    let mut skipped = 0usize;
    xml::walk(&content, |node| match node {
        Node::Open(e) => match e.local_name().as_ref() {
            "tracked-changes" | "annotation" | "note-citation" => skipped += 1,
            _ if skipped > 0 => {}
            "h" => {
                let level = attribute(e, "outline-level").and_then(|l| l.parse().ok());
                flow.heading(level.unwrap_or(1));
            }
            "s" => {
                let count: usize = attribute(e, "c").and_then(|c| c.parse().ok()).unwrap_or(1);
                flow.text(&" ".repeat(count.min(100)));
            }
            "tab" => flow.text("\t"),
            "line-break" => flow.text("\n"),
            "table" => flow.open_table(),
            "table-cell" | "covered-table-cell" => flow.open_cell(),
            _ => {}
        },
        Node::Close(name) => match name {
            "tracked-changes" | "annotation" | "note-citation" => skipped -= 1,
            _ if skipped > 0 => {}
            "h" | "p" => flow.end_paragraph(),
            "table-cell" | "covered-table-cell" => flow.close_cell(),
            "table-row" => flow.close_row(),
            "table" => flow.close_table(),
            _ => {}
        },
        Node::Text(t) if skipped == 0 => flow.collapsed(&t),
        Node::Text(_) => {}
    })?;
    Ok(Extracted::whole(flow.finish()))
}

/// An EPUB's chapters in reading order (its package's spine), each an
/// XHTML page read as HTML is: headings, paragraphs, list items and table
/// rows; scripts and styles are not text.
pub fn epub(bytes: &[u8]) -> Result<Extracted, String> {
    let mut zip = xml::open(bytes)?;
    let container = required(&mut zip, "META-INF/container.xml")?;
    let mut package = None;
    xml::walk(&container, |node| {
        if let Node::Open(e) = node
            && e.local_name().as_ref() == "rootfile"
            && package.is_none()
        {
            package = attribute(e, "full-path");
        }
    })?;
    let package = package.ok_or("its container names no package")?;
    let opf = required(&mut zip, &package)?;
    let base = package.rsplit_once('/').map_or("", |(dir, _)| dir);
    let (mut items, mut spine) = (Vec::new(), Vec::new());
    xml::walk(&opf, |node| {
        if let Node::Open(e) = node {
            match e.local_name().as_ref() {
                "item" => {
                    if let (Some(id), Some(href)) = (attribute(e, "id"), attribute(e, "href")) {
                        items.push((id, href));
                    }
                }
                "itemref" => spine.extend(attribute(e, "idref")),
                _ => {}
            }
        }
    })?;
    let mut chapters = Vec::new();
    for idref in spine {
        let Some((_, href)) = items.iter().find(|(id, _)| *id == idref) else {
            continue;
        };
        let href = percent_decoded(href.split('#').next().unwrap_or_default());
        let name = if base.is_empty() {
            href
        } else {
            format!("{base}/{href}")
        };
        let Some(page) = xml::member(&mut zip, &name)? else {
            continue;
        };
        chapters.push((None, xhtml_text(&page)?));
    }
    Ok(Extracted::parts("chapter", chapters))
}

fn xhtml_text(page: &str) -> Result<String, String> {
    let mut flow = Flow::default();
    let mut skipped = 0usize;
    let block = |name: &str| {
        matches!(
            name,
            "p" | "div"
                | "li"
                | "blockquote"
                | "pre"
                | "dt"
                | "dd"
                | "section"
                | "article"
                | "figcaption"
                | "caption"
                | "tr"
        )
    };
    xml::walk(page, |node| match node {
        Node::Open(e) => match e.local_name().as_ref() {
            "head" | "script" | "style" => skipped += 1,
            _ if skipped > 0 => {}
            h @ ("h1" | "h2" | "h3" | "h4" | "h5" | "h6") => {
                flow.end_paragraph();
                flow.heading(usize::from(h.as_bytes()[1] - b'0'));
            }
            "br" => flow.text("\n"),
            "table" => flow.open_table(),
            "td" | "th" => flow.open_cell(),
            name if block(name) => flow.end_paragraph(),
            _ => {}
        },
        Node::Close(name) => match name {
            "head" | "script" | "style" => skipped = skipped.saturating_sub(1),
            _ if skipped > 0 => {}
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => flow.end_paragraph(),
            "td" | "th" => flow.close_cell(),
            "tr" => flow.close_row(),
            "table" => flow.close_table(),
            name if block(name) => flow.end_paragraph(),
            _ => {}
        },
        Node::Text(t) if skipped == 0 => flow.collapsed(&t),
        Node::Text(_) => {}
    })?;
    Ok(flow.finish())
}

/// `%20` and the like in a package's links, as bytes then UTF-8.
fn percent_decoded(href: &str) -> String {
    let bytes = href.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
