//! `read_document`: the text of a document, chosen by its content, not its
//! name: PDF (the text layer, pages marked), DOCX, PPTX and ODT (paragraphs,
//! headings, tables as rows), XLSX, XLS and ODS (each sheet as rows of
//! tab-separated cells), EPUB. Its own component: the parsers run here, in
//! the sandbox, with the call's memory cap and deadline, on whatever lands
//! in a downloads folder.
//!
//! A document is read whole, up to the root's `max_document_bytes` (asked of
//! the host through the WIT `documents` interface); the text extracted is
//! then paged by lines like `read_file`'s (`offset`/`limit`, `tail`), capped
//! at the root's `max_read_bytes`.

mod archive;
mod detect;
mod members;
mod office;
mod pdf;
mod search;
mod sheets;
mod text;
mod xml;

use std::fs::File;
use std::io::Read;

use loomfs_guest::{
    About, Answer, Context, Kind, Permission, Tool, ToolError, human_bytes, io_error, locate,
    shown, special_file,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use detect::Format;
pub use text::Extracted;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "document-component",
    });
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    /// Relative to the root.
    path: String,
    /// First line, 1-based.
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    #[schemars(range(min = 1))]
    limit: Option<u64>,
    #[schemars(range(min = 1))]
    tail: Option<u64>,
    /// A file in a zip or tar; omit to list.
    member: Option<String>,
}

#[derive(Serialize, JsonSchema, Default)]
struct DocumentRead {
    path: String,
    /// File size in bytes.
    size: u64,
    /// pdf, docx, pptx, odt, epub, xlsx, xls, ods; for an archive zip, tar,
    /// tar.gz, tar.zst; for a member read as text, text.
    format: String,
    /// The archive member read.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<String>,
    /// The document's parts, as its format divides it: pages (PDF), slides
    /// (PPTX), sheets (XLSX, XLS, ODS) or chapters (EPUB); a DOCX or ODT has
    /// no pages until a program lays it out, and no count.
    #[serde(skip_serializing_if = "Option::is_none")]
    parts: Option<u64>,
    /// The text of the lines returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    start_line: u64,
    #[serde(skip_serializing_if = "loomfs_guest::is_zero")]
    end_line: u64,
    /// Lines of the whole text.
    #[serde(skip_serializing_if = "Option::is_none")]
    total_lines: Option<u64>,
    /// An archive's members (name, size, modified, type), in its order.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "loomfs_guest::tool::any_array")]
    members: Option<Vec<archive::Member>>,
    /// True when the read limit cut the text short, or the entry limit a
    /// listing.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

const DESCRIPTION: &str = "Text of a PDF, Word, PowerPoint, Excel, OpenDocument or EPUB file.";

/// The tool this component describes.
struct ReadDocument;

impl Tool for ReadDocument {
    type Args = Args;
    type Result = DocumentRead;

    fn about() -> About {
        About::new("read_document", DESCRIPTION, Permission::Read)
    }

    fn call(ctx: Context, args: Args) -> Result<Answer<DocumentRead>, ToolError> {
        call(ctx, args)
    }
}

/// `search_files` with `documents: true`, which the host routes here
/// (see [`search`]); `search_files` itself describes it.
struct SearchDocuments;

impl Tool for SearchDocuments {
    type Args = loomfs_search::Args;
    type Result = loomfs_search::Found;

    fn about() -> About {
        loomfs_search::about()
    }

    fn call(
        ctx: Context,
        args: loomfs_search::Args,
    ) -> Result<Answer<loomfs_search::Found>, ToolError> {
        loomfs_search::call(ctx, args, Some(&search::Reader))
    }
}

/// A call is a search when its arguments say so, else a read.
fn serve(ctx: Context, arguments: &str) -> Result<loomfs_guest::Output, ToolError> {
    if search::asked(arguments) {
        loomfs_guest::tool::call::<SearchDocuments>(ctx, arguments)
    } else {
        loomfs_guest::tool::call::<ReadDocument>(ctx, arguments)
    }
}

#[cfg(target_arch = "wasm32")]
impl loomfs_guest::Guest for ReadDocument {
    fn describe() -> loomfs_guest::Descriptor {
        loomfs_guest::tool::describe::<ReadDocument>()
    }

    fn call(ctx: Context, arguments: String) -> Result<loomfs_guest::Output, ToolError> {
        loomfs_guest::noted(|| serve(ctx, &arguments))
    }
}

#[cfg(target_arch = "wasm32")]
loomfs_guest::bindings::export!(ReadDocument with_types_in loomfs_guest::bindings);

// What the export would call, so that a native build sees it used.
#[cfg(not(target_arch = "wasm32"))]
const _: (
    fn() -> loomfs_guest::Descriptor,
    fn(Context, &str) -> Result<loomfs_guest::Output, ToolError>,
) = (loomfs_guest::tool::describe::<ReadDocument>, serve);

#[cfg(test)]
#[test]
fn readme_examples_fit_the_types_and_the_schemas() {
    loomfs_guest::check::readme_examples::<ReadDocument>(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/tools.md"
    )));
}

fn call(ctx: Context, args: Args) -> Result<Answer<DocumentRead>, ToolError> {
    let range = text::Range::new(args.offset, args.limit, args.tail)?;
    let at = locate(&ctx, &args.root, &args.path)?;
    let rel = at.rel.as_str();
    let file = File::open(&at.full).map_err(|e| match Kind::at(&at.full, true) {
        kind if kind.is_special() && kind != Kind::Unknown => special_file(rel, kind, "opened"),
        _ => io_error(rel, &e),
    })?;
    let meta = file.metadata().map_err(|e| io_error(rel, &e))?;
    match Kind::of(meta.file_type(), &at.full, true) {
        Kind::File => {}
        Kind::Directory => {
            return Err(ToolError::Refused(format!(
                "'{}' is a directory; use list_directory",
                at.shown()
            )));
        }
        kind => return Err(special_file(rel, kind, "opened")),
    }
    let size = meta.len();
    let max = max_document_bytes(&args.root);
    if size > max {
        return Err(ToolError::Refused(format!(
            "'{}' is {}, over this root's document limit (max_document_bytes) of {}",
            at.shown(),
            human_bytes(size),
            human_bytes(max)
        )));
    }
    // Read whole, and no more than the limit even if the file grew since.
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(rel, &e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::Refused(format!(
            "'{}' grew over this root's document limit (max_document_bytes) of {} while it \
             was read",
            at.shown(),
            human_bytes(max)
        )));
    }
    let place = Place {
        root: &args.root,
        rel,
        size,
        range,
        max: at.mount.max_read_bytes,
    };
    if let Some(format) = detect::format(&bytes) {
        if let Some(member) = &args.member {
            return Err(ToolError::Refused(format!(
                "'{}' is a {} document, not an archive: it has no member '{}'",
                shown(rel),
                format.name(),
                shown(member)
            )));
        }
        let extracted =
            extract(format, &bytes).map_err(|why| unreadable(rel, format.name(), why))?;
        return Ok(place.answer(format.key(), extracted, None));
    }
    let packing = archive::packing(&bytes).ok_or_else(|| not_a_document(rel, &bytes))?;
    match &args.member {
        None => members::list(&place, packing, &bytes, ctx.limits.max_entries as usize),
        Some(member) => members::read(&place, packing, &bytes, member),
    }
}

/// What a call reads and how: the root-relative path of the file, its
/// size, the lines asked for and the root's read limit.
struct Place<'a> {
    root: &'a str,
    rel: &'a str,
    size: u64,
    range: text::Range,
    max: u64,
}

fn unreadable(rel: &str, what: &str, why: String) -> ToolError {
    ToolError::Refused(format!("'{}' is not a readable {what}: {why}", shown(rel)))
}

/// Whether the root's deny list hides `path` (root-relative): the host's
/// verdict; a standalone run (no host) hides nothing.
fn hidden(root: &str, path: &str) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        bindings::loom_fs::tool::documents::hidden(root, path)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (root, path);
        false
    }
}

/// The host's limit for `root`; a standalone run (no host) has none but
/// the guest's memory.
fn max_document_bytes(root: &str) -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        bindings::loom_fs::tool::documents::max_document_bytes(root)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = root;
        u64::MAX
    }
}

fn extract(format: Format, bytes: &[u8]) -> Result<Extracted, String> {
    match format {
        Format::Pdf => pdf::extract(bytes),
        Format::Docx => office::docx(bytes),
        Format::Pptx => office::pptx(bytes),
        Format::Odt => office::odt(bytes),
        Format::Epub => office::epub(bytes),
        Format::Xlsx | Format::Xls | Format::Ods => sheets::extract(format, bytes),
    }
}

/// An I/O error of reading or inflating, naming the limit that bit when
/// one did.
pub(crate) fn read_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::OutOfMemory => {
            "it needs more memory than a call may have (tool_memory_bytes)".into()
        }
        _ => e.to_string(),
    }
}

fn not_a_document(rel: &str, bytes: &[u8]) -> ToolError {
    let hint = if loomfs_guest::content::is_binary(bytes) {
        "read_document reads PDF, DOCX, PPTX, ODT, XLSX, XLS, ODS and EPUB"
    } else {
        "it is text: use read_file"
    };
    ToolError::Refused(format!(
        "'{}' is not a document by its content; {hint}",
        shown(rel)
    ))
}

impl Place<'_> {
    /// The lines asked for of `extracted`, the text of a `format` (of the
    /// archive member `member`, when it is one).
    fn answer(
        &self,
        format: &str,
        extracted: Extracted,
        member: Option<&str>,
    ) -> Answer<DocumentRead> {
        let taken = self.range.take(&extracted.text, self.max);
        let unit = extracted.unit;
        let mut about = format!("'{}'", shown(self.rel));
        if let Some(member) = member {
            about.push_str(&format!(", member '{}'", shown(member)));
        }
        about.push_str(&format!(": {}", format.to_uppercase()));
        if let Some(unit) = unit {
            let plural = if extracted.units == 1 { "" } else { "s" };
            about.push_str(&format!(", {} {unit}{plural}", extracted.units));
        }
        if taken.total == 0 {
            about.push_str(", no text");
        } else {
            about.push_str(&format!(
                ", lines {}-{} of {}",
                taken.start, taken.end, taken.total
            ));
        }
        if taken.truncated {
            about.push_str(&format!(
                "; cut at the read limit: ask again with offset {}",
                taken.end + 1
            ));
        }
        if let Some(note) = &extracted.note {
            about.push_str("; ");
            about.push_str(note);
        }
        Answer {
            text: vec![taken.content.clone(), format!("{about}.")],
            result: DocumentRead {
                path: self.rel.to_string(),
                size: self.size,
                format: format.to_string(),
                member: member.map(str::to_string),
                parts: unit.map(|_| extracted.units),
                content: Some(taken.content),
                start_line: taken.start,
                end_line: taken.end,
                total_lines: Some(taken.total),
                truncated: taken.truncated,
                note: extracted.note,
                ..DocumentRead::default()
            },
            images: vec![],
        }
    }
}

#[cfg(test)]
mod tests;
