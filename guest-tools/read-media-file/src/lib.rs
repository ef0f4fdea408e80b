//! `read_media_file`: an image or an audio file as MCP image or audio content.
//!
//! The type comes from the file's bytes (the `infer` crate's magic-byte
//! matchers), never from its name alone: a `.png` holding JPEG bytes is sent
//! as `image/jpeg`, with a note. Images: png, jpeg, gif, webp, bmp; SVG, which
//! is text, comes back as its text. Audio: wav, mp3, ogg, flac, m4a. Anything
//! else is refused, naming what it is. Size is checked with a stat before
//! the read: a file over the root's `max_read_bytes` is refused (media cannot
//! be read by range). Special files are refused by type and never opened.

use std::fs::File;
use std::io::Read;

use loomfs_guest::content::{SNIFF_BYTES, is_binary};
use loomfs_guest::{
    About, Answer, Context, Image, Kind, PathArgs, Permission, ToolError, human_bytes, io_error,
    locate, shown, special_file,
};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Media {
    path: String,
    /// The MIME type, from the file's bytes.
    mime_type: &'static str,
    /// File size in bytes.
    size: u64,
    /// The text of an SVG (other media come back as image or audio content).
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// Set when the name's extension says another type than the bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

const DESCRIPTION: &str = "Read an image (png, jpeg, gif, webp, bmp) or audio file (wav, mp3, \
    ogg, flac, m4a) as image or audio content, its type told by its bytes; an SVG comes back \
    as its text. Other files are refused, naming their type. Files over the root's read limit \
    are refused.";

loomfs_guest::tool!(ReadMediaFile(PathArgs) -> Media, {
    About::new("read_media_file", DESCRIPTION, Permission::Read)
});

/// What the tool sends, by the MIME type `infer` finds, as MCP clients know
/// the types (`infer` says `audio/x-wav`, `audio/x-flac`, `audio/m4a`).
fn supported(found: &str) -> Option<&'static str> {
    Some(match found {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        "image/bmp" => "image/bmp",
        "audio/x-wav" => "audio/wav",
        "audio/mpeg" => "audio/mpeg",
        "audio/ogg" | "audio/opus" => "audio/ogg",
        "audio/x-flac" => "audio/flac",
        "audio/m4a" => "audio/mp4",
        _ => return None,
    })
}

const SVG: &str = "image/svg+xml";

/// The type a file's extension claims, for the note when the bytes differ.
fn claimed(rel: &str) -> Option<&'static str> {
    let ext = rel.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => SVG,
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        _ => return None,
    })
}

const KINDS: &str = "png, jpeg, gif, webp, bmp, svg; wav, mp3, ogg, flac, m4a";

fn call(ctx: Context, args: PathArgs) -> Result<Answer<Media>, ToolError> {
    let at = locate(&ctx, &args.root, &args.path)?;
    let rel = at.rel.as_str();
    let max = at.mount.max_read_bytes;
    // The host refuses to open special files, so an open never blocks; a
    // stat names what was refused.
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
    let too_large = |size: u64| {
        ToolError::Refused(format!(
            "'{}' is {}, over this root's read limit of {}; media files are read whole",
            shown(rel),
            human_bytes(size),
            human_bytes(max)
        ))
    };
    if size > max {
        return Err(too_large(size));
    }
    let mut data = Vec::with_capacity(size as usize);
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| io_error(rel, &e))?;
    if data.len() as u64 > max {
        return Err(too_large(data.len() as u64));
    }
    let size = data.len() as u64;
    // A BMP is told by "BM" alone: text starting so is not one (a real
    // header holds NUL bytes).
    let found = infer::get(&data)
        .map(|t| t.mime_type())
        .filter(|m| *m != "image/bmp" || is_binary(&data));
    let mime = match found.and_then(supported) {
        Some(mime) => mime,
        // `infer` calls a file starting with `<?xml` text/xml.
        None if found.is_none_or(is_text) && is_svg(&data) => SVG,
        None => return Err(refused(rel, found, &data, size)),
    };
    let note = claimed(rel)
        .filter(|c| *c != mime)
        .map(|c| format!("the name says {c}, the bytes are {mime}: sent as {mime}",));
    let mut text = Vec::new();
    let mut images = Vec::new();
    let mut content = None;
    if mime == SVG {
        let svg = String::from_utf8_lossy(&data).into_owned();
        text.push(svg.clone());
        content = Some(svg);
    } else {
        let what = if mime.starts_with("audio/") {
            "audio"
        } else {
            "image"
        };
        text.push(format!(
            "{what} '{}' ({mime}, {})",
            shown(rel),
            human_bytes(size)
        ));
        images.push(Image {
            mime_type: mime.into(),
            data,
        });
    }
    text.extend(note.clone());
    Ok(Answer {
        text,
        result: Media {
            path: rel.to_string(),
            mime_type: mime,
            size,
            content,
            note,
        },
        images,
    })
}

/// An SVG: text (no NUL byte) whose first markup, past an XML declaration,
/// comments or a doctype, is an `<svg` element, within its first 4 KiB.
fn is_svg(data: &[u8]) -> bool {
    if is_binary(data) {
        return false;
    }
    let head = &data[..data.len().min(SNIFF_BYTES)];
    let head = String::from_utf8_lossy(head);
    let mut rest = head.trim_start_matches('\u{feff}').trim_start();
    loop {
        let skip = if rest.starts_with("<?") {
            "?>"
        } else if rest.starts_with("<!--") {
            "-->"
        } else if rest.starts_with("<!") {
            ">"
        } else {
            break;
        };
        match rest.find(skip) {
            Some(i) => rest = rest[i + skip.len()..].trim_start(),
            None => return false,
        }
    }
    rest.starts_with("<svg") && rest[4..].starts_with(|c: char| c.is_whitespace() || c == '>')
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
}

/// The refusal of a file that is not a supported medium, naming its type.
fn refused(rel: &str, found: Option<&str>, data: &[u8], size: u64) -> ToolError {
    let what = match found {
        Some(mime) => mime.to_string(),
        None if is_binary(data) => "binary data of no type recognised".into(),
        None => "text".into(),
    };
    let hint = match found {
        found if found.is_none_or(is_text) && !is_binary(data) => "; read it with read_file",
        _ => "",
    };
    ToolError::Refused(format!(
        "'{}' is {what} ({}), not an image or audio type this tool sends ({KINDS}){hint}",
        shown(rel),
        human_bytes(size)
    ))
}
